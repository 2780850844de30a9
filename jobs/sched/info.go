package sched

import (
	"sort"
	"time"

	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

// logLine is a line rbs adds to a job's output, about the job: its rank is
// -1, so that readers of a multi-node job's output show it as it is.
func logLine(j *job, s string) store.LogChunk {
	return store.LogChunk{ID: j.key.ID, Index: j.key.Index, Rank: -1, Data: []byte(s)}
}

// info returns a job as users see it at now: a copy of its record with the
// spec sp, the id, the priority breakdown and the states of its
// dependencies.
func (c *Core) info(j *job, sp *jobspb.JobSpec, now time.Time) *jobspb.JobInfo {
	rec := proto.Clone(j.rec).(*jobspb.JobRecord)
	rec.Spec = sp
	info := &jobspb.JobInfo{Record: rec, Id: j.key.String(), Priority: c.priorityOf(j, now), Sweep: sweepValues(j.spec, j.key.Index)}
	for _, d := range j.spec.Deps {
		target := Key{d.JobId, d.Index}
		info.Deps = append(info.Deps, &jobspb.DependencyState{Kind: d.Kind, Id: target.String(), State: string(c.groupState(target)),
			NeverSatisfied: c.depState(d, map[*jobspb.JobSpec]bool{}) == ReasonDependencyNeverSatisfied})
	}
	return info
}

// groupState is the state of a job, or of an array as a whole: RUNNING if
// any task runs, PENDING if any waits, else COMPLETED only if all completed,
// else the first other end state.
func (c *Core) groupState(k Key) State {
	targets := c.depTargets(k)
	var running, pending bool
	var other State
	for _, t := range targets {
		switch s := t.state(); s {
		case Running:
			running = true
		case Pending:
			pending = true
		case Completed:
		default:
			if other == "" {
				other = s
			}
		}
	}
	switch {
	case running:
		return Running
	case pending:
		return Pending
	case other != "":
		return other
	}
	return Completed
}

// Filter selects jobs for List.
type Filter struct {
	States  map[State]bool // empty: all
	Queue   string
	History bool // include ended jobs
	// EndedAfter and EndedBefore, when set (Unix ms), keep only the jobs
	// that ended in [EndedAfter, EndedBefore).
	EndedAfter, EndedBefore int64
}

// List returns the jobs that pass f, by id.
func (c *Core) List(f Filter) []*jobspb.JobInfo {
	var keys []Key
	for k, j := range c.jobs {
		s := j.state()
		if s.Terminal() && !f.History && !f.States[s] {
			continue
		}
		if len(f.States) > 0 && !f.States[s] {
			continue
		}
		if f.Queue != "" && j.spec.Queue != f.Queue {
			continue
		}
		if f.EndedAfter != 0 || f.EndedBefore != 0 {
			end := j.rec.EndUnixMs
			if !s.Terminal() || end < f.EndedAfter || f.EndedBefore != 0 && end >= f.EndedBefore {
				continue
			}
		}
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].ID != keys[b].ID {
			return keys[a].ID < keys[b].ID
		}
		return keys[a].Index < keys[b].Index
	})
	return c.Infos(keys, false)
}

// Infos returns each job as users see it: a copy of its record with its
// spec, the id, the priority breakdown and the states of its dependencies.
// With full, the spec is the job's own, shared rather than copied (specs
// never change); without, a lighter copy leaves out the environment and
// script, which can be large and would repeat for every task of an array.
// Keys of jobs forgotten since they were looked up are skipped.
func (c *Core) Infos(keys []Key, full bool) []*jobspb.JobInfo {
	now := c.cfg.Now()
	brief := map[int64]*jobspb.JobSpec{}
	out := make([]*jobspb.JobInfo, 0, len(keys))
	for _, k := range keys {
		j := c.jobs[k]
		if j == nil {
			continue
		}
		sp := j.spec
		if !full {
			if sp = brief[k.ID]; sp == nil {
				sp = proto.Clone(j.spec).(*jobspb.JobSpec)
				sp.Env, sp.Script = nil, ""
				brief[k.ID] = sp
			}
		}
		info := c.info(j, sp, now)
		// Placement is worked out for a pending job shown alone, when it
		// waits for room rather than for its dependencies or its array.
		if full && len(keys) == 1 && j.state() == Pending {
			info.QueuePosition = int32(c.queuePosition(j, now))
			if at, why := c.expectedStart(j, now); !at.IsZero() {
				info.ExpectedStartUnixMs = at.UnixMilli()
			} else {
				info.StartUnknown = why
			}
			if c.depsState(j) == "" && j.rec.PendingReason != ReasonArrayTaskLimit {
				info.Placement = c.explain(j)
			}
		}
		out = append(out, info)
	}
	return out
}

// Done reports whether job k is done with, for those waiting on it: it has
// ended, has been forgotten since (see Config.Retention), or can never
// start (DependencyNeverSatisfied, which only cancelling it ends).
func (c *Core) Done(k Key) bool { return done(c.jobs[k]) }

// done is Done for a job, nil once forgotten.
func done(j *job) bool {
	return j == nil || j.state().Terminal() || j.state() == Pending && j.rec.PendingReason == ReasonDependencyNeverSatisfied
}

// EndedSince answers, on a View's replica, with the jobs that publications
// since mark found done with (see Done), some perhaps more than once and
// not to be kept past the Read, and the mark to pass next; a mark of 0 asks
// where the log stands now. ok is
// false when the log no longer reaches back to mark: the caller must then
// ask Done of each job it waits on, and go on from next.
func (c *Core) EndedSince(mark uint64) (keys []Key, next uint64, ok bool) {
	next = c.endsBase + uint64(len(c.ends))
	if mark == 0 {
		return nil, next, true
	}
	if mark < c.endsBase || mark > next {
		return nil, next, false
	}
	return c.ends[mark-c.endsBase:], next, true
}

// Queues describes the configured queues and their occupancy.
func (c *Core) Queues() []*jobspb.QueueInfo {
	occ := map[string]*jobspb.QueueInfo{}
	var out []*jobspb.QueueInfo
	for _, name := range c.queueNames() {
		q := c.queues[name]
		qi := &jobspb.QueueInfo{Name: q.Name, Priority: q.Priority, MaxTimeMs: q.MaxTime.Milliseconds(), IsDefault: q.Name == c.defQ}
		occ[name] = qi
		out = append(out, qi)
	}
	for _, j := range c.pending {
		if qi := occ[j.spec.Queue]; qi != nil {
			qi.Pending++
		}
	}
	used := map[string]amounts{}
	for _, j := range c.byTask {
		if qi := occ[j.spec.Queue]; qi != nil {
			qi.Running++
			u, t := used[j.spec.Queue], takes(j)
			for i := range u {
				u[i] += t[i]
			}
			used[j.spec.Queue] = u
		}
	}
	for _, qi := range out {
		c.quotaInfo(qi, c.queues[qi.Name], used[qi.Name])
	}
	return out
}

// Counts returns how many jobs are in each state.
func (c *Core) Counts() map[string]int64 {
	out := map[string]int64{}
	for _, s := range States {
		out[string(s)] = 0
	}
	for s, n := range c.counts {
		out[string(s)] = n
	}
	return out
}

// JobSlotsUsed returns how many job slots each worker has in use.
func (c *Core) JobSlotsUsed() map[string]int32 {
	out := map[string]int32{}
	for _, w := range c.workers {
		out[w.name] = int32(len(w.running))
	}
	return out
}

// Nodes is how many nodes job k runs on.
func (c *Core) Nodes(k Key) int {
	if j := c.jobs[k]; j != nil {
		return nodesOf(j.spec)
	}
	return 1
}

// Usage is the scheduler's figures for its metrics.
type Usage struct {
	// Jobs counts jobs (array tasks one by one) by queue and state.
	Jobs map[[2]string]int
	// JobSlots and GPUs are those of the connected workers; the Used ones
	// are held by running jobs.
	JobSlots, JobSlotsUsed int
	GPUs, GPUsUsed         int
	Workers                int // connected
}

// Usage works out the scheduler's figures.
func (c *Core) Usage() Usage {
	u := Usage{Jobs: map[[2]string]int{}}
	for _, j := range c.jobs {
		u.Jobs[[2]string{j.spec.Queue, string(j.state())}]++
	}
	for _, w := range c.workers {
		if !w.connected {
			continue
		}
		u.Workers++
		u.JobSlots += w.jobSlots
		u.JobSlotsUsed += len(w.running)
		u.GPUs += len(w.dev.gpus)
		u.GPUsUsed += len(w.dev.held)
	}
	return u
}
