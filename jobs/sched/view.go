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
	// Workers are copied again when they changed themselves, or a job
	// that runs or ran on them did; the first publication copies all.
	if r.workers == nil {
		r.workers = make(map[string]*worker, len(c.workers))
		for name := range c.workers {
			c.workersSeen[name] = true
		}
	}
	arrays := map[int64]bool{}
	for k := range c.seen {
		if k.Index >= 0 {
			arrays[k.ID] = true
		}
		old, live := r.jobs[k], c.jobs[k]
		if old != nil {
			for _, n := range old.rec.Nodes {
				c.workersSeen[n.Worker] = true
				if r.byTask[n.TaskId] == old {
					delete(r.byTask, n.TaskId)
				}
			}
		}
		r.patch(k, live)
		if live != nil {
			for _, n := range live.rec.Nodes {
				c.workersSeen[n.Worker] = true
				if c.byTask[n.TaskId] == live {
					r.byTask[n.TaskId] = live.copy
				}
			}
		}
	}
	// Made anew, not cleared: a cleared map keeps the room it grew to, and
	// ranging over it costs that room however few it holds.
	c.seen = map[Key]bool{}
	for id := range arrays {
		if tasks := r.arrays[id]; tasks != nil {
			slices.SortFunc(tasks, func(a, b *job) int { return int(a.key.Index - b.key.Index) })
		}
	}
	for name := range c.workersSeen {
		w := c.workers[name]
		if w == nil {
			continue
		}
		// The copy is made over the last one, keeping its maps.
		cw := r.workers[name]
		if cw == nil {
			cw = &worker{running: map[Key]*job{}, dev: devices{held: map[string]Key{}}}
			r.workers[name] = cw
		}
		running, held := cw.running, cw.dev.held
		*cw = *w
		clear(running)
		for k, j := range w.running {
			running[k] = j.copy
		}
		clear(held)
		maps.Copy(held, w.dev.held)
		cw.running, cw.dev.held = running, held
		cw.byEnd, cw.preemptible = nil, nil // the round's alone: readers go by running
	}
	c.workersSeen = map[string]bool{} // made anew, as c.seen
	r.windows = maps.Clone(c.windows) // windows are replaced, never changed
	r.usage = make(map[string]*usage, len(c.usage))
	for user, u := range c.usage {
		cu := *u
		r.usage[user] = &cu
	}
	r.fair = c.fair // never changed while the replica holds it (refreshShares)
	v.published = c.cfg.Now()
	return true
}

// patch makes the replica's job k a copy of live, or forgets it when live
// is nil.
func (r *Core) patch(k Key, live *job) {
	old := r.jobs[k]
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
	rec := proto.Clone(live.rec).(*jobspb.JobRecord)
	if old == nil {
		live.copy = &job{rec: rec, spec: live.spec, key: k}
		r.add(live.copy)
		return
	}
	live.copy = old
	r.counts[old.state()]--
	old.rec = rec
	r.counts[old.state()]++
	if old.state() == Pending {
		r.pending[k] = old
	} else {
		delete(r.pending, k)
	}
}
