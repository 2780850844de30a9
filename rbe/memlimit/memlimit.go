// Package memlimit enforces a memory limit on a job's process tree and
// reports its peak memory and whether the kernel OOM-killed it: with a
// cgroup v2 child group (memory.max, memory.peak, memory.events), a cgroup
// v1 child group (memory.limit_in_bytes, memory.max_usage_in_bytes,
// memory.oom_control), or, where neither can be created, RLIMIT_AS as a
// coarse fallback.
package memlimit

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Mode says how a Group enforces its limit: "cgroup2", "cgroup1", or "rlimit".
type Mode string

const (
	ModeCgroup2 Mode = "cgroup2"
	ModeCgroup1 Mode = "cgroup1"
	ModeRlimit  Mode = "rlimit"
)

// closeTimeout bounds how long Close waits for the group's processes to die
// and for the kernel to let the directory go.
const closeTimeout = 5 * time.Second

// sampleInterval is how often memory.current is sampled on cgroup v2
// kernels that lack memory.peak (before Linux 5.19).
const sampleInterval = 50 * time.Millisecond

// Group is a memory-limited group of processes.
type Group struct {
	mode  Mode
	dir   string // cgroup directory; "" in rlimit mode
	limit int64

	// pool, when set, may keep the group for another job once it is
	// closed (see Pool); fds then holds the group's files open, by name,
	// from one job to the next: opening a cgroup file cost more than
	// reading it.
	pool  *Pool
	fdsMu sync.Mutex
	fds   map[string]int

	mu     sync.Mutex
	peak   int64         // max memory.current sample (cgroup2 without memory.peak)
	stop   chan struct{} // stops the memory.current sampler; nil if none
	closed bool
}

// Overridable in tests.
var (
	// procCgroup is the calling thread's groups, not the process's: under
	// cgroup v1, Start puts one thread (it may be the main thread, whose
	// groups /proc/self/cgroup shows) in a job's group for a moment. A
	// group made from that view would be made inside the job's, and the
	// thread that started its job would go back into the job's group, to
	// be killed with it. No other goroutine runs on the thread Start
	// holds, so any thread reading its own groups sees the process's.
	procCgroup    = "/proc/thread-self/cgroup"
	procMountinfo = "/proc/self/mountinfo"
)

// New creates a group named name (a single path segment) with the given limit
// in bytes (0 = no limit, accounting only). It uses a child of this process's
// cgroup v2 group if that group can delegate the memory controller, else a
// child of this process's cgroup v1 memory group, else RLIMIT_AS.
func New(name string, limit int64) (*Group, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("memlimit: negative limit %d for group %q", limit, name)
	}
	g := &Group{limit: limit}

	where := parents()
	if parent := where.v2; parent != "" {
		dir := filepath.Join(parent, name)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			g.mode, g.dir = ModeCgroup2, dir
			if err := g.setupV2(); err != nil {
				unix.Rmdir(dir)
				return nil, err
			}
			return g, nil
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("memlimit: create cgroup: %w", err)
		}
	}

	if parent := where.v1; parent != "" {
		dir := filepath.Join(parent, name)
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			g.mode, g.dir = ModeCgroup1, dir
			if err := g.setupV1(); err != nil {
				unix.Rmdir(dir)
				return nil, err
			}
			return g, nil
		}
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("memlimit: create cgroup: %w", err)
		}
		// Read-only cgroupfs, no permission, ...: fall back to rlimit.
	}

	g.mode = ModeRlimit
	return g, nil
}

func validName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("memlimit: invalid group name %q: empty", name)
	case name == "." || name == "..":
		return fmt.Errorf("memlimit: invalid group name %q", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("memlimit: invalid group name %q: must be a single path segment", name)
	}
	return nil
}

func (g *Group) setupV2() error {
	if g.limit > 0 {
		if err := writeFile(g.file("memory.max"), strconv.FormatInt(g.limit, 10)); err != nil {
			return err
		}
		// Keep swap from hiding the limit; absent without swap accounting.
		writeFile(g.file("memory.swap.max"), "0")
	}
	if _, err := os.Stat(g.file("memory.peak")); err != nil {
		g.stop = make(chan struct{})
		go g.sample(g.stop)
	}
	return nil
}

func (g *Group) setupV1() error {
	if g.limit > 0 {
		// Must be set before any process joins the group.
		if err := writeFile(g.file("memory.limit_in_bytes"), strconv.FormatInt(g.limit, 10)); err != nil {
			return err
		}
		// Present only with swap accounting; memsw must be >= the limit,
		// so it is written second.
		writeFile(g.file("memory.memsw.limit_in_bytes"), strconv.FormatInt(g.limit, 10))
	}
	return nil
}

// Mode reports how the group enforces its limit.
func (g *Group) Mode() Mode { return g.mode }

// Path returns the cgroup directory, or "" in rlimit mode.
func (g *Group) Path() string { return g.dir }

// PlacesAtStart reports whether Start puts a process in the group as it
// starts. In rlimit mode with a limit it does not: a limit is set on a
// process that exists, so the process is held until Add has set it.
func (g *Group) PlacesAtStart() bool { return g.mode != ModeRlimit || g.limit == 0 }

// v1Moves is held while Start has a thread in a cgroup v1 group.
var v1Moves sync.Mutex

// Start starts cmd with start so that its process is in the group before
// it runs anything, with no need to hold it until Add has moved it: under
// cgroup v2 it is cloned into the group (CLONE_INTO_CGROUP, which needs
// Linux 5.7, as cgroup v2's memory.peak needs 5.19); under cgroup v1 it is
// forked from an OS thread the group takes in for the moment, whose groups
// a child inherits. In rlimit mode start alone starts it (see
// PlacesAtStart).
//
// Under cgroup v1 one Start at a time moves a thread: when two threads of
// one process move into two groups at once, Linux (6.18, at least) may go on
// listing one of them in the other's group after both have left, and
// processes that thread forks later land there too, where the end of that
// group's job kills them.
func (g *Group) Start(cmd *exec.Cmd, start func(*exec.Cmd) error) error {
	switch g.mode {
	case ModeCgroup2:
		dir, err := os.Open(g.dir)
		if err != nil {
			return fmt.Errorf("memlimit: %w", err)
		}
		defer dir.Close()
		attr := syscall.SysProcAttr{}
		if cmd.SysProcAttr != nil {
			attr = *cmd.SysProcAttr
		}
		attr.UseCgroupFD, attr.CgroupFD = true, int(dir.Fd())
		cmd.SysProcAttr = &attr
		return start(cmd)
	case ModeCgroup1:
		leave := filepath.Join(filepath.Dir(g.dir), "tasks")
		started := make(chan error, 1)
		go func() {
			v1Moves.Lock()
			defer v1Moves.Unlock()
			// A thread that could not leave the group is not unlocked:
			// the runtime ends it with this goroutine (the main thread it
			// keeps, idle, and Close then reports it in the group).
			runtime.LockOSThread()
			tid := strconv.Itoa(unix.Gettid())
			if err := g.write("tasks", tid); err != nil {
				runtime.UnlockOSThread()
				started <- err
				return
			}
			err := start(cmd)
			if writeKept(leave, tid) == nil {
				runtime.UnlockOSThread()
			}
			started <- err
		}()
		return <-started
	}
	return start(cmd)
}

// Add moves a started process into the group. In rlimit mode it sets
// RLIMIT_AS on that process when the limit is non-zero; the limit applies
// only to address space mapped afterwards and is inherited by children
// started afterwards.
func (g *Group) Add(pid int) error {
	if g.mode == ModeRlimit {
		if g.limit == 0 {
			return nil
		}
		lim := unix.Rlimit{Cur: uint64(g.limit), Max: uint64(g.limit)}
		if err := unix.Prlimit(pid, unix.RLIMIT_AS, &lim, nil); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("memlimit: set RLIMIT_AS=%d on pid %d: %w", g.limit, pid, err)
		}
		return nil
	}
	// A process that has already exited (a fast payload) needs no limit.
	if err := g.write("cgroup.procs", strconv.Itoa(pid)); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Stats reports the group's peak memory in bytes and whether the kernel
// OOM-killed a process in it. In rlimit mode peak is 0 (use the rusage
// Maxrss of the process instead) and oomKilled is false. Call it before
// Close.
func (g *Group) Stats() (peak int64, oomKilled bool, err error) {
	var events string
	switch g.mode {
	case ModeRlimit:
		return 0, false, nil
	case ModeCgroup2:
		peak, err = g.readInt("memory.peak")
		if errors.Is(err, fs.ErrNotExist) {
			peak, err = g.samplePeak()
		}
		events = "memory.events"
	case ModeCgroup1:
		peak, err = g.readInt("memory.max_usage_in_bytes")
		events = "memory.oom_control"
	}
	if err != nil {
		return 0, false, err
	}
	kills, err := g.readKey(events, "oom_kill")
	if err != nil {
		return 0, false, err
	}
	return peak, kills > 0, nil
}

// samplePeak takes one more memory.current sample and returns the largest
// seen so far.
func (g *Group) samplePeak() (int64, error) {
	cur, err := g.readInt("memory.current")
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil {
		g.peak = max(g.peak, cur)
	}
	return g.peak, err
}

func (g *Group) sample(stop chan struct{}) {
	t := time.NewTicker(sampleInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			g.samplePeak()
		}
	}
}

// Close kills every process still in the group and removes the group. It
// is safe to call more than once.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	if g.stop != nil {
		close(g.stop)
		g.stop = nil
	}
	if g.dir != "" {
		deadline := time.Now().Add(closeTimeout)
		if err := g.killAll(deadline); err != nil {
			return err
		}
		if g.pool == nil || !g.pool.keep(g) {
			closeFiles(g.takeFiles())
			if err := rmdir(g.dir, deadline); err != nil {
				return err
			}
		}
	}
	g.closed = true
	return nil
}

// killAll sends SIGKILL to every process in the group until it is empty.
// While a thread of this process is in the group it kills nothing and
// reports an error: this process is not to be killed, and what that thread
// forked meanwhile is listed too, and is not the job's.
func (g *Group) killAll(deadline time.Time) error {
	procs := g.file("cgroup.procs")
	self := os.Getpid()
	for {
		data, err := g.read("cgroup.procs")
		if errors.Is(err, fs.ErrNotExist) {
			return nil // already removed
		}
		if err != nil {
			return fmt.Errorf("memlimit: read %s: %w", procs, err)
		}
		pids := strings.Fields(string(data))
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("memlimit: %s still lists pids %v after %v", procs, pids, closeTimeout)
		}
		if slices.Contains(pids, strconv.Itoa(self)) {
			return fmt.Errorf("memlimit: a thread of this process (%d) is in %s, so none of %v was killed", self, g.dir, pids)
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil && pid > 0 {
				unix.Kill(pid, unix.SIGKILL)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rmdir removes a cgroup directory, retrying while the kernel still reports
// it busy (exiting processes).
func rmdir(dir string, deadline time.Time) error {
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("memlimit: remove cgroup %s: %w", dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (g *Group) file(name string) string { return filepath.Join(g.dir, name) }

// groupParents is where New makes groups: this process's cgroup v2
// directory and its cgroup v1 memory directory, each "" where it cannot.
type groupParents struct{ v2, v1 string }

// parents finds the groupParents once: a process's own groups stay where
// they are while it runs, and finding them reads /proc/self/mountinfo,
// which cost a quarter of a worker's CPU in an array of short jobs.
var parents = sync.OnceValue(findParents)

func findParents() groupParents {
	var p groupParents
	if dir, ok := v2Parent(); ok {
		p.v2 = dir
	}
	if dir, ok := v1Parent(); ok {
		p.v1 = dir
	}
	return p
}

// v2Parent returns this process's cgroup v2 directory if the memory
// controller is available there and enabled (or can be enabled) for its
// children.
func v2Parent() (string, bool) {
	dir, ok := ownCgroupDir("", "cgroup2", "")
	if !ok {
		return "", false
	}
	if !hasWord(filepath.Join(dir, "cgroup.controllers"), "memory") {
		return "", false
	}
	subtree := filepath.Join(dir, "cgroup.subtree_control")
	if !hasWord(subtree, "memory") && writeFile(subtree, "+memory") != nil {
		// Typically EBUSY: the group holds processes and is not the root.
		return "", false
	}
	return dir, true
}

// v1Parent returns this process's cgroup v1 memory directory.
func v1Parent() (string, bool) {
	dir, ok := ownCgroupDir("memory", "cgroup", "memory")
	if !ok {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(dir, "memory.limit_in_bytes")); err != nil {
		return "", false
	}
	return dir, true
}

// ownCgroupDir returns the directory of this process's cgroup for the given
// v1 controller ("" for the v2 hierarchy), on a mount of type fstype whose
// super options include opt ("" for any).
func ownCgroupDir(controller, fstype, opt string) (string, bool) {
	cg, err := os.ReadFile(procCgroup)
	if err != nil {
		return "", false
	}
	path, ok := cgroupPath(cg, controller)
	if !ok {
		return "", false
	}
	mountpoint, root := "/sys/fs/cgroup/"+controller, "/"
	if mi, err := os.ReadFile(procMountinfo); err == nil {
		if mp, r, ok := findMount(mi, fstype, opt); ok {
			mountpoint, root = mp, r
		} else if controller == "" {
			return "", false
		}
	}
	if root != "/" {
		path = strings.TrimPrefix(path, root)
	}
	return filepath.Join(mountpoint, path), true
}

// cgroupPath finds the path of the given v1 controller ("" for the v2
// unified hierarchy) in the content of a /proc cgroup file.
func cgroupPath(data []byte, controller string) (string, bool) {
	for line := range strings.Lines(string(data)) {
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 {
			continue
		}
		if controller == "" && f[0] == "0" && f[1] == "" {
			return f[2], true
		}
		if controller != "" && hasField(f[1], ",", controller) {
			return f[2], true
		}
	}
	return "", false
}

// findMount finds the first mount of type fstype whose super options
// include opt ("" for any) in /proc/self/mountinfo content, and returns its
// mount point and the root of the mount within its filesystem.
func findMount(data []byte, fstype, opt string) (mountpoint, root string, ok bool) {
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(f) || f[sep+1] != fstype {
			continue
		}
		if opt == "" || hasField(f[sep+3], ",", opt) {
			return unescape(f[4]), unescape(f[3]), true
		}
	}
	return "", "", false
}

var unescaper = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

func unescape(s string) string { return unescaper.Replace(s) }

func hasField(s, sep, want string) bool {
	return slices.Contains(strings.Split(s, sep), want)
}

// hasWord reports whether the whitespace-separated file contains word.
func hasWord(path, word string) bool {
	data, err := os.ReadFile(path)
	return err == nil && slices.Contains(strings.Fields(string(data)), word)
}

// writeFile and readFile write and read a group's file with bare system
// calls: an os.File's set-up (a stat, a try at the poller) and its release
// cost as much again as the open itself, and a job's start and end touch
// eight such files.
func writeFile(path, value string) error {
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		_, err = unix.Write(fd, []byte(value))
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("memlimit: write %q to %s: %w", value, path, err)
	}
	return nil
}

func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return readAll(fd, path)
}

// readAll reads the file open as fd from its start.
func readAll(fd int, path string) ([]byte, error) {
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// read and write are readFile and writeFile of the group's file name,
// through the descriptor kept in fds when the group is a Pool's.
func (g *Group) read(name string) ([]byte, error) {
	path := g.file(name)
	if g.pool == nil {
		return readFile(path)
	}
	fd, err := g.fd(name, false)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return readAll(fd, path)
}

func (g *Group) write(name, value string) error {
	path := g.file(name)
	if g.pool == nil {
		return writeFile(path, value)
	}
	fd, err := g.fd(name, true)
	if err == nil {
		_, err = unix.Pwrite(fd, []byte(value), 0)
	}
	if err != nil {
		return fmt.Errorf("memlimit: write %q to %s: %w", value, path, err)
	}
	return nil
}

// fd returns the group's file name open for reading, or for writing,
// opening it the first time.
func (g *Group) fd(name string, writing bool) (int, error) {
	key, mode := name, unix.O_RDONLY
	if writing {
		key, mode = "w "+name, unix.O_WRONLY
	}
	g.fdsMu.Lock()
	defer g.fdsMu.Unlock()
	if fd, ok := g.fds[key]; ok {
		return fd, nil
	}
	fd, err := unix.Open(g.file(name), mode|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	if g.fds == nil {
		g.fds = map[string]int{}
	}
	g.fds[key] = fd
	return fd, nil
}

// takeFiles hands over the descriptors fds holds, which the group no
// longer uses.
func (g *Group) takeFiles() map[string]int {
	g.fdsMu.Lock()
	defer g.fdsMu.Unlock()
	fds := g.fds
	g.fds = nil
	return fds
}

// closeFiles closes the descriptors of fds.
func closeFiles(fds map[string]int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// writeKept is writeFile through a descriptor kept open for the life of
// the process: the tasks file of the groups' parent, which each start
// under cgroup v1 writes to.
func writeKept(path, value string) error {
	parentFiles.Lock()
	fd, ok := parentFiles.fds[path]
	var err error
	if !ok {
		if fd, err = unix.Open(path, unix.O_WRONLY|unix.O_CLOEXEC, 0); err == nil {
			parentFiles.fds[path] = fd
		}
	}
	parentFiles.Unlock()
	if err == nil {
		_, err = unix.Pwrite(fd, []byte(value), 0)
	}
	if err != nil {
		return fmt.Errorf("memlimit: write %q to %s: %w", value, path, err)
	}
	return nil
}

var parentFiles = struct {
	sync.Mutex
	fds map[string]int
}{fds: map[string]int{}}

func (g *Group) readInt(name string) (int64, error) {
	path := g.file(name)
	data, err := g.read(name)
	if err != nil {
		return 0, fmt.Errorf("memlimit: read %s: %w", path, err)
	}
	n, err := strconv.ParseInt(string(bytes.TrimSpace(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("memlimit: parse %s: %w", path, err)
	}
	return n, nil
}

// readKey reads the value of key in a flat-keyed file ("key value" lines);
// a missing key reads as 0.
func (g *Group) readKey(name, key string) (int64, error) {
	path := g.file(name)
	data, err := g.read(name)
	if err != nil {
		return 0, fmt.Errorf("memlimit: read %s: %w", path, err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("memlimit: parse %s %s: %w", path, key, err)
			}
			return n, nil
		}
	}
	return 0, nil
}

// Sweep kills the processes of, and removes, the groups beside the ones New
// creates whose names stale accepts — the groups of a previous process that
// died without closing them — with any groups inside them. It returns how
// many it removed; one it cannot remove is reported, and the rest are
// removed still.
func Sweep(stale func(name string) bool) (int, error) {
	removed := 0
	var errs []error
	where := parents()
	for _, parent := range []string{where.v2, where.v1} {
		if parent == "" {
			continue
		}
		entries, err := os.ReadDir(parent)
		if err != nil {
			errs = append(errs, fmt.Errorf("memlimit: list %s: %w", parent, err))
			continue
		}
		for _, e := range entries {
			if !e.IsDir() || !stale(e.Name()) {
				continue
			}
			if err := removeTree(filepath.Join(parent, e.Name()), time.Now().Add(closeTimeout)); err != nil {
				errs = append(errs, err)
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// removeTree kills the processes of the group at dir and of the groups
// inside it, and removes them all, the innermost first.
func removeTree(dir string, deadline time.Time) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("memlimit: list %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name()), deadline); err != nil {
				return err
			}
		}
	}
	g := &Group{dir: dir}
	if err := g.killAll(deadline); err != nil {
		return err
	}
	return rmdir(dir, deadline)
}
