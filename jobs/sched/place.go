package sched

// Placement is a chain of small checks, in the spirit of Nomad's
// feasibility checkers: each looks at one worker for one node of a job and
// says why it rejects it, or nothing. The same chain answers three
// questions:
//
//	could the job ever run here (on the worker empty)?  -> pending reasons
//	can it run here now (with what is free)?            -> the round's fit
//	why not, worker by worker?                          -> rbs job show
//
// A job of N nodes takes N distinct workers that all pass, all at once or
// not at all. Among the workers that pass, the one the job fills most
// tightly (CPUs, memory, GPUs and slots, as fractions of the worker) wins.

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// devices is a worker's GPUs and the jobs holding them: the accounter,
// which hands a device to one job at a time.
type devices struct {
	gpus []*workerpb.Gpu // as registered, in index order
	held map[string]Key  // by device id
}

// deviceID names a GPU: its UUID, else its index.
func deviceID(g *workerpb.Gpu) string {
	if g.Uuid != "" {
		return g.Uuid
	}
	return fmt.Sprintf("index-%d", g.Index)
}

func (d *devices) free() int { return len(d.gpus) - len(d.held) }

// take hands n free devices to k, in index order; nil when fewer are free.
func (d *devices) take(k Key, n int) []*workerpb.Gpu {
	if n > d.free() {
		return nil
	}
	var out []*workerpb.Gpu
	for _, g := range d.gpus {
		if len(out) == n {
			break
		}
		if _, busy := d.held[deviceID(g)]; !busy {
			d.held[deviceID(g)] = k
			out = append(out, g)
		}
	}
	return out
}

// hold records that k holds the device with id; a device unknown to the
// worker (gone since) is held by no one.
func (d *devices) hold(k Key, id string) {
	for _, g := range d.gpus {
		if deviceID(g) == id {
			d.held[id] = k
		}
	}
}

// release frees what k holds.
func (d *devices) release(k Key) {
	for id, holder := range d.held {
		if holder == k {
			delete(d.held, id)
		}
	}
}

// when a check looks at a worker: ever (empty), now (with what is free),
// or now but for maintenance windows (to tell that they are what holds a
// job back).
type when int

const (
	ever when = iota
	current
	currentUnreserved
)

// check rejects a worker for one node of a job, saying why when say is
// set (else with the word rejected, to spare a round that only asks
// whether a worker fits the formatting), or returns "".
type check func(c *Core, j *job, w *worker, at when, say bool) string

// rejected is a check's answer when it need not say why.
const rejected = "rejected"

// checks is the placement chain, in order: the first rejection is the
// worker's reason.
var checks = []check{checkSlots, checkPlatform, checkProperties, checkContainer, checkCPUs, checkMemory, checkGPUs, checkWindow}

func checkSlots(_ *Core, _ *job, w *worker, at when, say bool) string {
	switch {
	case w.jobSlots == 0:
		return "no job slots"
	case at != ever && !w.connected:
		return "disconnected"
	case at != ever && len(w.running) >= w.jobSlots && !say:
		return rejected
	case at != ever && len(w.running) >= w.jobSlots:
		return fmt.Sprintf("all %s busy", units.Plural(w.jobSlots, "job slot", "job slots"))
	}
	return ""
}

func checkPlatform(_ *Core, j *job, w *worker, _ when, say bool) string {
	if j.spec.Platform == "" || j.spec.Platform == w.platform {
		return ""
	}
	if !say {
		return rejected
	}
	if w.platform == "" {
		return fmt.Sprintf("no platform known, the job needs %s", j.spec.Platform)
	}
	return fmt.Sprintf("platform %s, the job needs %s", w.platform, j.spec.Platform)
}

func checkProperties(_ *Core, j *job, w *worker, _ when, say bool) string {
	switch {
	case hasAll(w.properties, j.spec.Constraints):
		return ""
	case !say:
		return rejected
	}
	var lacks []string
	for _, p := range j.spec.Constraints {
		if !w.properties[p] {
			lacks = append(lacks, p)
		}
	}
	return "lacks the property " + strings.Join(lacks, ", ")
}

// hasAll reports whether every one of want is among have.
func hasAll(have map[string]bool, want []string) bool {
	for _, p := range want {
		if !have[p] {
			return false
		}
	}
	return true
}

func checkContainer(_ *Core, j *job, w *worker, _ when, say bool) string {
	if j.spec.Container != "" && w.containerRuntime == "" {
		if !say {
			return rejected
		}
		return "no container runtime (podman or docker), the job runs in " + j.spec.Container
	}
	return ""
}

func checkCPUs(_ *Core, j *job, w *worker, at when, say bool) string {
	asked := cpusOf(j.spec)
	used, _ := w.used()
	switch {
	case !say && (w.cpus < asked || at != ever && w.cpus-used < asked):
		return rejected
	case w.cpus < asked:
		return fmt.Sprintf("only %s (asked %d)", units.Plural(int(w.cpus), "CPU", "CPUs"), asked)
	case at != ever && w.cpus-used < asked:
		return fmt.Sprintf("not enough free CPUs (asked %d, free %d)", asked, w.cpus-used)
	}
	return ""
}

func checkMemory(_ *Core, j *job, w *worker, at when, say bool) string {
	asked := j.spec.MemoryBytes
	_, used := w.used()
	switch {
	case !say && (w.memory < asked || at != ever && w.memory-used < asked):
		return rejected
	case w.memory < asked:
		return fmt.Sprintf("only %s of memory (asked %s)", units.Human(w.memory), units.Human(asked))
	case at != ever && w.memory-used < asked:
		return fmt.Sprintf("not enough free memory (asked %s, free %s)", units.Human(asked), units.Human(w.memory-used))
	}
	return ""
}

func checkGPUs(_ *Core, j *job, w *worker, at when, say bool) string {
	asked := int(j.spec.Gpus)
	switch {
	case asked == 0:
		return ""
	case !say && (len(w.dev.gpus) < asked || at != ever && w.dev.free() < asked):
		return rejected
	case len(w.dev.gpus) < asked:
		return fmt.Sprintf("only %s (asked %d)", units.Plural(len(w.dev.gpus), "GPU", "GPUs"), asked)
	case at != ever && w.dev.free() < asked:
		return fmt.Sprintf("not enough free GPUs (asked %d, free %d)", asked, w.dev.free())
	}
	return ""
}

// reject runs the chain for one node of j on w and says why the first
// check that turns w down does.
func (c *Core) reject(j *job, w *worker, at when) string {
	for _, ch := range checks {
		if why := ch(c, j, w, at, true); why != "" {
			return why
		}
	}
	return ""
}

// fits reports whether w passes the whole chain for one node of j.
func (c *Core) fits(j *job, w *worker, at when) bool {
	if at == current && len(c.windows) == 0 {
		// What the chain asks of a worker now, cheapest first, without
		// calling each check (TestFitsAsTheChain).
		s := j.spec
		return w.connected && len(w.running) < w.jobSlots &&
			w.cpus-w.usedCPUs >= cpusOf(s) && w.memory-w.usedMem >= s.MemoryBytes && w.dev.free() >= int(s.Gpus) &&
			(s.Platform == "" || s.Platform == w.platform) && (s.Container == "" || w.containerRuntime != "") &&
			hasAll(w.properties, s.Constraints)
	}
	for _, ch := range checks {
		if ch(c, j, w, at, false) != "" {
			return false
		}
	}
	return true
}

// nodesOf is how many workers j runs on, at most.
func nodesOf(s *jobspb.JobSpec) int { return max(int(s.Nodes), 1) }

// minNodesOf is how many workers j needs to start: an elastic job's
// min_nodes, else all its nodes.
func minNodesOf(s *jobspb.JobSpec) int {
	if s.Elastic {
		return max(int(s.MinNodes), 1)
	}
	return nodesOf(s)
}

// placeable returns a pending reason when the registered workers could
// never run j, however many jobs end: fewer than its nodes pass the chain
// on an empty worker.
func (c *Core) placeable(j *job, workers []*worker) string {
	withSlots, ofPlatform, fit := 0, 0, 0
	for _, w := range workers {
		if w.jobSlots == 0 {
			continue
		}
		withSlots++
		if checkPlatform(c, j, w, ever, false) != "" {
			continue
		}
		ofPlatform++
		if c.fits(j, w, ever) {
			if fit++; fit >= minNodesOf(j.spec) && !(packs(j.spec) && j.spec.PackRequired) {
				return ""
			}
		}
	}
	n := minNodesOf(j.spec)
	switch {
	case fit >= n && packs(j.spec) && j.spec.PackRequired:
		return c.packable(j, workers)
	case withSlots == 0:
		return ReasonNoWorkers
	case ofPlatform == 0:
		return ReasonNoWorkerOfPlatform
	case fit < n:
		return ReasonNoWorkerFits
	}
	return ""
}

// tooLarge says why no registered worker with job slots of s's platform
// could ever hold one node of s, for its size alone (CPUs, memory, GPUs),
// naming what the largest have: "only 1 CPU on each (asked 4)"; "" when
// one could, or while none of the platform is registered.
func (c *Core) tooLarge(s *jobspb.JobSpec) string {
	j := &job{spec: s}
	var ws []*worker
	for _, w := range c.workers {
		if w.jobSlots == 0 || checkPlatform(c, j, w, ever, false) != "" {
			continue
		}
		if checkCPUs(c, j, w, ever, false) == "" && checkMemory(c, j, w, ever, false) == "" && checkGPUs(c, j, w, ever, false) == "" {
			return ""
		}
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		return ""
	}
	var cpus, gpus int
	var mem int64
	same := [3]bool{true, true, true}
	for i, w := range ws {
		if i > 0 {
			same[0] = same[0] && int(w.cpus) == cpus
			same[1] = same[1] && w.memory == mem
			same[2] = same[2] && len(w.dev.gpus) == gpus
		}
		cpus, mem, gpus = max(cpus, int(w.cpus)), max(mem, w.memory), max(gpus, len(w.dev.gpus))
	}
	on := func(same bool) string {
		switch {
		case len(ws) == 1:
			return " on " + ws[0].name
		case same:
			return " on each"
		}
		return " on the largest"
	}
	var short []string
	if asked := int(cpusOf(s)); asked > cpus {
		short = append(short, fmt.Sprintf("only %s%s (asked %d)", units.Plural(cpus, "CPU", "CPUs"), on(same[0]), asked))
	}
	if s.MemoryBytes > mem {
		short = append(short, fmt.Sprintf("only %s of memory%s (asked %s)", units.Human(mem), on(same[1]), units.Human(s.MemoryBytes)))
	}
	if asked := int(s.Gpus); asked > gpus {
		short = append(short, fmt.Sprintf("only %s%s (asked %d)", units.Plural(gpus, "GPU", "GPUs"), on(same[2]), asked))
	}
	if len(short) == 0 {
		return fmt.Sprintf("none has %s, %s of memory and %s at once (asked per node)",
			units.Plural(int(cpusOf(s)), "CPU", "CPUs"), units.Human(s.MemoryBytes), units.Plural(int(s.Gpus), "GPU", "GPUs"))
	}
	return strings.Join(short, ", ")
}

// score is how loosely one node of j would fill w: the fractions of its
// CPUs, memory, GPUs and job slots left free after it, summed. Lower is
// tighter, and wins.
func score(j *job, w *worker) float64 {
	frac := func(free, total float64) float64 {
		if total <= 0 {
			return 0
		}
		return free / total
	}
	cpus, mem := w.used()
	s := j.spec
	return frac(float64(w.cpus-cpus-cpusOf(s)), float64(w.cpus)) +
		frac(float64(w.memory-mem-s.MemoryBytes), float64(w.memory)) +
		frac(float64(w.dev.free()-int(s.Gpus)), float64(len(w.dev.gpus))) +
		frac(float64(w.jobSlots-len(w.running)-1), float64(w.jobSlots))
}

// scored is a worker that passes the chain for a node of a job, with how
// loosely the node would fill it (score).
type scored struct {
	w *worker
	s float64
}

// tighter orders candidates: the tightest first, then by name.
func tighter(a, b scored) bool { return byTightness(a, b) < 0 }

// topCandidates returns the k tightest of the workers, given in name
// order, that pass the chain for a node of j and keep res's promise,
// tightest first; and the last of those when it left any out (the
// boundary: every worker it left out is looser), else nil.
func (c *Core) topCandidates(j *job, workers []*worker, res *reservation, t time.Time, at when, k int) ([]scored, *scored) {
	var top loosest // a max-heap: the loosest kept on top
	for _, w := range workers {
		if !c.fits(j, w, at) || !res.allows(j, w, t) {
			continue
		}
		s := scored{w, score(j, w)}
		switch {
		case len(top.scored) < k:
			heap.Push(&top, s)
		case tighter(s, top.scored[0]):
			top.scored[0] = s
			heap.Fix(&top, 0)
			top.cut = true
		default:
			top.cut = true
		}
	}
	ok := top.scored
	slices.SortFunc(ok, byTightness)
	if !top.cut {
		return ok, nil
	}
	boundary := ok[len(ok)-1]
	return ok, &boundary
}

// byTightness compares candidates for sorting and searching: by score,
// then by name; 0 for the same worker at the same score.
func byTightness(a, b scored) int {
	if c := cmp.Compare(a.s, b.s); c != 0 {
		return c
	}
	return strings.Compare(a.w.name, b.w.name)
}

// loosest is a heap of candidates with the loosest on top.
type loosest struct {
	scored []scored
	cut    bool // some were left out
}

func (h loosest) Len() int           { return len(h.scored) }
func (h loosest) Less(a, b int) bool { return tighter(h.scored[b], h.scored[a]) }
func (h loosest) Swap(a, b int)      { h.scored[a], h.scored[b] = h.scored[b], h.scored[a] }
func (h *loosest) Push(x any)        { h.scored = append(h.scored, x.(scored)) }
func (h *loosest) Pop() any {
	x := h.scored[len(h.scored)-1]
	h.scored = h.scored[:len(h.scored)-1]
	return x
}

// pick returns the workers j starts on, one per node, from its candidates:
// the tightest, as many as its nodes; nil when fewer than its nodes pass.
// An elastic job takes as many as pass, from its min_nodes up to its
// nodes.
func pick(j *job, ok []scored) []*worker {
	if len(ok) < minNodesOf(j.spec) {
		return nil
	}
	out := make([]*worker, min(len(ok), nodesOf(j.spec)))
	for i := range out {
		out[i] = ok[i].w
	}
	return out
}

// fit picks the workers j starts on now, one per node, all distinct and
// each passing the chain, the tightest first, keeping res's promise; nil
// when fewer than its nodes do.
// A packed gang looks at every worker that passes.
func (c *Core) fit(j *job, workers []*worker, res *reservation, t time.Time, at when) []*worker {
	if packs(j.spec) {
		ok, _ := c.topCandidates(j, workers, res, t, at, len(workers))
		return packed(j, ok)
	}
	ok, _ := c.topCandidates(j, workers, res, t, at, nodesOf(j.spec))
	return pick(j, ok)
}

// packs reports whether jobs of s are gangs packed by a topology label.
func packs(s *jobspb.JobSpec) bool { return s.Pack != "" && nodesOf(s) > 1 }

// explain says why each worker cannot run a node of j now, grouped by
// reason, most workers first: "2 workers: not enough free memory (asked
// 8.0 GiB, free 4.0 GiB)". Workers that could are counted too, as a gang
// needs as many as it has nodes.
func (c *Core) explain(j *job) []string {
	count := map[string]int{}
	for _, w := range c.sortedWorkers() {
		why := c.reject(j, w, current)
		if why == "" {
			why = "could run it now"
		}
		count[why]++
	}
	reasons := make([]string, 0, len(count))
	for r := range count {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(a, b int) bool {
		if count[reasons[a]] != count[reasons[b]] {
			return count[reasons[a]] > count[reasons[b]]
		}
		return reasons[a] < reasons[b]
	})
	out := make([]string, len(reasons))
	for i, r := range reasons {
		noun := "workers"
		if count[r] == 1 {
			noun = "worker"
		}
		out[i] = fmt.Sprintf("%d %s: %s", count[r], noun, r)
	}
	switch lo, hi := minNodesOf(j.spec), nodesOf(j.spec); {
	case lo < hi:
		out = append(out, fmt.Sprintf("the job needs %d to %d workers at once", lo, hi))
	case hi > 1:
		out = append(out, fmt.Sprintf("the job needs %d workers at once", hi))
	}
	if packs(j.spec) {
		how := "in as few as it can"
		if j.spec.PackRequired {
			how = "all in one"
		}
		out = append(out, fmt.Sprintf("the job is packed by %s: %s", j.spec.Pack, how))
	}
	return out
}

// reservation is the start promised to the highest-priority job that cannot
// start now (EASY backfill): lower-priority jobs may only start where they
// do not delay it. A job of N nodes holds N workers.
type reservation struct {
	at time.Time // zero: never, as far as time limits tell
	// extra is what each reserved worker has beyond the reserved node's
	// needs at the reserved time.
	extra map[*worker]capacity
}

// endOf is when a running job will have ended at the latest; the zero time
// when it has no limit.
func endOf(j *job) time.Time {
	if end := endMs(j); end != math.MaxInt64 {
		return time.UnixMilli(end)
	}
	return time.Time{}
}

// endMs is endOf in milliseconds, with no limit the latest.
func endMs(j *job) int64 {
	if j.rec.TimeLimitMs == 0 {
		return math.MaxInt64
	}
	return j.rec.StartUnixMs + j.rec.TimeLimitMs
}

// byEnd orders running jobs by endMs, then by key.
func byEnd(a, b placed) int {
	if c := cmp.Compare(a.endMs, b.endMs); c != 0 {
		return c
	}
	return a.j.key.Compare(b.j.key)
}

// reserve finds the workers, one per node of j, and the time at which j
// could start the earliest: for each worker that could ever run a node,
// when enough of what runs there will have ended, by the time limits; the
// job's start is the latest of its nodes'.
func (c *Core) reserve(j *job) *reservation {
	n := need(j.spec)
	nodes := minNodesOf(j.spec)
	if nodes == 1 && len(c.windows) == 0 {
		// The soonest worker, found without a walk over all (see
		// soonestWorker).
		if w, at, extra, ok := c.soonestWorker(j, n); ok {
			return c.reserved(at, map[*worker]capacity{w: extra})
		}
	}
	return c.reserveByScan(j, n, nodes)
}

// reserveByScan is reserve by a walk over every worker: when each could
// take a node of j, which needs n, and the nodes it needs at once of
// those the soonest.
func (c *Core) reserveByScan(j *job, n capacity, nodes int) *reservation {
	type slot struct {
		w     *worker
		atMs  int64
		extra capacity
		i     int // the worker's place by name, which breaks ties
	}
	workers := c.sortedWorkers()
	slots := make([]slot, 0, len(workers))
	for i, w := range workers {
		if !w.connected || !c.fits(j, w, ever) {
			continue
		}
		at, extra := readyAt(w, n)
		slots = append(slots, slot{w, at, extra, i})
	}
	if len(slots) < nodes {
		return nil
	}
	earlier := func(a, b slot) int {
		if c := cmp.Compare(a.atMs, b.atMs); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	}
	if nodes == 1 {
		slots[0] = slices.MinFunc(slots, earlier) // the one used
	} else {
		slices.SortFunc(slots, earlier)
	}
	extra := map[*worker]capacity{}
	for _, s := range slots[:nodes] {
		extra[s.w] = s.extra
	}
	return c.reserved(slots[nodes-1].atMs, extra)
}

// A worker is ready for a node at readyNow, at the end of a time limit,
// or never (readyAt).
const readyNow, never = -1, math.MaxInt64

// readyAt is when w could take a node that needs n, by the time limits of
// what runs there (readyNow, a limit's end, or never), and what w has
// left beside the node then (never: once all has ended).
func readyAt(w *worker, n capacity) (atMs int64, extra capacity) {
	free := w.free()
	at := int64(readyNow)
	ok := free.fits(n)
	for _, r := range w.byEnd {
		if ok {
			break
		}
		if at = r.endMs; at == never {
			break // the rest never end, as far as limits tell
		}
		free = free.plus(r.need)
		ok = free.fits(n)
	}
	if !ok {
		at = never
		free = w.total() // even eventually, only if all end
	}
	return at, free.minus(n)
}

// reserved is the reservation of extra's workers from atMs (readyAt's).
func (c *Core) reserved(atMs int64, extra map[*worker]capacity) *reservation {
	r := &reservation{extra: extra}
	switch atMs {
	case readyNow:
		r.at = c.cfg.Now()
	case never:
	default:
		r.at = time.UnixMilli(atMs)
	}
	return r
}

// allows reports whether starting a node of j on w now keeps the
// reservation's promise.
func (r *reservation) allows(j *job, w *worker, now time.Time) bool {
	if r == nil {
		return true
	}
	extra, held := r.extra[w]
	if !held {
		return true
	}
	if r.endsBefore(j, now) {
		return true
	}
	return extra.fits(need(j.spec))
}

// take records that j started on ws now: on a reserved worker it takes
// from what the reservation leaves, unless it ends before.
func (r *reservation) take(j *job, ws []*worker, now time.Time) {
	if r == nil || r.endsBefore(j, now) {
		return
	}
	for _, w := range ws {
		if extra, held := r.extra[w]; held {
			r.extra[w] = extra.minus(need(j.spec))
		}
	}
}

// endsBefore reports whether j, started now, ends by its time limit before
// the reserved start; false without a reservation.
func (r *reservation) endsBefore(j *job, now time.Time) bool {
	return r.endsWithin(j.rec.TimeLimitMs, now)
}

// endsWithin is endsBefore for a job of time limit limitMs (0: none).
func (r *reservation) endsWithin(limitMs int64, now time.Time) bool {
	return r != nil && limitMs > 0 && !r.at.IsZero() && !now.Add(time.Duration(limitMs)*time.Millisecond).After(r.at)
}

// nodeList is the names of a gang's workers, in rank order.
func nodeList(nodes []*jobspb.Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Worker
	}
	return strings.Join(names, ",")
}
