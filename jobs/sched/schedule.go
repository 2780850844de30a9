package sched

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// priorityOf breaks down a job's priority: its own, its queue's, the
// bonus it has gained by waiting, and its user's fair share.
func (c *Core) priorityOf(j *job, now time.Time) *jobspb.Priority {
	p := &jobspb.Priority{Base: int64(j.spec.Priority), Queue: int64(c.queues[j.spec.Queue].Priority), Age: c.ageBonus(j, now)}
	p.FairShare, p.FairShareFactor = c.fairShare(j.spec.User)
	p.Total = p.Base + p.Queue + p.Age + p.FairShare
	return p
}

// priority is the total of priorityOf, which a round orders by.
func (c *Core) priority(j *job, now time.Time) int64 {
	return j.base + c.ageBonus(j, now) + c.jobFairShare(j)
}

// ageBonus is the priority a pending job has gained by waiting.
func (c *Core) ageBonus(j *job, now time.Time) int64 {
	if j.state() != Pending {
		return 0
	}
	return c.age(j.rec.SubmitUnixMs, now.UnixMilli())
}

// age is the bonus of a job submitted at submitMs that waits still at
// nowMs.
func (c *Core) age(submitMs, nowMs int64) int64 {
	waited := time.Duration(nowMs-submitMs) * time.Millisecond
	return min(int64(waited/c.cfg.AgeInterval)*c.cfg.AgeWeight, c.cfg.AgeCap)
}

// depsState says whether a job's dependencies allow it to start: "" when
// they do, else the pending reason.
func (c *Core) depsState(j *job) string {
	return c.specDeps(j.spec, map[*jobspb.JobSpec]bool{})
}

// specDeps is depsState for the jobs of spec sp. never holds, for the
// question asked, whether the jobs of each spec met so far can never
// start: the tasks of an array share their spec, and so the answer.
func (c *Core) specDeps(sp *jobspb.JobSpec, never map[*jobspb.JobSpec]bool) string {
	reason := ""
	for _, d := range sp.Deps {
		switch r := c.depState(d, never); r {
		case ReasonDependencyNeverSatisfied:
			return r
		case ReasonDependency:
			reason = r
		}
	}
	return reason
}

// depState says whether dependency d lets its job start: "" when it does,
// else the pending reason: Dependency while it may yet, or
// DependencyNeverSatisfied when it never can, as when an afterok target
// ended otherwise than COMPLETED, or can itself never start (a job that
// never starts never completes).
func (c *Core) depState(d *jobspb.Dependency, never map[*jobspb.JobSpec]bool) string {
	reason := ""
	for _, t := range c.depTargets(Key{d.JobId, d.Index}) {
		s := t.state()
		switch spec.DepKind(d.Kind) {
		case spec.AfterOK:
			if s.Terminal() && s != Completed || s == Pending && c.neverStarts(t, never) {
				return ReasonDependencyNeverSatisfied
			}
			if s != Completed {
				reason = ReasonDependency
			}
		case spec.AfterNotOK:
			if s == Completed {
				return ReasonDependencyNeverSatisfied
			}
			if !s.Terminal() {
				reason = ReasonDependency
			}
		case spec.AfterAny:
			if !s.Terminal() {
				reason = ReasonDependency
			}
		}
	}
	return reason
}

// neverStarts reports whether pending job j can never start: one of its
// dependencies can never be satisfied.
func (c *Core) neverStarts(j *job, never map[*jobspb.JobSpec]bool) bool {
	if n, ok := never[j.spec]; ok {
		return n
	}
	n := c.specDeps(j.spec, never) == ReasonDependencyNeverSatisfied
	never[j.spec] = n
	return n
}

// sortedWorkers returns the workers by name, which the caller must not
// change. The live Core keeps the slice until a worker is added; a View's
// replica, read concurrently, makes it anew.
func (c *Core) sortedWorkers() []*worker {
	if c.sorted != nil && c.view != nil {
		return c.sorted
	}
	ws := make([]*worker, 0, len(c.workers))
	for _, w := range c.workers {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(a, b int) bool { return ws[a].name < ws[b].name })
	if c.view != nil {
		c.sorted = ws
	}
	return ws
}

// Schedule starts what can start, in priority order with backfill, and
// records why the rest waits. It works only after a change that can let a
// job start: time passing alone cannot (a waiting job's age changes the
// order, not whether anything fits), but for a plan kept past its time
// (see replanEvery), which Tick marks.
func (c *Core) Schedule() {
	if len(c.resolving) > 0 {
		c.resolveCache()
	}
	if !c.reschedule {
		return
	}
	// Jobs unparked during the round are weighed in the next.
	defer func() { c.reschedule = len(c.entering) > 0 || len(c.resolving) > 0 }()
	if c.replan.j != nil && c.replan.j.state() != Pending {
		c.replan = replan{}
	}
	c.specCache, c.specLast, c.never = map[*jobspb.JobSpec]specReasons{}, nil, map[*jobspb.JobSpec]bool{}
	c.noLenders = map[string]bool{}
	if c.places == nil || len(c.places) > 2*len(c.pending)+1024 {
		c.places = map[*jobspb.JobSpec]string{} // those of specs no longer pending go
	}
	if c.queries == nil || len(c.queries) > 2*len(c.pending)+1024 {
		c.queries, c.interned = map[*jobspb.JobSpec]*fitQuery{}, map[fitAsk]*fitQuery{}
		c.queryEpoch++
		c.bitsGiven = 0
	}
	// The round marks queries that found no room (see fitQuery); without
	// maintenance windows, which look at each job's time limit, it
	// remembers them.
	c.round++
	round := c.round
	c.noRoomBits = queryBits{}
	remembers := len(c.windows) == 0
	now := c.cfg.Now()
	c.refreshShares(now)
	c.readyClasses()
	c.inRound = true
	defer func() { c.inRound = false }()
	nowMs := now.UnixMilli()
	queue := c.queueAt(nowMs)
	runningInArray := c.arrayNodes
	workers := c.sortedWorkers()
	// open is the room: the connected workers with a free job slot, the
	// only ones a job can start on now. A round fits jobs against them
	// alone, and drops each as it fills, so a nearly full cluster costs a
	// round little however many workers it has.
	open := c.keepFits(workers)
	// Jobs alike (the tasks of an array above all) have the same
	// candidates, which the Core keeps for each query from round to round.
	// Only the workers logged in changes (jobs started or ended on them,
	// workers joining or leaving) can have changed: a query's candidates
	// are brought up to date with those alone when it is asked again.
	// What depends on the round is not kept past it: maintenance windows,
	// which look at the time. A reservation is applied to the kept
	// candidates as a job asks.
	fits := c.keptFits
	fit := func(j *job, res *reservation) []*worker {
		k := c.fitKey(j)
		nodes := nodesOf(j.spec)
		keep := 4*nodes + 32
		if packs(j.spec) {
			keep = len(open.ws) // a packed gang chooses among all that pass
		}
		e := fits[k]
		if e != nil {
			e.catchUp(c, c.changes)
		}
		if e == nil || e.short(nodes) {
			if e != nil {
				// Its jobs used up what was kept: keep more for them.
				keep = max(keep, min(2*e.keep, maxKeep))
			}
			ok, boundary := c.topCandidates(j, open.ws, nil, now, current, keep)
			e = &kept{j: j, ok: ok, boundary: boundary, seen: len(c.changes), keep: keep, scores: make(map[*worker]float64, len(ok))}
			for _, s := range ok {
				e.scores[s.w] = s.s
			}
			fits[k] = e
		}
		ok := e.ok
		if res != nil && !res.endsBefore(j, now) {
			// The reservation keeps the job off some of its workers: the
			// tightest it allows are the first of those kept, unless too
			// few of them are left to tell.
			ok = slices.DeleteFunc(slices.Clone(ok), func(s scored) bool { return !res.allows(j, s.w, now) })
			if short(ok, e.boundary, nodes) {
				ok, _ = c.topCandidates(j, open.ws, res, now, current, keep)
			}
		}
		if k.q.pack != "" {
			return packed(j, ok)
		}
		return pick(j, ok)
	}
	defer c.reasonFresh(runningInArray, workers, now)
	var res *reservation
	// looked counts the jobs whose fit was tried since the first that did
	// not start for room (those held back by their own reasons, or asking
	// what already found no room, cost little and are not counted); at the
	// Lookback the round stops, and Tick marks the next.
	looked := 0
	c.lookedPast = false
	// passed counts every job taken off the queue past the first that did
	// not start for room; at sweepPerLookback times the Lookback the round
	// stops there, and the next round, once past its own first such job,
	// goes on from that place (resumed) rather than over the same jobs
	// again, as Slurm's backfill does with bf_continue. A queue run to its
	// end starts the next round's sweep from the top.
	passed, resumed := 0, false
	for {
		if queue.Len() == 0 {
			if open.room > 0 {
				c.resume = nil
			}
			break
		}
		if res != nil && !resumed && c.resume != nil {
			queue, resumed, c.resume = c.queueFrom(nowMs, *c.resume), true, nil
			continue
		}
		if res != nil && open.room > 0 {
			if passed == sweepPerLookback*c.cfg.Lookback {
				r := queue.peekStanding()
				c.resume, c.lookedPast = &r, true
				break
			}
			passed++
		}
		if open.room == 0 {
			// Nothing more can start: the rest wait for resources, or
			// for their own reasons; the first of them, when it heads
			// the queue, may preempt.
			if head := queue.peek(c); res == nil && c.blocked(head, runningInArray, workers) == "" && c.quota(head).reason == "" {
				c.tryPreempt(head, workers, now)
			}
			// A job that waits for room still keeps its reason (see
			// below), and so do those after it in its class that wait for
			// room too: they are counted, unranked and off the heap, as a
			// sweep passes them over, and a full cluster costs a round
			// the classes, not every waiting job.
			var waitsForRoom func(cl *waitClass, i int) bool
			if !c.quotas {
				waitsForRoom = func(cl *waitClass, i int) bool { return cl.skips[i].waited == waitedRoom }
			}
			for queue.Len() > 0 && looked < c.cfg.Lookback {
				j, passes, skipped := queue.popSkipping(c, nowMs, waitsForRoom, nil, c.cfg.Lookback-looked-1)
				looked += skipped
				if passes {
					looked++
					continue
				}
				reason := c.blocked(j, runningInArray, workers)
				if reason == "" {
					reason = c.quotaReason(j, now)
				}
				if reason == "" {
					reason = ReasonResources
					looked++
				}
				c.park(j, reason)
			}
			break
		}
		// Past the first job that found no room, a job keeps its reason,
		// unworked (it passes), when it would get the same: one that
		// waited for room (Resources) and asks what found none in this
		// round, and one that waited its turn (Priority), asks what found
		// none the reservation allows but some room, and would still run
		// at the reserved time. A hold or a dependency cannot newly hold
		// back a job that waited so, and an array's cap reached since
		// would change only which reason it shows. (Quotas are left out:
		// asking one may reclaim.) Whether a job starts is settled for the
		// rest of the round once it passes, so those after j in its class
		// that pass are passed over now, unranked and off the heap (one
		// that waited its turn keeps Priority, though its query may find
		// no room later in the round). passes reads the class's copy
		// (skip) of the job at place i, not the job.
		var passes func(cl *waitClass, i int) bool
		if res != nil && !c.quotas && len(c.windows) == 0 {
			passes = func(cl *waitClass, i int) bool {
				sk := &cl.skips[i]
				if sk.waited == waitedOther {
					return false
				}
				if sk.query == nil || sk.epoch != c.queryEpoch {
					sk.query, sk.epoch = c.interns(cl.jobs[i]), c.queryEpoch
				}
				if sk.waited == waitedRoom {
					return sk.query.noRoom == round
				}
				return sk.query.barred == round && sk.query.noRoom != round && !res.endsWithin(sk.limitMs, now)
			}
		}
		var noRoom *queryBits
		if passes != nil {
			noRoom = &c.noRoomBits
		}
		j, passing, skipped := queue.popSkipping(c, nowMs, passes, noRoom, sweepPerLookback*c.cfg.Lookback-passed)
		passed += skipped
		if passing {
			continue
		}
		if resumed && !j.waits() {
			continue // it started, or was parked, before the round resumed
		}
		reason := c.blocked(j, runningInArray, workers)
		quota := quotaVerdict{reason: reason}
		if reason == "" {
			quota = c.quota(j)
			if quota.reason != "" {
				reason = c.quotaReason(j, now)
			}
		}
		if reason == "" && res != nil && remembers && c.interns(j).noRoom == round {
			reason = ReasonResources
		}
		if reason == "" && res != nil {
			if looked == c.cfg.Lookback {
				c.lookedPast = true // j and those left might start
				break
			}
			looked++
		}
		if reason == "" {
			q := c.interns(j)
			var ws []*worker
			byQuery := res != nil && remembers && !res.endsBefore(j, now) // what j may have depends on its query alone
			if !byQuery || q.barred != round {
				ws = fit(j, res)
			}
			if ws != nil && resumed && queue.rewind(c, j, nowMs) {
				continue // the jobs of its class left out are weighed first
			}
			if ws != nil {
				c.start(j, ws, now)
				res.take(j, ws, now)
				if quota.borrows {
					c.borrow(j)
				}
				c.changes = append(c.changes, ws...)
				for _, w := range ws {
					open.update(w)
				}
				open.seen = len(c.changes)
				continue
			}
			if byQuery {
				q.barred = round
			}
			packWait := ""
			if packs(j.spec) && j.spec.PackRequired {
				packWait = c.packWait(j, open.ws, res, now)
			}
			switch {
			case packWait != "":
				// It would fit spread; it waits for one domain to have
				// room, and holds nothing back meanwhile.
				reason = packWait
			case res == nil && c.tryPreempt(j, workers, now):
				// It waits for the jobs it preempted to stop; what they
				// free is its first, as it heads the queue.
				res = c.reservation(j, now)
				reason = ReasonResources
			case len(c.windows) > 0 && c.fit(j, open.ws, nil, now, currentUnreserved) != nil:
				// Only maintenance windows hold it back: it reserves
				// nothing, lest it delay others for a window's length.
				reason = ReasonReservation
			case res == nil:
				res = c.reservation(j, now)
				reason = ReasonResources
			case fit(j, nil) != nil:
				reason = ReasonPriority
			default:
				reason = ReasonResources
			}
			if reason == ReasonResources && remembers {
				c.noRoom(q)
			}
		}
		// A pending reason is worked out again every round, so a change of
		// reason alone is not written: it reaches the store with the job's
		// next change of state, and a restarted server recomputes it. (With
		// a large array waiting, reasons flip as slots free and fill; writing
		// each flip would rewrite every waiting task round after round.)
		c.park(j, reason)
	}
}

// reasonFresh gives the jobs that became pending since the last round and
// that it did not consider (past the Lookback) a reason: their own, or
// Priority, as jobs ahead of them wait.
func (c *Core) reasonFresh(runningInArray map[int64]int, workers []*worker, now time.Time) {
	for _, j := range c.fresh {
		if j.state() != Pending || j.rec.PendingReason != "" {
			continue
		}
		reason := c.blocked(j, runningInArray, workers)
		if reason == "" {
			reason = c.quota(j).reason
		}
		if reason == "" {
			reason = ReasonPriority
		}
		c.park(j, reason)
	}
	c.fresh = c.fresh[:0]
}

// blocked says why j cannot start however much room there is: it is
// held, its dependencies, its array's cap, or no worker ever fitting it; "" when
// none of these holds.
func (c *Core) blocked(j *job, runningInArray map[int64]int, workers []*worker) string {
	if j.rec.Held {
		return ReasonJobHeldUser
	}
	r := c.specReason(j, workers)
	if r.deps != "" {
		return r.deps
	}
	if j.checking || unkeyed(j) {
		if !j.checking {
			c.resolving = append(c.resolving, j)
		}
		return ReasonCacheCheck
	}
	if a := j.spec.Array; a != nil && a.Limit > 0 && runningInArray[j.key.ID] >= int(a.Limit) {
		return ReasonArrayTaskLimit
	}
	return r.place
}

// specReasons are the reasons a job may wait that depend on its spec
// alone, which the tasks of an array share: its dependencies (deps), and
// no worker ever fitting it (place, worked out only when deps is "").
// Neither changes while a round starts jobs.
type specReasons struct{ deps, place string }

// specReason returns j's specReasons. Those of a spec with dependencies are
// worked out once a round, not for each of an array's many tasks; a place
// reason is kept from round to round (c.places) until a worker registers.
func (c *Core) specReason(j *job, workers []*worker) specReasons {
	if j.spec == c.specLast {
		return c.specLastReasons
	}
	r, ok := c.specCache[j.spec]
	if !ok {
		if len(j.spec.Deps) > 0 {
			r.deps = c.specDeps(j.spec, c.never)
		}
		if r.deps == "" {
			place, known := c.places[j.spec]
			if !known {
				place = c.placeable(j, workers)
				c.places[j.spec] = place
			}
			r.place = place
		}
		if len(j.spec.Deps) > 0 {
			c.specCache[j.spec] = r
		}
	}
	c.specLast, c.specLastReasons = j.spec, r
	return r
}

// standing is what a round orders waiting jobs by: a job's priority in
// the round, and its submit time and key, which order jobs of equal
// priority.
type standing struct {
	prio   int64
	submit int64
	key    Key
}

// ranked is a waiting job and its standing, kept here so that ordering
// does not chase the job.
type ranked struct {
	job *job
	standing
}

// rank is j, pending, as a round orders it at nowMs: priority's sum, from
// the job alone, not its record.
func (c *Core) rank(j *job, nowMs int64) ranked {
	return ranked{j, standing{j.base + c.age(j.submit, nowMs) + c.jobFairShare(j), j.submit, j.key}}
}

// ahead reports whether a round considers a before b: higher priority
// first, then earlier submitted, then by id and array index.
func ahead(a, b standing) bool {
	switch {
	case a.prio != b.prio:
		return a.prio > b.prio
	case a.submit != b.submit:
		return a.submit < b.submit
	case a.key.ID != b.key.ID:
		return a.key.ID < b.key.ID
	}
	return a.key.Index < b.key.Index
}

// kept is what a round keeps of one fitQuery's candidates: the tightest
// workers, brought up to date (catchUp) with those that jobs started on
// since.
type kept struct {
	j  *job // one of the jobs that ask it
	ok []scored
	// boundary, when the candidates were cut to the tightest, is the
	// loosest kept: those left out are looser still, so only the ones up
	// to it are sure to be the tightest.
	boundary *scored
	seen     int // how much of the round's changed workers ok takes in
	keep     int // how many were asked for
	// scores holds the score each worker in ok has there, by which it is
	// found.
	scores map[*worker]float64
}

// maxKeep bounds how many candidates a query keeps as its jobs use them up.
const maxKeep = 1024

// catchUp takes in the workers of changed past e.seen, which jobs started
// on: each leaves ok and comes back at its new place if it still passes.
func (e *kept) catchUp(c *Core, changed []*worker) {
	if len(changed) == e.seen {
		return
	}
	c.stamps++
	since := c.since[:0]
	for _, w := range changed[e.seen:] {
		if w.stamp != c.stamps {
			w.stamp = c.stamps
			since = append(since, w)
		}
	}
	c.since = since
	e.seen = len(changed)
	for _, w := range since {
		old, in := e.scores[w]
		passes := c.fits(e.j, w, current)
		switch {
		case in && passes:
			// It moves to its new place: most often the tightest, where
			// it was.
			s := scored{w, score(e.j, w)}
			e.scores[w] = s.s
			i, _ := slices.BinarySearchFunc(e.ok, scored{w, old}, byTightness)
			e.ok = moveTo(e.ok, i, s)
		case in:
			delete(e.scores, w)
			i, _ := slices.BinarySearchFunc(e.ok, scored{w, old}, byTightness)
			if i == 0 {
				e.ok = e.ok[1:]
			} else {
				e.ok = slices.Delete(e.ok, i, i+1)
			}
		case passes:
			s := scored{w, score(e.j, w)}
			if e.boundary != nil && tighter(*e.boundary, s) {
				// Looser than the cut: like those left out, it could be
				// picked only once the candidates are found anew.
				continue
			}
			i, _ := slices.BinarySearchFunc(e.ok, s, byTightness)
			e.ok = slices.Insert(e.ok, i, s)
			e.scores[w] = s.s
		}
	}
}

// moveTo replaces ok[i] with s, which keeps ok ordered by tightness,
// shifting only the candidates between the old place and the new.
func moveTo(ok []scored, i int, s scored) []scored {
	j, _ := slices.BinarySearchFunc(ok, s, byTightness)
	switch {
	case j <= i:
		copy(ok[j+1:i+1], ok[j:i])
	default:
		j-- // its place once ok[i] is out
		copy(ok[i:j], ok[i+1:j+1])
	}
	ok[j] = s
	return ok
}

// short reports whether e can no longer tell the tightest workers for a
// job of nodes nodes: it was cut, and fewer than nodes of those it kept
// are tighter than the ones it left out.
func (e *kept) short(nodes int) bool { return short(e.ok, e.boundary, nodes) }

// short reports whether candidates cut at boundary (nil: not cut) can no
// longer tell the tightest workers for a job of nodes nodes: fewer than
// nodes of them are tighter than the ones left out.
func short(ok []scored, boundary *scored, nodes int) bool {
	return boundary != nil && (len(ok) < nodes || tighter(*boundary, ok[nodes-1]))
}

// keepFits readies the kept candidates and the open workers for a round:
// the open set takes in the log of changes; kept candidates of a round with
// maintenance windows go (they depend on the time), and all go once the log
// has grown past what catching up with it is worth. The log is cut once
// no kept candidates need it.
func (c *Core) keepFits(workers []*worker) *openSet {
	open := c.openRoom(workers)
	windowed := c.keptWindowed
	c.keptWindowed = len(c.windows) > 0
	if c.keptFits == nil || windowed || c.keptWindowed || len(c.changes) > 4*len(c.workers)+1024 {
		c.keptFits = map[fitKey]*kept{}
	}
	if c.keptEpoch != c.queryEpoch {
		// The keys are interned queries: those of the new epoch take
		// their place.
		old := c.keptFits
		c.keptFits, c.keptEpoch = make(map[fitKey]*kept, len(old)), c.queryEpoch
		for k, e := range old {
			k.q = c.intern(k.q.fitAsk)
			c.keptFits[k] = e
		}
	}
	if len(c.keptFits) == 0 {
		c.changes, open.seen = c.changes[:0], 0
	}
	return open
}

// fitKey names the candidates a job's fit keeps (kept): its interned
// fitQuery and, where maintenance windows make it count, its time limit.
type fitKey struct {
	q       *fitQuery
	limitMs int64
}

// fitKey returns j's fitKey.
func (c *Core) fitKey(j *job) fitKey {
	k := fitKey{q: c.interns(j)}
	if len(c.windows) > 0 {
		k.limitMs = j.rec.TimeLimitMs // maintenance windows look at it
	}
	return k
}

// interns returns the copy of the fitQuery of j's spec that the Core
// keeps, leaving out the time limit: jobs that ask alike (without
// maintenance windows) have the same. j keeps it while the Core does.
func (c *Core) interns(j *job) *fitQuery {
	if j.queryEpoch == c.queryEpoch && j.query != nil {
		return j.query
	}
	j.query, j.queryEpoch = c.internSpec(j), c.queryEpoch
	return j.query
}

// internSpec is interns for j's spec.
func (c *Core) internSpec(j *job) *fitQuery {
	if q := c.queries[j.spec]; q != nil {
		return q
	}
	s := j.spec
	q := fitAsk{need: need(s), platform: s.Platform + "\x00" + s.Container + "\x00" + strings.Join(s.Constraints, "\x00"), minNodes: minNodesOf(s), nodes: nodesOf(s)}
	if packs(s) {
		q.pack = fmt.Sprint(s.Pack, s.PackRequired)
	}
	p := c.intern(q)
	c.queries[s] = p
	return p
}

// intern returns the Core's copy of q.
func (c *Core) intern(q fitAsk) *fitQuery {
	p := c.interned[q]
	if p == nil {
		p = &fitQuery{fitAsk: q, bit: -1}
		if c.bitsGiven < maxQueryBits {
			p.bit = c.bitsGiven
			c.bitsGiven++
		}
		c.interned[q] = p
	}
	return p
}

// noRoom marks that a job asking q found no room in this round.
func (c *Core) noRoom(q *fitQuery) {
	q.noRoom = c.round
	if q.bit >= 0 {
		c.noRoomBits.add(q.bit)
	}
}

// fitQuery is a fitAsk as the Core interns it, with the last rounds
// (Core.round) in which a job asking it found no room (noRoom), or none
// that the round's reservation allows (barred).
//   - noRoom: with no reservation keeping the job off any worker. As jobs
//     only start in a round, the jobs after it that ask the same find none
//     either. That holds for packed gangs too: the query names the label
//     and whether packing is required, and what a domain has free only
//     shrinks.
//   - barred: for a job that would still run at the reserved time. Such a
//     job is kept off a reserved worker by what it asks alone, so the jobs
//     after it that ask the same and would still run then find none
//     either.
//
// The first maxQueryBits queries interned since the Core's queries were
// made anew have a bit each (bit; -1 for the others), by which a set of
// them is kept (queryBits).
type fitQuery struct {
	fitAsk
	noRoom, barred uint64
	bit            int
}

// queryBits is a set of interned queries, by their bits.
type queryBits [4]uint64

const maxQueryBits = len(queryBits{}) * 64

func (b *queryBits) add(bit int) { b[bit/64] |= 1 << (bit % 64) }

// within reports whether every query in b is in m.
func (b *queryBits) within(m *queryBits) bool {
	return b[0]&^m[0]|b[1]&^m[1]|b[2]&^m[2]|b[3]&^m[3] == 0
}

// fitAsk is what a fit depends on besides the workers' room.
type fitAsk struct {
	need     capacity
	platform string
	minNodes int
	nodes    int
	pack     string // the label a gang is packed by, and whether it must be
}

// start runs j's next attempt on ws, rank by rank: it hands each node its
// GPUs, records the attempt and sends it. A gang's ranks other than 0 are
// sent it once rank 0 has picked the master port (Started).
func (c *Core) start(j *job, ws []*worker, now time.Time) {
	c.move(j, Running)
	delete(c.preempting, j.key)
	j.rec.PendingReason, j.rec.Borrowed = "", false
	j.rec.StartUnixMs = now.UnixMilli()
	if c.cfg.Waited != nil {
		c.cfg.Waited(j.spec.Queue, time.Duration(j.rec.StartUnixMs-j.rec.SubmitUnixMs)*time.Millisecond)
	}
	j.rec.Attempts++
	j.task = taskID(j)
	j.rec.OutputBytes, j.rec.OutputDroppedBytes, j.rec.OutputUnmarkedBytes = 0, 0, 0
	j.rec.CpuTimeMs, j.rec.PeakMemoryBytes = 0, 0 // this attempt's nodes add theirs as they end
	j.rec.ExitCode = 0                            // none yet: an attempt lost goes into the history without one
	j.rec.Nodes, j.rec.MasterPort = nil, 0
	for r, w := range ws {
		n := &jobspb.Node{Rank: int32(r), Worker: w.name, TaskId: j.task, Address: w.address}
		if r > 0 {
			n.TaskId = fmt.Sprintf("%s.%d", j.task, r)
		}
		for _, g := range w.dev.take(j.key, int(j.spec.Gpus)) {
			n.GpuIndices = append(n.GpuIndices, g.Index)
			n.GpuUuids = append(n.GpuUuids, g.Uuid)
		}
		j.rec.Nodes = append(j.rec.Nodes, n)
		c.addRunning(w, j)
		c.setTask(n.TaskId, j)
	}
	j.rec.Worker, j.rec.GpuIndices = ws[0].name, j.rec.Nodes[0].GpuIndices
	c.touch(j)
	c.assign(j, j.rec.Nodes[0])
	if j.spec.Interactive {
		c.startStdin(j, ws[0])
	}
	if j.rec.Attempts > 1 {
		where := "worker " + ws[0].name
		if len(ws) > 1 {
			where = "workers " + nodeList(j.rec.Nodes)
		}
		c.logs = append(c.logs, logLine(j, fmt.Sprintf("[rbs] attempt %d on %s\n", j.rec.Attempts, where)))
	}
}

// envNames is how many names assign sets at most, besides a sweep's: for
// a task of an array that runs as a gang.
const envNames = 24

// assign sends node n of j's attempt to its worker, with the job's
// environment: its own, rbs's, the same in Slurm's names (so that scripts
// written for Slurm run unchanged), and for a gang the node's rank and
// where rank 0 is, in rbs's names and in PyTorch's.
func (c *Core) assign(j *job, n *jobspb.Node) {
	s := j.spec
	nodes := len(j.rec.Nodes)
	gang := nodes > 1
	// Sized for the job's own and the most names rbs sets, one by one
	// below: each start builds one.
	env := make(map[string]string, len(s.Env)+envNames)
	for k, v := range s.Env {
		env[k] = v
	}
	id := strconv.FormatInt(j.key.ID, 10)
	rank := strconv.Itoa(int(n.Rank))
	env["RBS_JOB_ID"] = id
	env["RBS_JOB_NAME"] = s.Name
	env["RBS_QUEUE"] = s.Queue
	env["RBS_ATTEMPT"] = strconv.Itoa(int(j.rec.Attempts))
	// The tasks of an array share its id, as ID_INDEX: their SLURM_JOB_ID
	// is the array's, where Slurm gives each task one of its own.
	env["SLURM_JOB_ID"], env["SLURM_JOB_NAME"], env["SLURM_JOB_PARTITION"] = id, s.Name, s.Queue
	env["SLURM_CPUS_PER_TASK"] = strconv.Itoa(int(cpusOf(s)))
	env["SLURM_NNODES"], env["SLURM_NODEID"], env["SLURM_PROCID"] = strconv.Itoa(nodes), rank, rank
	command := sweepEnv(s, j.key.Index, env)
	if j.key.Index >= 0 {
		index := strconv.Itoa(int(j.key.Index))
		env["RBS_ARRAY_INDEX"] = index
		env["SLURM_ARRAY_JOB_ID"], env["SLURM_ARRAY_TASK_ID"] = id, index
	}
	if gang {
		master := j.rec.Nodes[0].Address
		size := strconv.Itoa(nodes)
		env["RBS_NODELIST"], env["RBS_NNODES"], env["RBS_NODE_RANK"], env["RBS_MASTER_ADDR"] = nodeList(j.rec.Nodes), size, rank, master
		env["RANK"], env["NODE_RANK"], env["WORLD_SIZE"], env["MASTER_ADDR"] = rank, rank, size, master
		if j.rec.MasterPort > 0 {
			port := strconv.Itoa(int(j.rec.MasterPort))
			env["RBS_MASTER_PORT"], env["MASTER_PORT"] = port, port
		}
	}
	w := c.workers[n.Worker]
	n.Assigned = true
	c.touch(j)
	c.send(w, &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_AssignJob{AssignJob: &workerpb.AssignJob{
		TaskId:         n.TaskId,
		JobId:          j.key.String(),
		Command:        command,
		Script:         s.Script,
		Env:            env,
		Cpus:           cpusOf(s),
		MemoryBytes:    s.MemoryBytes,
		GpuIndices:     n.GpuIndices,
		GpuUuids:       n.GpuUuids,
		TimeLimitMs:    j.rec.TimeLimitMs,
		MaxOutputBytes: c.cfg.MaxJobOutput,
		InputRoot:      s.InputRoot,
		Outputs:        rankZero(n, s.Outputs),
		CheckpointDir:  rankZeroText(n, s.CheckpointDir),
		CheckpointRoot: rankZeroText(n, j.rec.CheckpointRoot),
		Interactive:    s.Interactive && n.Rank == 0,
		PickMasterPort: gang && n.Rank == 0,
		StopGraceMs:    c.stopGrace(s),
		ContainerImage: s.Container,
		Upstream:       c.upstream(j),
	}}})
}

// rankZero keeps v for rank 0: the outputs and checkpoint of a gang are
// rank 0's.
func rankZero(n *jobspb.Node, v []string) []string {
	if n.Rank != 0 {
		return nil
	}
	return v
}

func rankZeroText(n *jobspb.Node, v string) string {
	if n.Rank != 0 {
		return ""
	}
	return v
}

// stopGrace is how long a job's attempt has between SIGTERM and SIGKILL:
// the preemption grace for a preemptible job, else the worker's default.
func (c *Core) stopGrace(s *jobspb.JobSpec) int64 {
	if s.Preemptible {
		return c.cfg.PreemptGrace.Milliseconds()
	}
	return 0
}
