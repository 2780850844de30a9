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
	nowMs := now.UnixMilli()
	var victims []*job
	if minNodesOf(j.spec) == 1 && nodesOf(j.spec) == 1 {
		// One victim is enough for most: the index finds the youngest
		// that is, which the scan below would rank first. With no victim
		// at all, no plan frees room.
		v, anyVictim := c.youngestVictim(j, prio, n, nowMs)
		if !anyVictim {
			return false
		}
		if v != nil {
			victims = []*job{v}
		}
	}
	if victims == nil {
		victims = c.scanVictims(j, workers, prio, n, nowMs)
	}
	if len(victims) == 0 {
		return false // no room to be made, or room enough: something else holds it back
	}
	for _, v := range victims {
		v.rec.PreemptedBy = j.key.String()
		for _, n := range v.rec.Nodes {
			if w := c.workers[n.Worker]; w != nil {
				c.stopping(w, v)
			}
		}
		c.touch(v)
		c.stopNodes(v, func(m *jobspb.Node) bool { return m.State == "" && m.Assigned })
		c.logs = append(c.logs, logLine(v, fmt.Sprintf("\n[rbs] attempt %d preempted by job %s, of higher priority\n", v.rec.Attempts, j.key)))
	}
	c.preempting[j.key] = victims
	return true
}

// scanVictims weighs every worker for j, of priority prio and needing n
// on each node, at nowMs: on each, the youngest victims it takes to make
// room; then the workers that need the fewest, the youngest first. It
// returns the victims on as many of those workers as j needs, none when
// too few workers can make room or when it fits without.
func (c *Core) scanVictims(j *job, workers []*worker, prio int64, n capacity, nowMs int64) []*job {
	type plan struct {
		w       *worker
		victims []*job
		started int64 // the victims' latest start: the younger, the better
	}
	var plans []plan
	var cands []placed // the worker's, made over for each
	for _, w := range workers {
		if len(w.preemptible) == 0 && !w.free().fits(n) || !w.connected || !c.fits(j, w, ever) || checkWindow(c, j, w, current, false) != "" {
			continue
		}
		cands = cands[:0]
		for _, r := range w.preemptible {
			if c.eligible(r, prio, nowMs) {
				cands = append(cands, r)
			}
		}
		slices.SortFunc(cands, func(a, b placed) int { return started(b, a) })
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
		return nil
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
	return victims
}
