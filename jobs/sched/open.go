package sched

// openSet is the room a round fits jobs against: the connected workers
// with a free job slot, in no order (a worker's place among candidates is
// decided by tighter, which breaks ties by name), and the free slots they
// have in all. The Core keeps it from round to round, brought up to date
// with the workers logged in its changes; a worker joins, leaves or
// changes its room in constant time.
type openSet struct {
	ws   []*worker
	room int
	// seen is how much of the Core's changes the set takes in.
	seen int
}

// update brings w's membership and room up to date.
func (o *openSet) update(w *worker) {
	free := 0
	if w.connected {
		free = max(w.jobSlots-len(w.running), 0)
	}
	o.room += free - w.openRoom
	w.openRoom = free
	switch {
	case free > 0 && w.openAt == 0:
		o.ws = append(o.ws, w)
		w.openAt = len(o.ws)
	case free == 0 && w.openAt > 0:
		last := o.ws[len(o.ws)-1]
		o.ws[w.openAt-1], last.openAt = last, w.openAt
		o.ws = o.ws[:len(o.ws)-1]
		w.openAt = 0
	}
}

// openRoom brings the Core's open set up to date with the workers changed
// since it last looked, or makes it from workers the first time.
func (c *Core) openRoom(workers []*worker) *openSet {
	if c.openWorkers == nil {
		c.openWorkers = &openSet{ws: make([]*worker, 0, len(workers))}
		for _, w := range workers {
			c.openWorkers.update(w)
		}
	} else {
		for _, w := range c.changes[c.openWorkers.seen:] {
			c.openWorkers.update(w)
		}
	}
	c.openWorkers.seen = len(c.changes)
	return c.openWorkers
}
