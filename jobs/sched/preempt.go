package sched

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// Preemption: when the job at the head of the queue cannot start, running
// jobs that said they may be preempted (--preemptible) and have a lower
// priority are stopped to make room for it: on the workers, one per node,
// that need the fewest of them, the youngest first. A job that is not
// preemptible is never touched. The victims get SIGTERM, the grace period,
// then SIGKILL; their checkpoint is recorded as at any end, and they go
// back to PENDING with the attempt PREEMPTED.

// preempt makes room for j, if stopping preemptible jobs of lower priority
// can; it reports whether j waits for victims to stop.
func (c *Core) preempt(j *job, workers []*worker, now time.Time) bool {
	if victims := c.preempting[j.key]; victims != nil {
		for _, v := range victims {
			if v.state() == Running && v.rec.PreemptedBy == j.key.String() {
				return true // they are still stopping
			}
		}
		delete(c.preempting, j.key)
	}
	prio := c.priority(j, now)
	n := need(j.spec)
	type plan struct {
		w       *worker
		victims []*job
		started int64 // the victims' latest start: the younger, the better
	}
	var plans []plan
	var cands []placed // the worker's, made over for each
	nowMs := now.UnixMilli()
	for _, w := range workers {
		if len(w.preemptible) == 0 && !w.free().fits(n) || !w.connected || !c.fits(j, w, ever) || checkWindow(c, j, w, current, false) != "" {
			continue
		}
		// A victim is a job that would wait behind j were it waiting
		// again: its priority counts the age bonus it would have then.
		// (Were it weighed without, a victim of long standing would be
		// back ahead of j once requeued, take the room it freed, and be
		// preempted again, round after round.)
		cands = cands[:0]
		for _, r := range w.preemptible {
			if !r.stopping && nowMs-r.startMs >= c.cfg.PreemptExempt.Milliseconds() && r.base+c.slotFairShare(r.user)+c.age(r.j.submit, nowMs) < prio {
				cands = append(cands, r)
			}
		}
		slices.SortFunc(cands, func(a, b placed) int {
			if a.startMs != b.startMs {
				return cmp.Compare(b.startMs, a.startMs)
			}
			return cmp.Compare(b.id, a.id)
		})
		free := w.free()
		p := plan{w: w}
		for _, v := range cands {
			if free.fits(n) {
				break
			}
			p.victims = append(p.victims, v.j)
			p.started = max(p.started, v.startMs)
			free = free.plus(v.need)
		}
		if free.fits(n) {
			plans = append(plans, p)
		}
	}
	nodes := minNodesOf(j.spec)
	if len(plans) < nodes {
		return false
	}
	slices.SortStableFunc(plans, func(a, b plan) int {
		if len(a.victims) != len(b.victims) {
			return cmp.Compare(len(a.victims), len(b.victims))
		}
		return cmp.Compare(b.started, a.started)
	})
	var victims []*job
	seen := map[Key]bool{}
	for _, p := range plans[:nodes] {
		for _, v := range p.victims {
			if !seen[v.key] {
				seen[v.key] = true
				victims = append(victims, v)
			}
		}
	}
	if len(victims) == 0 {
		return false // room enough: something else holds it back
	}
	for _, v := range victims {
		v.rec.PreemptedBy = j.key.String()
		for _, n := range v.rec.Nodes {
			if w := c.workers[n.Worker]; w != nil {
				w.stopping(v)
			}
		}
		c.touch(v)
		c.stopNodes(v, func(m *jobspb.Node) bool { return m.State == "" && m.Assigned })
		c.logs = append(c.logs, logLine(v, fmt.Sprintf("\n[rbs] attempt %d preempted by job %s, of higher priority\n", v.rec.Attempts, j.key)))
	}
	c.preempting[j.key] = victims
	return true
}
