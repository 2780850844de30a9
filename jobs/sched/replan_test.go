package sched

import (
	"fmt"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// minutes is m minutes in milliseconds, as time limits are given.
func minutes(m int) int64 { return (time.Duration(m) * time.Minute).Milliseconds() }

// A job backfilled onto a reserved worker takes from what the reservation
// leaves there, so a second one that would also outlast the reserved start
// does not take the head job's room.
func TestBackfillTakesFromTheReservation(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 8, 8)
	long := h.submit(&jobspb.JobSpec{Cpus: 4, TimeLimitMs: minutes(10)})
	h.step()
	big := h.submit(&jobspb.JobSpec{Cpus: 6, Priority: 10, TimeLimitMs: minutes(60)})
	a := h.submit(&jobspb.JobSpec{Cpus: 2, Priority: 5, TimeLimitMs: minutes(20)})
	b := h.submit(&jobspb.JobSpec{Cpus: 2, TimeLimitMs: minutes(20)})
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(a, "@w") {
		t.Fatalf("started %v, want only job %d: the reservation leaves room for one 2-CPU job past its start", got, a)
	}
	if r := h.rec(b, -1).PendingReason; r != ReasonPriority {
		t.Fatalf("job %d waits for %q, want %s", b, r, ReasonPriority)
	}
	h.advance(10 * time.Minute)
	h.finish(long, -1, Completed)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(big, "@w") {
		t.Fatalf("started %v, want the big job at its reserved start", got)
	}
}

// behindReservation returns a harness of the given Lookback whose one
// worker, of 4 CPUs, runs a 2-CPU job for 10 minutes, and the id of a
// 4-CPU job of priority 10 submitted after it, which the next round
// reserves the worker for: the jobs submitted after it wait behind that
// reservation.
func behindReservation(t *testing.T, lookback int) (*harness, int64) {
	h := newHarness(t)
	h.c.cfg.Lookback = lookback
	h.worker("w", 4, 4)
	h.submit(&jobspb.JobSpec{Cpus: 2, TimeLimitMs: minutes(10)})
	h.step()
	return h, h.submit(&jobspb.JobSpec{Cpus: 4, Priority: 10, TimeLimitMs: minutes(60)})
}

// A round considers at most Lookback jobs past the first that cannot
// start for room (a held job ahead does not count); those it leaves get a
// reason, and the next tick looks again.
func TestLookback(t *testing.T) {
	h, big := behindReservation(t, 1)
	held := h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 8, Hold: true})
	first := h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 5, TimeLimitMs: minutes(5)})
	second := h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 1, TimeLimitMs: minutes(5)})
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(first, "@w") {
		t.Fatalf("started %v, want only job %d, the one within the lookback", got, first)
	}
	for id, want := range map[int64]string{big: ReasonResources, second: ReasonPriority, held: ReasonJobHeldUser} {
		if r := h.rec(id, -1).PendingReason; r != want {
			t.Fatalf("job %d waits for %q, want %q", id, r, want)
		}
	}
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(second, "@w") {
		t.Fatalf("the next tick started %v, want job %d", got, second)
	}
}

// A round passes over at most sweepPerLookback times the Lookback jobs
// past the first that cannot start for room, even those that ask what found
// none; the next goes on from where it stopped, so a job that can backfill
// deep in the queue starts a round later, not never.
func TestSweepGoesOn(t *testing.T) {
	h, big := behindReservation(t, 2) // a wide job's fit and the small one's
	var wide []int64
	for range sweepPerLookback*h.c.cfg.Lookback + 2 {
		wide = append(wide, h.submit(&jobspb.JobSpec{Cpus: 3, Priority: 5, TimeLimitMs: minutes(5)}))
	}
	small := h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 1, TimeLimitMs: minutes(5)})
	if got := h.step(); len(got) != 0 {
		t.Fatalf("started %v, want none: the small job is past the sweep", got)
	}
	if r := h.rec(small, -1).PendingReason; r != ReasonPriority {
		t.Fatalf("the small job waits for %q, want %s", r, ReasonPriority)
	}
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(small, "@w") {
		t.Fatalf("the next round started %v, want the small job %d", got, small)
	}
	for _, id := range append(wide, big) {
		if r := h.rec(id, -1).PendingReason; r != ReasonResources {
			t.Fatalf("job %d waits for %q, want %s", id, r, ReasonResources)
		}
	}
}

// A round that goes on from where the last stopped weighs the jobs of a
// class it left out before it starts a later job of that class: room that
// frees goes to the first submitted of jobs alike, not to the one the
// sweep reaches first.
func TestResumedRoundKeepsClassOrder(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.Lookback = 3
	h.worker("w", 4, 4)
	h.submit(&jobspb.JobSpec{Cpus: 2, TimeLimitMs: minutes(10)})
	one := h.submit(&jobspb.JobSpec{Cpus: 1, TimeLimitMs: minutes(10)})
	if got := h.step(); len(got) != 2 {
		t.Fatalf("started %v, want both jobs", got)
	}
	// The merge, in order: the job that reserves the worker; first, which
	// ranks ahead of the wide jobs by two minutes of age; the wide jobs,
	// which never fit and use up the first round's sweep; and second, of
	// first's class, last.
	h.submit(&jobspb.JobSpec{Cpus: 4, Priority: 10, TimeLimitMs: minutes(60)})
	first := h.submit(&jobspb.JobSpec{Cpus: 2, Priority: 5, TimeLimitMs: minutes(5)})
	h.advance(2 * time.Minute)
	for range sweepPerLookback*h.c.cfg.Lookback + 2 {
		h.submit(&jobspb.JobSpec{Cpus: 3, Priority: 6, TimeLimitMs: minutes(5)})
	}
	second := h.submit(&jobspb.JobSpec{Cpus: 2, Priority: 5, TimeLimitMs: minutes(5)})
	if got := h.step(); len(got) != 0 {
		t.Fatalf("started %v, want none: one CPU is free", got)
	}
	if h.c.resume == nil {
		t.Fatal("the round did not stop inside the wide jobs")
	}
	h.finish(one, -1, Completed)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(first, "@w") {
		t.Fatalf("the resumed round started %v, want job %d, submitted before job %d", got, first, second)
	}
}

// Jobs that waited their turn behind a reservation they would outlast, and
// that ask what the reservation left no room for, are passed over as jobs
// that wait for room are: they keep Priority, do not use up the Lookback,
// and a job behind them that can backfill starts.
func TestTurnPassesBehindAReservation(t *testing.T) {
	h, _ := behindReservation(t, 2)
	var long []int64
	for range 4 {
		long = append(long, h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 5, TimeLimitMs: minutes(60)}))
	}
	small := h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 1, TimeLimitMs: minutes(5)})
	if got := h.step(); len(got) != 0 {
		t.Fatalf("started %v, want none: the small job is past the lookback", got)
	}
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(small, "@w") {
		t.Fatalf("the next round started %v, want the small job %d", got, small)
	}
	for _, id := range long {
		if r := h.rec(id, -1).PendingReason; r != ReasonPriority {
			t.Fatalf("job %d waits for %q, want %s", id, r, ReasonPriority)
		}
	}
}

// A class whose jobs all passed for want of room keeps them as a run,
// which passes whole in the next round that finds no room for what they
// ask; a job that joins the class behind them since is weighed, not passed
// with them.
func TestPassRunTakesNewJobs(t *testing.T) {
	h, _ := behindReservation(t, 10)
	// Each round, the job of priority 6 finds no room for 3 CPUs before
	// the class of priority 5 is reached, so that its jobs all pass.
	h.submit(&jobspb.JobSpec{Cpus: 3, Priority: 6, TimeLimitMs: minutes(5)})
	var wide []int64
	for range 3 {
		wide = append(wide, h.submit(&jobspb.JobSpec{Cpus: 3, Priority: 5, TimeLimitMs: minutes(5)}))
	}
	// The first round finds what they wait for; the next, made by a job
	// of another class, passes them.
	for range 2 {
		if got := h.step(); len(got) != 0 {
			t.Fatalf("started %v, want none", got)
		}
		h.submit(&jobspb.JobSpec{Cpus: 3, Priority: 1, TimeLimitMs: minutes(5)})
	}
	cl := h.c.jobs[Key{wide[0], -1}].class
	if f := h.c.fronts[cl.front]; f.run.epoch != h.c.queryEpoch || f.run.from != cl.jobs[0].at || f.run.end != cl.jobs[len(cl.jobs)-1].at+1 {
		t.Fatalf("the class's run %+v, want all its jobs passed", f.run)
	}
	small := h.submit(&jobspb.JobSpec{Cpus: 1, Priority: 5, TimeLimitMs: minutes(5)})
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(small, "@w") {
		t.Fatalf("started %v, want job %d, which joined the class", got, small)
	}
	for _, id := range wide {
		if r := h.rec(id, -1).PendingReason; r != ReasonResources {
			t.Fatalf("job %d waits for %q, want %s", id, r, ReasonResources)
		}
	}
}

// A kept plan for the head of the queue is worked out again once it is
// replanEvery old: the tick marks a round, with nothing else changed.
func TestReplanAfterItsTime(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 4, 4)
	h.submit(&jobspb.JobSpec{Cpus: 2, TimeLimitMs: time.Hour.Milliseconds()})
	h.step()
	h.submit(&jobspb.JobSpec{Cpus: 4, Priority: 10})
	h.step()
	if h.c.replan.j == nil || h.c.replan.res == nil {
		t.Fatal("no plan kept for the job heading the queue")
	}
	h.c.Tick()
	if h.c.reschedule {
		t.Fatal("a tick marked a round with the plan still fresh")
	}
	h.advance(replanEvery)
	h.c.Tick()
	if !h.c.reschedule {
		t.Fatalf("a tick %s later did not mark a round to plan again", replanEvery)
	}
}
