package sched

import (
	"cmp"
	"slices"
	"sort"
)

// The Core keeps every preemptible job running anywhere in one index, by
// start, so that preempting for a job of one node reads the youngest
// victims first and stops at the first worker that one victim clears,
// rather than weighing every worker and every preemptible job on it each
// time the head of the queue changes.

// victimIndex holds the preemptible nodes running, by start and then job
// id, oldest first. Jobs start at the Core's time, which only moves on, so
// most come last; an entry whose job stopped running there is marked gone
// and dropped once the gone outnumber the rest.
type victimIndex struct {
	es   []victim
	gone int
	// pass numbers the passes over the index, which mark each worker
	// they meet (worker.victimPass).
	pass uint64
}

// victim is one preemptible node: the job as its worker's list holds it,
// and the worker.
type victim struct {
	placed
	w    *worker
	gone bool
}

// started orders victims by start, then job id.
func started(a, b placed) int {
	if c := cmp.Compare(a.startMs, b.startMs); c != 0 {
		return c
	}
	return cmp.Compare(a.id, b.id)
}

// add records that p runs on w.
func (x *victimIndex) add(w *worker, p placed) {
	v := victim{placed: p, w: w}
	if n := len(x.es); n == 0 || started(x.es[n-1].placed, p) <= 0 {
		x.es = append(x.es, v)
		return
	}
	i, _ := slices.BinarySearchFunc(x.es, p, func(e victim, p placed) int { return started(e.placed, p) })
	x.es = slices.Insert(x.es, i, v)
}

// find returns the entry of p on w, or nil.
func (x *victimIndex) find(w *worker, p placed) *victim {
	i, _ := slices.BinarySearchFunc(x.es, p, func(e victim, p placed) int { return started(e.placed, p) })
	for ; i < len(x.es) && started(x.es[i].placed, p) == 0; i++ {
		if e := &x.es[i]; e.w == w && e.j == p.j && !e.gone {
			return e
		}
	}
	return nil
}

// remove records that p no longer runs on w.
func (x *victimIndex) remove(w *worker, p placed) {
	e := x.find(w, p)
	if e == nil {
		return
	}
	e.gone, e.j = true, nil
	if x.gone++; x.gone > 64 && x.gone > len(x.es)/2 {
		x.es = slices.DeleteFunc(x.es, func(e victim) bool { return e.gone })
		x.gone = 0
	}
}

// stopping records that p, preempted, is stopping on w.
func (x *victimIndex) stopping(w *worker, p placed) {
	if e := x.find(w, p); e != nil {
		e.stopping = true
	}
}

// youngestVictim finds the worker where stopping a single preemptible job
// makes room for j, a job of one node that fits on no worker now, with
// the youngest such victim (the worker first by name among equals): the
// plan that preempt's scan of every worker ranks first when one victim is
// enough anywhere. prio is j's priority and n what it needs; a victim is
// a job preempt may stop for it (see eligible). anyVictim reports whether
// there was an eligible victim at all: without one, no plan can make room.
func (c *Core) youngestVictim(j *job, prio int64, n capacity, nowMs int64) (v *job, anyVictim bool) {
	x := &c.victims
	x.pass++
	// Those that started within PreemptExempt are spared: the youngest
	// that may go started before cut.
	cut := nowMs - c.cfg.PreemptExempt.Milliseconds()
	i := sort.Search(len(x.es), func(i int) bool { return x.es[i].startMs > cut })
	var best *victim
	for i--; i >= 0; i-- {
		e := &x.es[i]
		if best != nil && e.startMs < best.startMs {
			break
		}
		if e.gone || !c.eligible(e.placed, prio, nowMs) {
			continue
		}
		anyVictim = true
		w := e.w
		if w.victimPass == x.pass {
			continue // a younger victim comes first on w
		}
		w.victimPass = x.pass
		if !w.connected || !c.fits(j, w, ever) || checkWindow(c, j, w, current, false) != "" || !w.free().plus(e.need).fits(n) {
			continue
		}
		if best == nil || w.name < best.w.name {
			best = e
		}
	}
	if best == nil {
		return nil, anyVictim
	}
	return best.j, true
}

// eligible reports whether running r may be preempted for a job of
// priority prio at nowMs: it is not stopping already, has run past
// PreemptExempt, and would wait behind that job were it waiting again, its
// priority counting the age bonus it would have then. (Were it weighed
// without, a victim of long standing would be back ahead of the job once
// requeued, take the room it freed, and be preempted again, round after
// round.)
func (c *Core) eligible(r placed, prio int64, nowMs int64) bool {
	return !r.stopping && nowMs-r.startMs >= c.cfg.PreemptExempt.Milliseconds() &&
		r.base+c.slotFairShare(r.user)+c.age(r.submit, nowMs) < prio
}
