package sched

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

// View is what readers see of the scheduler: a replica of the Core's jobs,
// workers and maintenance windows as of a committed round. Listing jobs,
// showing one, the queues, the cluster status, the dashboard and the metrics
// read it under its own lock, never through the scheduler's loop, so a busy
// reader cannot hold up a round.
//
// The loop publishes each round's changes into the View (Core.Publish): it
// copies the records that changed, not the whole state, and skips the
// publication rather than wait while readers hold the View, unless a client
// waits on the round (so that what it changed is what it reads next) or
// the View has fallen behind by more than maxLag.
type View struct {
	mu sync.RWMutex
	r  *Core // the replica: patched by Publish, only read otherwise
	// published is when the View last caught up with the Core.
	published time.Time
}

// maxEnds is how many ends the replica's log keeps at least (EndedSince).
const maxEnds = 1 << 16

// maxLag bounds how long the View may trail the Core while readers keep
// it busy.
const maxLag = time.Second

// Read calls fn with the replica, which fn must only read and must not
// keep: the read methods of Core (List, Infos, Lookup, Queues, Counts,
// Windows …) answer from it as the Core would have at the last
// publication.
func (v *View) Read(fn func(r *Core)) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	fn(v.r)
}

// newView returns an empty View for c.
func newView(c *Core) *View {
	r := emptyCore(c.cfg)
	r.queues, r.defQ, r.replica = c.queues, c.defQ, true
	r.endsBase = 1 // a mark of 0 asks where the log stands (EndedSince)
	return &View{r: r}
}

// View returns the Core's View.
func (c *Core) View() *View { return c.view }

// Publish brings the View up to date with the Core, which its owner calls
// once a round is committed. With wait, or when the View trails by more
// than maxLag, it waits for readers to let go; otherwise it leaves the
// changes for a later round while any reader holds the View, and reports
// false.
func (c *Core) Publish(wait bool) bool {
	v := c.view
	if wait || c.cfg.Now().Sub(v.published) > maxLag {
		v.mu.Lock()
	} else if !v.mu.TryLock() {
		return false
	}
	defer v.mu.Unlock()
	r := v.r
	// A worker whose own state changed (workersSeen) is copied whole; one
	// that only runs or ran a changed job has its copy patched, that job's
	// entry alone. The first publication copies all.
	if r.workers == nil {
		r.workers = make(map[string]*worker, len(c.workers))
		for name := range c.workers {
			c.workersSeen[name] = true
		}
	}
	// grown holds the arrays a task was added to, whose tasks are sorted
	// again; a task patched in place keeps its place.
	grown := map[int64]bool{}
	for _, j := range c.reasoned {
		switch {
		case c.seen[j.key]: // copied whole below
		case j.copy == nil || done(j):
			// Never published, or done with for want of a dependency (see
			// EndedSince): copied whole below.
			c.seen[j.key] = true
		default:
			j.copy.rec.PendingReason = j.rec.PendingReason
		}
	}
	clear(c.reasoned)
	c.reasoned = c.reasoned[:0]
	var ran []ranOn // the changed jobs' nodes: each a worker to patch
	for k := range c.seen {
		// A live job's copy in the replica is its own (nil until first
		// published); the replica is looked up only for one gone.
		live := c.jobs[k]
		var old *job
		if live != nil {
			old = live.copy
		} else {
			old = r.jobs[k]
		}
		if k.Index >= 0 && old == nil && live != nil {
			grown[k.ID] = true
		}
		if old != nil {
			for _, n := range old.rec.Nodes {
				ran = append(ran, ranOn{n.Worker, k})
				if r.byTask[n.TaskId] == old {
					delete(r.byTask, n.TaskId)
				}
			}
		}
		r.patch(k, old, live)
		if done(live) {
			r.ends = append(r.ends, k)
		}
		if live != nil {
			for _, n := range live.rec.Nodes {
				ran = append(ran, ranOn{n.Worker, k})
				if c.byTask[n.TaskId] == live {
					r.byTask[n.TaskId] = live.copy
				}
			}
		}
	}
	// The log keeps the last maxEnds at least: a waiter that has fallen
	// further behind asks each of its jobs instead.
	if len(r.ends) > 2*maxEnds {
		drop := len(r.ends) - maxEnds
		r.ends = r.ends[:copy(r.ends, r.ends[drop:])]
		r.endsBase += uint64(drop)
	}
	// Made anew, not cleared: a cleared map keeps the room it grew to, and
	// ranging over it costs that room however few it holds.
	c.seen = map[Key]bool{}
	for id := range grown {
		if tasks := r.arrays[id]; tasks != nil {
			slices.SortFunc(tasks, func(a, b *job) int { return int(a.key.Index - b.key.Index) })
		}
	}
	for name := range c.workersSeen {
		if w := c.workers[name]; w != nil {
			r.copyWorker(w, true)
		}
	}
	for _, p := range ran {
		w := c.workers[p.worker]
		if w == nil || c.workersSeen[p.worker] {
			continue // gone, or copied whole above
		}
		cw := r.copyWorker(w, false)
		if j := w.running[p.key]; j != nil {
			cw.running[p.key] = j.copy
		} else {
			delete(cw.running, p.key)
		}
	}
	c.workersSeen = map[string]bool{} // made anew, as c.seen
	r.windows = maps.Clone(c.windows) // windows are replaced, never changed
	// Users are never forgotten: each copy is made once and overwritten.
	if r.usage == nil {
		r.usage = make(map[string]*usage, len(c.usage))
	}
	for user, u := range c.usage {
		cu := r.usage[user]
		if cu == nil {
			cu = new(usage)
			r.usage[user] = cu
		}
		*cu = *u
	}
	r.fair = c.fair // never changed while the replica holds it (refreshShares)
	v.published = c.cfg.Now()
	return true
}

// ranOn is a worker a changed job runs or ran a node on.
type ranOn struct {
	worker string
	key    Key
}

// copyWorker brings the replica's copy of w up to date, keeping the copy's
// maps, and returns it. whole (or a first copy) copies w's running jobs
// too; otherwise the copy's running is left for the caller to patch by
// the jobs that changed.
func (r *Core) copyWorker(w *worker, whole bool) *worker {
	cw := r.workers[w.name]
	if cw == nil {
		cw = &worker{running: map[Key]*job{}, dev: devices{held: map[string]Key{}}}
		r.workers[w.name] = cw
		whole = true
	}
	running, held := cw.running, cw.dev.held
	*cw = *w
	if whole {
		clear(running)
		for k, j := range w.running {
			running[k] = j.copy
		}
	}
	clear(held)
	maps.Copy(held, w.dev.held)
	cw.running, cw.dev.held = running, held
	cw.byEnd, cw.preemptible = nil, nil // the round's alone: readers go by running
	return cw
}

// patch makes the replica's job k, old (nil when it has none), a copy of
// live, or forgets it when live is nil.
func (r *Core) patch(k Key, old, live *job) {
	if live == nil {
		if old != nil {
			r.counts[old.state()]--
			delete(r.pending, k)
			delete(r.jobs, k)
			delete(r.arrays, k.ID) // an array is forgotten as a whole
			delete(r.open, k.ID)
		}
		return
	}
	if old == nil {
		live.copy = &job{rec: cloneRecord(live.rec), spec: live.spec, key: k}
		r.add(live.copy)
		return
	}
	live.copy = old
	r.counts[old.state()]--
	// Overwritten, not replaced: no reader keeps a record of the replica
	// past its Read (they hand out clones), and Publish holds the View.
	copyRecord(old.rec, live.rec)
	r.counts[old.state()]++
	if old.state() == Pending {
		r.pending[k] = old
	} else {
		delete(r.pending, k)
	}
}

// cloneRecord is proto.Clone for a JobRecord, written out: Publish copies
// every record that changed, and the reflective Clone was a quarter of
// its time.
func cloneRecord(r *jobspb.JobRecord) *jobspb.JobRecord {
	c := &jobspb.JobRecord{}
	copyRecord(c, r)
	return c
}

// copyRecord makes c a deep copy of r, reusing c's nodes. Nodes, which the
// Core changes in place, are copied field by field; the rarer nested
// messages go through proto.Clone. TestCloneRecord fails once a field is
// added to the proto and not here.
func copyRecord(c, r *jobspb.JobRecord) {
	c.Id, c.Index, c.State, c.PendingReason = r.Id, r.Index, r.State, r.PendingReason
	c.SubmitUnixMs, c.StartUnixMs, c.EndUnixMs = r.SubmitUnixMs, r.StartUnixMs, r.EndUnixMs
	c.Attempts, c.ExitCode, c.PeakMemoryBytes, c.OomKilled = r.Attempts, r.ExitCode, r.PeakMemoryBytes, r.OomKilled
	c.Worker, c.GpuIndices, c.CancelRequested = r.Worker, slices.Clone(r.GpuIndices), r.CancelRequested
	c.Message, c.TimeLimitMs, c.OutputBytes = r.Message, r.TimeLimitMs, r.OutputBytes
	c.OutputDroppedBytes, c.OutputUnmarkedBytes = r.OutputDroppedBytes, r.OutputUnmarkedBytes
	c.OutputRoot, c.Outputs, c.CheckpointRoot = r.OutputRoot, cloneAll(r.Outputs), r.CheckpointRoot
	c.History, c.MasterPort, c.PreemptedBy = cloneAll(r.History), r.MasterPort, r.PreemptedBy
	c.CpuTimeMs, c.Held, c.Borrowed, c.CacheKey, c.CachedFrom = r.CpuTimeMs, r.Held, r.Borrowed, r.CacheKey, r.CachedFrom
	c.Spec = nil
	if r.Spec != nil {
		c.Spec = proto.Clone(r.Spec).(*jobspb.JobSpec)
	}
	switch {
	case r.Nodes == nil:
		c.Nodes = nil
	default:
		was := len(c.Nodes)
		c.Nodes = slices.Grow(c.Nodes[:0], len(r.Nodes))[:len(r.Nodes)]
		for i, n := range r.Nodes {
			switch {
			case n == nil:
				c.Nodes[i] = nil
			case i >= was || c.Nodes[i] == nil:
				c.Nodes[i] = &jobspb.Node{}
				copyNode(c.Nodes[i], n)
			default:
				copyNode(c.Nodes[i], n)
			}
		}
	}
	c.ProtoReflect().SetUnknown(slices.Clone(r.ProtoReflect().GetUnknown()))
}

// copyNode makes c a copy of n, for copyRecord.
func copyNode(c, n *jobspb.Node) {
	c.Rank, c.Worker, c.TaskId, c.Address = n.Rank, n.Worker, n.TaskId, n.Address
	c.GpuIndices, c.GpuUuids = slices.Clone(n.GpuIndices), slices.Clone(n.GpuUuids)
	c.Assigned, c.State, c.ExitCode, c.OutputBytes = n.Assigned, n.State, n.ExitCode, n.OutputBytes
	c.OutputDroppedBytes, c.OutputUnmarkedBytes = n.OutputDroppedBytes, n.OutputUnmarkedBytes
	c.Stopped, c.CpuTimeMs, c.PeakMemoryBytes = n.Stopped, n.CpuTimeMs, n.PeakMemoryBytes
	c.ProtoReflect().SetUnknown(slices.Clone(n.ProtoReflect().GetUnknown()))
}

// cloneAll clones each message of ms; nil stays nil.
func cloneAll[M proto.Message](ms []M) []M {
	if ms == nil {
		return nil
	}
	out := make([]M, len(ms))
	for i, m := range ms {
		out[i] = proto.Clone(m).(M)
	}
	return out
}
