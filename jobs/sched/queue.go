package sched

import (
	"slices"
	"sort"
)

// The order a round considers waiting jobs in is by priority, then
// submit time, then id and array index (ahead). Priority is a job's base
// (its own and its queue's), its user's fair share, and the bonus it has
// gained by waiting, which alone changes as time passes; so jobs of one
// base and one user keep their order among themselves, by submit time.
// The Core keeps the waiting jobs in such classes from round to round,
// each in that order, and a round merges the classes, ranking only each
// class's next job: it costs the classes and the jobs it takes, not a
// ranking and a heap of every waiting job.

// waitClass holds the pending jobs of one base priority and user, by
// submit time, id and index. Jobs that leave pending stay in it, counted
// in gone, until the next round compacts it; one that comes back to
// pending before then is still at its place.
type waitClass struct {
	key  classKey
	jobs []*job
	// skips holds, for each of jobs at the same place, what a round's
	// sweep reads to pass a job over without reading the job: the sweep
	// goes through up to sweepPerLookback times the Lookback of them a
	// round, and a read of each job was a fifth of a queued round's time.
	skips []skip
	gone  int
	// off is how many jobs have left the front of jobs since the class
	// was made: a job's place in jobs is its at less off (place), so that
	// dropping a run of them at the front moves no other.
	off int
	// front is the class's place in Core.fronts, which also keeps what a
	// sweep reads of the class to pass it whole; listed says it is in
	// Core.shrunk.
	front  int
	listed bool
}

// passRun is a run of a class's jobs that a sweep passed over, all of
// them jobs that waited for room: those at places (job.at) from to end,
// end excluded, until a change to those jobs drops it. Once the queries they
// ask (asks, by their bits as of the Core's queryEpoch epoch) have all
// found no room in a round, those of them left pass in one step: a sweep
// of a long backlog costs a round the classes, not every waiting job.
// Jobs put in after the run, and changes to jobs outside it, leave it
// be; a sweep that passes jobs next to it joins them to it.
type passRun struct {
	from, end int
	asks      queryBits
	epoch     uint32
}

// add adds to r the job at place p, which passed, as sk holds it, and
// reports whether the job waited for room and its query has a bit, so
// that r can hold it; r must end at p.
func (r *passRun) add(p int, sk *skip) bool {
	if sk.waited != waitedRoom || sk.query.bit < 0 {
		return false
	}
	r.asks.add(sk.query.bit)
	r.end = p + 1
	return true
}

// join makes r the run of both r and o, runs that meet.
func (r *passRun) join(o *passRun) {
	for i := range r.asks {
		r.asks[i] |= o.asks[i]
	}
	r.from, r.end = min(r.from, o.from), max(r.end, o.end)
}

// passesFrom reports whether the jobs of f's class from place i to the
// end of its kept run all pass, in a round whose queries that found no
// room are noRoom (nil: none is told), and where that run ends, as a
// place in the class's jobs.
func (f *front) passesFrom(i int, noRoom *queryBits, epoch uint32) (end int, ok bool) {
	r, p := &f.run, i+f.off
	if noRoom == nil || r.epoch != epoch || p < r.from || p >= r.end || !r.asks.within(noRoom) {
		return 0, false
	}
	return r.end - f.off, true
}

// front is what a round reads of a class to rank its first job (see
// queueAt) and to pass a run of its jobs whole (see popSkipping), kept in
// one array for all classes: ranking them reads neither the classes nor
// their jobs, and a class that passes whole is not read either. In a long
// backlog, most of a round is passing classes whole, and reading each
// class was most of that.
type front struct {
	cl     *waitClass
	class  classKey
	submit int64
	key    Key
	// n and off are the class's len(jobs) and off.
	n, off int
	// run is the class's kept run, empty (from == end) when it has none.
	run passRun
}

// setFront records in c.fronts cl's first job and its size.
func (c *Core) setFront(cl *waitClass) {
	sk, f := &cl.skips[0], &c.fronts[cl.front]
	f.cl, f.class, f.submit, f.key = cl, cl.key, sk.submit, sk.key
	f.n, f.off = len(cl.jobs), cl.off
}

// dropRun forgets cl's kept run, after a change to what it holds: a job
// put in among its jobs, or one of them no longer waiting for room.
func (c *Core) dropRun(cl *waitClass) { c.fronts[cl.front].run = passRun{} }

// dropClass forgets cl, which holds no job.
func (c *Core) dropClass(cl *waitClass) {
	delete(c.classes, cl.key)
	last := len(c.fronts) - 1
	moved := c.fronts[last]
	c.fronts[cl.front] = moved
	moved.cl.front = cl.front
	c.fronts[last] = front{}
	c.fronts = c.fronts[:last]
}

// shrink records that a job left cl.
func (c *Core) shrink(cl *waitClass) {
	cl.gone++
	if !cl.listed {
		cl.listed = true
		c.shrunk = append(c.shrunk, cl)
	}
}

// waits reports whether j belongs in a class: pending, and not parked.
func (j *job) waits() bool { return j.state() == Pending && !j.parked }

// place is j's index in its class's jobs.
func (j *job) place() int { return j.at - j.class.off }

// setPlace records that j is at index i of cl's jobs.
func (cl *waitClass) setPlace(j *job, i int) { j.at = i + cl.off }

// skip is what a round reads of a job in its class, without the job: to
// rank it, its submit time and key (see rankAt); to pass it over (see
// passes in Schedule), what it waited for, kept by Core.setWaited, its time
// limit, and its interned fitQuery as of the Core's queryEpoch epoch (nil
// until asked).
type skip struct {
	query   *fitQuery
	limitMs int64
	submit  int64
	key     Key
	epoch   uint32
	waited  waitedFor
}

type classKey struct {
	base int64
	user int32 // the user's fair-share slot (slotOf)
}

// submitted orders a class's jobs: by submit time, then id, then index.
func submitted(a, b *job) int {
	switch {
	case a.submit != b.submit:
		return cmpInt(a.submit, b.submit)
	case a.key.ID != b.key.ID:
		return cmpInt(a.key.ID, b.key.ID)
	}
	return cmpInt(a.key.Index, b.key.Index)
}

func cmpInt[T int32 | int64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// enterClass records that j became pending. A round in progress takes it
// in at the next (as it would have, ranking the pending jobs at its
// start), lest its classes move under the merge.
func (c *Core) enterClass(j *job) {
	switch {
	case c.replica:
	case j.class != nil:
		j.class.gone-- // it never left its place
	case c.inRound:
		c.entering = append(c.entering, j)
	default:
		k := classKey{j.base, c.slotOf(j)}
		cl := c.classes[k]
		if cl == nil {
			cl = &waitClass{key: k, front: len(c.fronts)}
			c.classes[k] = cl
			c.fronts = append(c.fronts, front{})
		}
		sk := skip{waited: j.waited, limitMs: j.rec.TimeLimitMs, submit: j.submit, key: j.key}
		i := len(cl.jobs)
		if i == 0 || submitted(cl.jobs[i-1], j) < 0 {
			cl.setPlace(j, i)
			cl.jobs, cl.skips = append(cl.jobs, j), append(cl.skips, sk) // most come last
		} else {
			i, _ = slices.BinarySearchFunc(cl.jobs, j, submitted)
			cl.jobs, cl.skips = slices.Insert(cl.jobs, i, j), slices.Insert(cl.skips, i, sk)
			for k := i; k < len(cl.jobs); k++ {
				cl.setPlace(cl.jobs[k], k)
			}
		}
		c.setFront(cl)
		if i < len(cl.jobs)-1 {
			c.dropRun(cl) // those after it moved
		}
		j.class = cl
	}
}

// leaveClass records that j is no longer pending.
func (c *Core) leaveClass(j *job) {
	if j.class != nil && !j.parked {
		c.shrink(j.class) // a parked job was counted gone when parked
	}
}

// readyClasses brings the classes up to date for a round: the jobs that
// became pending (or were unparked) during the last go in, and those that
// left pending or were parked go.
func (c *Core) readyClasses() {
	entering := c.entering
	c.entering = nil
	for _, j := range entering {
		if j.waits() && j.class == nil {
			c.enterClass(j)
		}
	}
	for _, cl := range c.shrunk {
		cl.listed = false
		if cl.gone == 0 {
			continue // those that left came back
		}
		cl.compact(&c.fronts[cl.front].run)
		if len(cl.jobs) == 0 {
			c.dropClass(cl)
		} else {
			c.setFront(cl)
		}
	}
	clear(c.shrunk)
	c.shrunk = c.shrunk[:0]
}

// compact drops from cl the jobs that left it (gone). Most often they are
// the first: a round starts a class's jobs in their order. A run of them
// at the front is dropped by moving the class's start alone, so a round
// costs a class the jobs it took, not all it holds. The class's run r is
// moved with the jobs it holds.
func (cl *waitClass) compact(r *passRun) {
	front := 0
	for front < len(cl.jobs) && !cl.jobs[front].waits() {
		cl.jobs[front].class = nil
		front++
	}
	clear(cl.jobs[:front])
	clear(cl.skips[:front])
	cl.jobs, cl.skips, cl.off = cl.jobs[front:], cl.skips[front:], cl.off+front
	if cl.gone -= front; cl.gone == 0 {
		return
	}
	// A bound of the run at the place of a job, or just past the last,
	// moves to where the first job kept from there on goes.
	kept, from, end := 0, r.from, r.end
	moveBounds := func(p int) {
		if p == from {
			r.from = kept + cl.off
		}
		if p == end {
			r.end = kept + cl.off
		}
	}
	for i, j := range cl.jobs {
		moveBounds(i + cl.off)
		if j.waits() {
			cl.jobs[kept], cl.skips[kept] = j, cl.skips[i]
			cl.setPlace(j, kept)
			kept++
		} else {
			j.class = nil
		}
	}
	moveBounds(len(cl.jobs) + cl.off)
	clear(cl.jobs[kept:])
	clear(cl.skips[kept:])
	cl.jobs, cl.skips = cl.jobs[:kept], cl.skips[:kept]
	cl.gone = 0
}

// queue is a round's merge of the classes: a heap of each class's next
// job, ranked, with the first to consider on top.
type queue []classHead

// classHead is a class's next job in the merge: its standing, and where
// it is by places, not pointers: its class's in Core.fronts (which stay
// put during a round) and its own in the class's jobs. Each pop moves
// heads about the heap, and while the collector marks (with a large heap,
// much of the time) each pointer moved paid its write barrier.
type classHead struct {
	standing
	front int32
	at    int32
}

// standingAt is the standing of the job at place i of cl, read from the
// class alone.
func (c *Core) standingAt(cl *waitClass, i int, nowMs int64) standing {
	sk := &cl.skips[i]
	return standing{c.classPrio(cl.key, sk.submit, nowMs), sk.submit, sk.key}
}

// classPrio is the priority at nowMs of a job of class k submitted at
// submitMs.
func (c *Core) classPrio(k classKey, submitMs, nowMs int64) int64 {
	return k.base + c.age(submitMs, nowMs) + c.slotFairShare(k.user)
}

// queueAt returns the merge of the classes as of nowMs, in c.merge: a
// round has one merge at a time.
func (c *Core) queueAt(nowMs int64) queue {
	q := c.mergeRoom()
	for i := range c.fronts {
		f := &c.fronts[i]
		q = append(q, classHead{standing{c.classPrio(f.class, f.submit, nowMs), f.submit, f.key}, int32(i), 0})
	}
	q.init()
	return q
}

// queueFrom returns the merge of the classes as of nowMs, from the job
// that from ranks (or the first after it) on: each class's jobs ahead of
// it are left out, and the classes that still have jobs after it are
// marked in c.skipped (see rewind). It replaces the round's merge
// (c.merge).
func (c *Core) queueFrom(nowMs int64, from standing) queue {
	q := c.mergeRoom()
	c.skipped = slices.Grow(c.skipped[:0], len(c.fronts))[:len(c.fronts)]
	for fi, f := range c.fronts {
		cl := f.cl
		i := sort.Search(len(cl.jobs), func(i int) bool { return !ahead(c.standingAt(cl, i, nowMs), from) })
		c.skipped[fi] = i > 0 && i < len(cl.jobs)
		if i < len(cl.jobs) {
			q = append(q, classHead{c.standingAt(cl, i, nowMs), int32(fi), int32(i)})
		}
	}
	q.init()
	return q
}

// rewind, in a resumed round, is asked before j starts: when queueFrom
// left out jobs of j's class ahead of j, it puts the class back in the
// merge from its first job and reports true, and j is not to start yet.
// A class's jobs rank by submission alone, so those left out rank ahead
// of j: they are weighed first, as a round from the top would have weighed
// them, and one that asks what j asks takes the room, rather than wait for
// the sweep to come round to it while the jobs submitted after it start.
// A class is put back once a round; its jobs left out that still pass cost
// the sweep little (see popSkipping).
func (q *queue) rewind(c *Core, j *job, nowMs int64) bool {
	fi := int32(j.class.front)
	if !c.skipped[fi] {
		return false
	}
	c.skipped[fi] = false
	h := classHead{c.standingAt(j.class, 0, nowMs), fi, 0}
	if i := slices.IndexFunc(*q, func(o classHead) bool { return o.front == fi }); i >= 0 {
		(*q)[i] = h
	} else {
		*q = append(*q, h)
	}
	q.init() // as rare as a start in a resumed round: no dearer than the search
	return true
}

// mergeRoom returns c.merge emptied, with room for every class.
func (c *Core) mergeRoom() queue {
	if cap(c.merge) < len(c.fronts) {
		c.merge = make(queue, 0, len(c.fronts)+len(c.fronts)/4)
	}
	return c.merge[:0]
}

// peek returns the job to consider next; the queue must not be empty.
func (q queue) peek(c *Core) *job { return c.fronts[q[0].front].cl.jobs[q[0].at] }

// peekStanding is the standing of the job to consider next.
func (q queue) peekStanding() standing { return q[0].standing }

// popSkipping takes the job to consider next off the queue, and passes
// over up to most of the jobs after it in its class that pass reports
// (given their class and place; nil passes none), before it brings the
// class's next job up. It returns the job (nil when it passes: it is not
// read), whether pass reports it passes too, and how many after it it
// passed over. With noRoom, the queries that found no room in the round,
// pass is Schedule's passes: a run of the class's jobs that passed in an
// earlier round is passed in one step when it passes again (see passRun),
// and a class that passes to the end of such a run is not read.
func (q *queue) popSkipping(c *Core, nowMs int64, pass func(*waitClass, int) bool, noRoom *queryBits, most int) (j *job, passes bool, skipped int) {
	h := &(*q)[0]
	f, at := &c.fronts[h.front], int(h.at)
	cl, epoch := f.cl, c.queryEpoch
	// run is the run of jobs that waited for room this sweep passes, and
	// best the longest so far; each is empty (from == end) at first.
	run := passRun{from: at + f.off, end: at + f.off, epoch: epoch}
	best := run
	keep := func() {
		if run.end-run.from > best.end-best.from {
			best = run
		}
	}
	i := at // the place of the job to consider
	for i < f.n && (i == at || skipped < most) {
		head := b2i(i == at)
		if end, ok := f.passesFrom(i, noRoom, epoch); ok && skipped+end-i-head <= most {
			passes = passes || i == at
			skipped += end - i - head
			run.join(&f.run)
			i = end
			continue
		}
		if pass == nil || !pass(cl, i) {
			if i > at {
				break
			}
			run.from, run.end = i+f.off+1, i+f.off+1 // the job is weighed
			i++
			continue
		}
		passes = passes || i == at
		skipped += 1 - head
		if noRoom != nil && !run.add(i+f.off, &cl.skips[i]) {
			keep()
			run.from, run.end = i+f.off+1, i+f.off+1
		}
		i++
	}
	keep()
	// The run kept is the two as one where they meet, else the one that
	// passes more from the class's head on.
	switch r := &f.run; {
	case r.from == r.end || r.epoch != epoch:
		*r = best
	case best.from < best.end && best.from <= r.end && r.from <= best.end:
		r.join(&best)
	case best.end-best.from > r.end-max(r.from, at+f.off):
		*r = best
	}
	if i < f.n {
		h.standing, h.at = c.standingAt(cl, i, nowMs), int32(i)
	} else {
		last := len(*q) - 1
		(*q)[0] = (*q)[last]
		*q = (*q)[:last]
	}
	if !passes {
		j = cl.jobs[at]
	}
	q.sink(0)
	return j, passes, skipped
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Len is how many classes have jobs left to consider.
func (q queue) Len() int { return len(q) }

// The queue is a binary heap written for its one element type: through
// container/heap, each comparison and swap was a call through an
// interface, and each pop boxed the head it returned.

// init orders the heap.
func (q queue) init() {
	for i := len(q)/2 - 1; i >= 0; i-- {
		q.sink(i)
	}
}

// sink moves the head at place top down to its place among those below
// it, as a bottom-up heapsort does: the heads ahead are moved up along the
// path of the first child of each down to the bottom, and the head goes
// back up that path to its place. A pop's head on top is one that was at
// the bottom, or a class's next job, which ranks behind its last; either
// most often belongs near the bottom, so this asks one comparison a level
// where moving it down as far as it goes asks two.
func (q queue) sink(top int) {
	if top >= len(q) {
		return
	}
	h, i := q[top], top
	for {
		m := 2*i + 1
		if m >= len(q) {
			break
		}
		if r := m + 1; r < len(q) && ahead(q[r].standing, q[m].standing) {
			m = r
		}
		q[i] = q[m]
		i = m
	}
	for i > top {
		p := (i - 1) / 2
		if !ahead(h.standing, q[p].standing) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = h
}

// A job that waits on its dependencies or on its array's cap is parked:
// taken out of its class until something happens that may let it start (a
// job it depends on ends, or a task of its array stops running), so that
// rounds do not weigh it again and again meanwhile. Parking changes no
// decision: every round in between would have found the same reason.

// park sets pending j's reason and parks j when the reason is one that
// only those events can lift.
func (c *Core) park(j *job, reason string) {
	never := reason == ReasonDependencyNeverSatisfied && j.rec.PendingReason != reason
	c.setReason(j, reason)
	if c.replica || j.parked || j.class == nil {
		return
	}
	switch reason {
	case ReasonDependency, ReasonDependencyNeverSatisfied:
		for _, d := range j.spec.Deps {
			c.waitsOn[d.JobId] = append(c.waitsOn[d.JobId], j)
		}
	case ReasonArrayTaskLimit:
		i, _ := slices.BinarySearchFunc(c.capped[j.key.ID], j, submitted)
		c.capped[j.key.ID] = slices.Insert(c.capped[j.key.ID], i, j)
	case ReasonCacheCheck:
		// CacheChecked, or resolveCache, unparks it.
	default:
		return
	}
	j.parked = true
	c.shrink(j.class)
	if never {
		// Those that wait on j can never start either: they look again.
		c.unparkDependents(j.key.ID)
	}
}

// unpark brings parked j back to its class, if it still waits, and marks
// a round to weigh it.
func (c *Core) unpark(j *job) {
	if !j.parked {
		return
	}
	j.parked = false
	if unkeyed(j) {
		c.resolving = append(c.resolving, j)
	}
	if j.state() == Pending {
		c.enterClass(j)
		c.reschedule = true
	}
}

// unparkDependents unparks the jobs that wait on job id's dependencies.
func (c *Core) unparkDependents(id int64) {
	js := c.waitsOn[id]
	delete(c.waitsOn, id)
	for _, j := range js {
		c.unpark(j)
	}
}

// unparkCapped unparks the first task of array id parked at its cap.
func (c *Core) unparkCapped(id int64) {
	for js := c.capped[id]; len(js) > 0; js = c.capped[id] {
		j := js[0]
		if len(js) == 1 {
			delete(c.capped, id)
		} else {
			c.capped[id] = js[1:]
		}
		if j.parked && j.state() == Pending {
			c.unpark(j)
			return
		}
	}
}
