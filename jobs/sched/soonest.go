package sched

import "container/heap"

// Reserving for a job of one node looks for the worker that could take it
// the soonest by the time limits of what runs there. That time is never
// before the first of those limits to end on the worker, so the Core
// keeps the workers that run jobs in a heap by that first end, and
// reserving visits them in its order, stopping at the first whose first
// end comes after the best start found: rather than walking every
// worker's jobs each time the head of the queue changes.

// soonest is a binary heap of the workers that run jobs, by the end of the
// first time limit on each (byEnd[0]); worker.soonestAt is a worker's
// place in it, counting from 1 (0: not in it).
type soonest []*worker

func firstEnd(w *worker) int64 { return w.byEnd[0].endMs }

// fix puts w at its place after its jobs changed: in, out, up or down.
func (h *soonest) fix(w *worker) {
	switch {
	case len(w.byEnd) == 0 && w.soonestAt > 0:
		i, last := w.soonestAt-1, len(*h)-1
		h.swap(i, last)
		*h = (*h)[:last]
		w.soonestAt = 0
		if i < last {
			h.up(i)
			h.down(i)
		}
	case len(w.byEnd) > 0 && w.soonestAt == 0:
		*h = append(*h, w)
		w.soonestAt = len(*h)
		h.up(len(*h) - 1)
	case len(w.byEnd) > 0:
		h.up(w.soonestAt - 1)
		h.down(w.soonestAt - 1)
	}
}

func (h soonest) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].soonestAt, h[j].soonestAt = i+1, j+1
}

func (h soonest) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if firstEnd(h[p]) <= firstEnd(h[i]) {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h soonest) down(i int) {
	for {
		m := 2*i + 1
		if m >= len(h) {
			return
		}
		if r := m + 1; r < len(h) && firstEnd(h[r]) < firstEnd(h[m]) {
			m = r
		}
		if firstEnd(h[i]) <= firstEnd(h[m]) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// frontier is the places in a soonest heap still to visit, by first end.
type frontier struct {
	h  soonest
	at []int
}

func (f *frontier) Len() int           { return len(f.at) }
func (f *frontier) Less(a, b int) bool { return firstEnd(f.h[f.at[a]]) < firstEnd(f.h[f.at[b]]) }
func (f *frontier) Swap(a, b int)      { f.at[a], f.at[b] = f.at[b], f.at[a] }
func (f *frontier) Push(x any)         { f.at = append(f.at, x.(int)) }
func (f *frontier) Pop() any {
	i := f.at[len(f.at)-1]
	f.at = f.at[:len(f.at)-1]
	return i
}

// soonestWorker returns the worker that could take one node of j, which
// needs n, the soonest by the time limits, the first by name among
// equals, with when and what it leaves: what reserve's walk over every
// worker finds for a job that fits on no worker now. ok is false when no
// worker can by the limits alone.
func (c *Core) soonestWorker(j *job, n capacity) (best *worker, atMs int64, extra capacity, ok bool) {
	if len(c.soonest) == 0 {
		return nil, 0, capacity{}, false
	}
	f := &frontier{h: c.soonest, at: []int{0}}
	for f.Len() > 0 {
		i := heap.Pop(f).(int)
		w := c.soonest[i]
		if best != nil && firstEnd(w) > atMs {
			break // it, and all after it, could take j only later
		}
		for _, k := range []int{2*i + 1, 2*i + 2} {
			if k < len(c.soonest) {
				heap.Push(f, k)
			}
		}
		if !w.connected || !c.fits(j, w, ever) {
			continue
		}
		at, left := readyAt(w, n)
		if at == never {
			continue
		}
		if best == nil || at < atMs || at == atMs && w.name < best.name {
			best, atMs, extra = w, at, left
		}
	}
	return best, atMs, extra, best != nil
}
