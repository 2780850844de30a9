package memlimit

import (
	"errors"
	"math"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// MaxKept bounds how many empty groups a Pool keeps.
const MaxKept = 64

// keepUsage is the most memory a closed group may still have charged to be
// kept: what a job leaves charged (the pages of files it wrote) would
// count towards the next job's peak and limit.
const keepUsage = 1 << 20

// Pool makes the groups of one owner, named its prefix and a number, and
// keeps those closed empty to hand out again for the same limit: in an
// array of short jobs, making a cgroup v1 memory group and removing it
// again were a quarter of the worker's CPU, as the kernel makes and removes
// the thirty-odd files of each group and takes it offline.
//
// Only cgroup v1 groups are kept, and only those the kernel killed nothing
// in for memory, that hold at most keepUsage charged and whose limit is
// still theirs; their peak is reset
// (memory.max_usage_in_bytes) as they are kept. Under cgroup v2 the peak
// can be reset only through one open file (Linux 6.12), so groups are made
// anew.
type Pool struct {
	prefix string

	mu     sync.Mutex
	free   map[int64][]keptGroup // by limit
	kept   int
	closed bool
}

// made numbers the groups of every Pool of this process, so that two
// with one prefix name theirs apart.
var made atomic.Int64

// NewPool returns a Pool whose groups are named prefix and a number (see
// New for what a name may be).
func NewPool(prefix string) *Pool { return &Pool{prefix: prefix, free: map[int64][]keptGroup{}} }

// keptGroup is a group a Pool keeps: its directory, and its files still
// open (Group.fds).
type keptGroup struct {
	dir   string
	files map[string]int
}

// New returns a group with the given limit: a kept one, or one New makes.
func (p *Pool) New(limit int64) (*Group, error) {
	p.mu.Lock()
	if free := p.free[limit]; len(free) > 0 {
		k := free[len(free)-1]
		p.free[limit] = free[:len(free)-1]
		p.kept--
		p.mu.Unlock()
		return &Group{mode: ModeCgroup1, dir: k.dir, limit: limit, pool: p, fds: k.files}, nil
	}
	p.mu.Unlock()
	g, err := New(p.prefix+strconv.FormatInt(made.Add(1), 10), limit)
	if err != nil {
		return nil, err
	}
	g.pool = p
	return g, nil
}

// keep takes in g, closed and found empty, if it may serve another job,
// and reports whether it did.
func (p *Pool) keep(g *Group) bool {
	if g.mode != ModeCgroup1 {
		return false
	}
	usage, err := g.readInt("memory.usage_in_bytes")
	if err != nil || usage > keepUsage {
		return false
	}
	// A job may write its own group's files: a limit it changed is not
	// passed on to the next.
	limit, err := g.readInt("memory.limit_in_bytes")
	if err != nil || limit != g.limitAsRead() {
		return false
	}
	// Read once its processes are all gone, the count of kills stays 0
	// for the next job to read.
	kills, err := g.readKey("memory.oom_control", "oom_kill")
	if err != nil || kills > 0 || g.write("memory.max_usage_in_bytes", "0") != nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.kept >= MaxKept {
		return false
	}
	p.free[g.limit] = append(p.free[g.limit], keptGroup{g.dir, g.takeFiles()})
	p.kept++
	return true
}

// limitAsRead is the group's limit as its memory.limit_in_bytes reads:
// rounded down to pages, or, for none, the largest count of pages.
func (g *Group) limitAsRead() int64 {
	page := int64(os.Getpagesize())
	if g.limit == 0 {
		return math.MaxInt64 &^ (page - 1)
	}
	return g.limit &^ (page - 1)
}

// Close removes the groups kept; those closed from then on are removed
// too.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	free := p.free
	p.free, p.kept = map[int64][]keptGroup{}, 0
	p.mu.Unlock()
	var errs []error
	for _, ks := range free {
		for _, k := range ks {
			closeFiles(k.files)
			errs = append(errs, rmdir(k.dir, time.Now().Add(closeTimeout)))
		}
	}
	return errors.Join(errs...)
}
