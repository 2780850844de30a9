package sched

import (
	"fmt"
	"slices"
	"time"
)

// The backfill plan answers "when will it run?" for a pending job shown
// alone: the jobs that wait ahead of it, in the order rounds consider them,
// are laid out on the workers' timelines, each at the earliest time it fits
// for its whole time limit on as many workers as it needs, around what runs
// (until its time limit) and the maintenance windows; the job asked about
// goes last. A job without a time limit holds what it takes for ever, so
// the plan knows no start for what needs that room after it.

// maxPlanAhead bounds how many waiting jobs the plan lays out ahead of the
// one asked about; with more, its start is not worked out.
const maxPlanAhead = 100

// use is what a running or planned job, or a maintenance window, takes of a
// worker from a time until another (zero: for ever).
type use struct {
	from, to time.Time
	cap      capacity
}

func (u use) covers(t time.Time) bool {
	return !t.Before(u.from) && (u.to.IsZero() || t.Before(u.to))
}

// queuePosition is j's place among its queue's pending jobs, in the order
// rounds consider them: 1 is next.
func (c *Core) queuePosition(j *job, now time.Time) int {
	me := c.rank(j, now.UnixMilli())
	pos := 1
	for _, o := range c.pending {
		if o != j && o.spec.Queue == j.spec.Queue && ahead(c.rank(o, now.UnixMilli()).standing, me.standing) {
			pos++
		}
	}
	return pos
}

// expectedStart is when the backfill plan starts pending job j; the zero
// time, and why, when it cannot tell.
func (c *Core) expectedStart(j *job, now time.Time) (time.Time, string) {
	workers := c.sortedWorkers()
	ready := func(o *job) bool { return !o.rec.Held && c.depsState(o) == "" && c.placeable(o, workers) == "" }
	if !ready(j) {
		return time.Time{}, c.neverStartsWhy(j, workers)
	}
	me := c.rank(j, now.UnixMilli())
	var order []ranked
	for _, o := range c.pending {
		if o == j {
			continue
		}
		if r := (c.rank(o, now.UnixMilli())); ahead(r.standing, me.standing) && ready(o) {
			if order = append(order, r); len(order) > maxPlanAhead {
				return time.Time{}, fmt.Sprintf("more than %d jobs wait ahead of it", maxPlanAhead)
			}
		}
	}
	slices.SortFunc(order, func(a, b ranked) int {
		if ahead(a.standing, b.standing) {
			return -1
		}
		return 1
	})
	uses := map[*worker][]use{}
	for _, w := range workers {
		if !w.connected {
			continue
		}
		for _, r := range w.running {
			end := endOf(r)
			if !end.IsZero() && end.Before(now) {
				end = now // over its limit: it ends any moment
			}
			uses[w] = append(uses[w], use{now, end, need(r.spec)})
		}
		for _, r := range c.windows {
			if covers(r, w.name) {
				uses[w] = append(uses[w], use{time.UnixMilli(r.StartUnixMs), time.UnixMilli(r.EndUnixMs), w.total()})
			}
		}
	}
	for _, r := range append(order, me) {
		at := c.plan(r.job, workers, uses, now)
		if r.job == j {
			if at.IsZero() {
				return at, "something ahead of it, or running where it fits, has no time limit"
			}
			return at, ""
		}
	}
	return time.Time{}, ""
}

// neverStartsWhy says why pending job j cannot start however much room
// there is: it is held, waits on a dependency, or no registered worker can
// ever run it.
func (c *Core) neverStartsWhy(j *job, workers []*worker) string {
	switch {
	case j.rec.Held:
		return fmt.Sprintf("it is held until rbs job release %s", j.key)
	case c.depsState(j) != "":
		return "it waits on a dependency"
	}
	if why := c.tooLarge(j.spec); why != "" {
		return "no worker can ever run it: " + why
	}
	switch c.placeable(j, workers) {
	case ReasonNoWorkers:
		return "no worker with job slots is registered"
	case ReasonNoWorkerOfPlatform:
		return "no worker of platform " + j.spec.Platform + " is registered"
	}
	if n := minNodesOf(j.spec); n > 1 {
		return fmt.Sprintf("fewer than %d registered workers could ever run it at once (see Placement)", n)
	}
	return "no registered worker could ever run it (see Placement)"
}

// plan lays one job out at the earliest time it fits, adding what it takes
// to uses, and returns that time; the zero time when it never fits.
func (c *Core) plan(j *job, workers []*worker, uses map[*worker][]use, now time.Time) time.Time {
	times := []time.Time{now}
	for _, us := range uses {
		for _, u := range us {
			if u.to.After(now) {
				times = append(times, u.to)
			}
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	times = slices.Compact(times)
	n, limit := need(j.spec), time.Duration(j.rec.TimeLimitMs)*time.Millisecond
	for _, t := range times {
		var end time.Time
		if limit > 0 {
			end = t.Add(limit)
		}
		var fit []*worker
		for _, w := range workers {
			if w.connected && c.fits(j, w, ever) && fitsDuring(w, uses[w], n, t, end) {
				if fit = append(fit, w); len(fit) == nodesOf(j.spec) {
					break
				}
			}
		}
		if len(fit) >= minNodesOf(j.spec) {
			for _, w := range fit {
				uses[w] = append(uses[w], use{t, end, n})
			}
			return t
		}
	}
	return time.Time{}
}

// fitsDuring reports whether n fits on w, beside uses, from from until to
// (zero: for ever): at from and wherever another use begins in between.
func fitsDuring(w *worker, uses []use, n capacity, from, to time.Time) bool {
	points := []time.Time{from}
	for _, u := range uses {
		if u.from.After(from) && (to.IsZero() || u.from.Before(to)) {
			points = append(points, u.from)
		}
	}
	for _, p := range points {
		free := w.total()
		for _, u := range uses {
			if u.covers(p) {
				free = free.minus(u.cap)
			}
		}
		if !free.fits(n) {
			return false
		}
	}
	return true
}
