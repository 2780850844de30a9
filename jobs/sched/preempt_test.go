package sched

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// cancels runs a round and returns the tasks told to stop.
func (h *harness) cancels() []string {
	h.t.Helper()
	h.c.Tick()
	h.c.Schedule()
	var out []string
	for _, o := range h.commit() {
		if c := o.Msg.GetCancel(); c != nil {
			out = append(out, c.TaskId)
		}
	}
	sort.Strings(out)
	return out
}

// stopped reports that the worker ended the attempt of job id, as a stop
// does.
func (h *harness) stopped(id int64) {
	j := h.c.jobs[Key{id, -1}]
	h.c.Ended(j.rec.Worker, &workerpb.JobEnded{TaskId: j.task, State: "CANCELLED", ExitCode: 143, CheckpointRoot: "ckpt-of-" + fmt.Sprint(id)})
}

// The youngest preemptible jobs of lower priority make room, as few as
// will do; the others, and jobs that are not preemptible, run on.
func TestPreemptionVictims(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 4, 4)
	var low []int64
	for i := range 3 {
		low = append(low, h.submit(&jobspb.JobSpec{Preemptible: true}))
		h.step()
		h.advance(time.Minute * time.Duration(i+1))
	}
	keep := h.submit(&jobspb.JobSpec{}) // not preemptible
	h.step()
	urgent := h.submit(&jobspb.JobSpec{Cpus: 2, Priority: 100})
	stops := h.cancels()
	want := []string{taskID(h.c.jobs[Key{low[1], -1}]), taskID(h.c.jobs[Key{low[2], -1}])}
	sort.Strings(want)
	if fmt.Sprint(stops) != fmt.Sprint(want) {
		t.Fatalf("stopped %v, want the two youngest preemptible jobs %v", stops, want)
	}
	if again := h.cancels(); len(again) != 0 {
		t.Fatalf("stopped %v more while the first victims stop", again)
	}
	if r := h.rec(urgent, -1); r.State != string(Pending) || r.PendingReason != ReasonResources {
		t.Fatalf("the preempting job: %s %s", r.State, r.PendingReason)
	}
	h.stopped(low[1])
	h.stopped(low[2])
	started := h.step()
	if len(started) != 1 || started[0] != fmt.Sprint(urgent, "@w") {
		t.Fatalf("started %v, want the urgent job", started)
	}
	for _, id := range low[1:] {
		r := h.rec(id, -1)
		if r.State != string(Pending) || len(r.History) != 1 || r.History[0].State != string(Preempted) || r.CheckpointRoot != fmt.Sprint("ckpt-of-", id) {
			t.Fatalf("victim %d: %s, history %v, checkpoint %q", id, r.State, r.History, r.CheckpointRoot)
		}
	}
	if r := h.rec(low[0], -1); r.State != string(Running) || r.Attempts != 1 {
		t.Fatalf("the oldest preemptible job was disturbed: %+v", r)
	}
	if r := h.rec(keep, -1); r.State != string(Running) {
		t.Fatalf("the job that is not preemptible was disturbed: %+v", r)
	}
	// Requeued, a victim starts again once there is room, attempt 2, with
	// its checkpoint.
	h.finish(urgent, -1, Completed)
	sent := h.assigns()
	a := sent["w"]
	if a == nil || a.CheckpointRoot == "" || a.Env["RBS_ATTEMPT"] != "2" {
		t.Fatalf("the victim's next attempt: %+v", a)
	}
}

// Of two workers, the one that needs fewer victims gives them up; no job
// of equal or higher priority, or none preemptible, is ever touched.
func TestPreemptionFewestVictims(t *testing.T) {
	h := newHarness(t)
	h.worker("one", 2, 2)
	h.worker("two", 2, 2)
	big := h.submit(&jobspb.JobSpec{Cpus: 2, Preemptible: true})
	h.step()
	small := []int64{h.submit(&jobspb.JobSpec{Preemptible: true}), h.submit(&jobspb.JobSpec{Preemptible: true})}
	h.step()
	if h.rec(big, -1).Worker == h.rec(small[0], -1).Worker {
		t.Fatal("the jobs did not spread as expected")
	}
	h.submit(&jobspb.JobSpec{Cpus: 2, Priority: 50})
	stops := h.cancels()
	if len(stops) != 1 || stops[0] != taskID(h.c.jobs[Key{big, -1}]) {
		t.Fatalf("stopped %v, want only the one job holding a whole worker", stops)
	}

	h2 := newHarness(t)
	h2.worker("w", 1, 1)
	h2.submit(&jobspb.JobSpec{Preemptible: true, Priority: 50})
	h2.step()
	h2.submit(&jobspb.JobSpec{Priority: 50}) // the same priority
	h2.submit(&jobspb.JobSpec{Priority: 10})
	if stops := h2.cancels(); len(stops) != 0 {
		t.Fatalf("stopped %v for jobs of no higher priority", stops)
	}
}

// A running job is weighed as a victim by the priority it would wait with
// again, its age bonus included: a job that waited long before it started
// is not preempted for one it would come back ahead of, which would find
// the room taken by it again, round after round.
func TestPreemptionCountsTheVictimsAge(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 1, 1)
	first := h.submit(&jobspb.JobSpec{})
	h.step()
	victim := h.submit(&jobspb.JobSpec{Preemptible: true})
	h.advance(time.Hour) // its age bonus: 60
	h.finish(first, -1, Completed)
	if started := h.step(); len(started) != 1 || started[0] != fmt.Sprint(victim, "@w") {
		t.Fatalf("started %v, want the preemptible job", started)
	}
	mid := h.submit(&jobspb.JobSpec{Priority: 30})
	if stops := h.cancels(); len(stops) != 0 {
		t.Fatalf("a job of priority 30 stopped %v, which would wait ahead of it with 60", stops)
	}
	if r := h.rec(mid, -1); r.PendingReason != ReasonResources {
		t.Fatalf("the job of priority 30 waits for %q", r.PendingReason)
	}
	top := h.submit(&jobspb.JobSpec{Priority: 100})
	want := taskID(h.c.jobs[Key{victim, -1}])
	if stops := h.cancels(); fmt.Sprint(stops) != fmt.Sprint([]string{want}) {
		t.Fatalf("a job of priority 100 stopped %v, want %s", stops, want)
	}
	h.stopped(victim)
	if started := h.step(); len(started) != 1 || started[0] != fmt.Sprint(top, "@w") {
		t.Fatalf("after the victim stopped, started %v; want the job it made room for", started)
	}
}

// With PreemptExempt, a job is not preempted until it has run that long
// since its start, its first or one after a requeue.
func TestPreemptionExempt(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.PreemptExempt = 5 * time.Minute
	h.worker("w", 1, 1)
	victim := h.submit(&jobspb.JobSpec{Preemptible: true})
	h.step()
	for attempt, urgent := range []*jobspb.JobSpec{{Priority: 100, Name: "first"}, {Priority: 100, Name: "second"}} {
		id := h.submit(urgent)
		h.advance(4 * time.Minute)
		if stops := h.cancels(); len(stops) != 0 {
			t.Fatalf("attempt %d: stopped %v after 4 minutes of a 5-minute exemption", attempt+1, stops)
		}
		h.advance(time.Minute)
		want := taskID(h.c.jobs[Key{victim, -1}])
		if stops := h.cancels(); fmt.Sprint(stops) != fmt.Sprint([]string{want}) {
			t.Fatalf("attempt %d: after 5 minutes stopped %v, want %s", attempt+1, stops, want)
		}
		h.stopped(victim)
		if started := h.step(); len(started) != 1 || started[0] != fmt.Sprint(id, "@w") {
			t.Fatalf("started %v, want %s", started, urgent.Name)
		}
		h.finish(id, -1, Completed)
		if started := h.step(); len(started) != 1 || started[0] != fmt.Sprint(victim, "@w") {
			t.Fatalf("started %v, want the requeued job again", started)
		}
	}
}

// For a job of one node that fits nowhere, the victim index names the
// victim that the scan of every worker ranks first whenever one victim is
// enough, and says so when none is, over clusters filled at random: jobs
// of several sizes and priorities, some preemptible, started at different
// times, some ended, some preempted and stopping, some workers gone.
func TestYoungestVictimAsTheScan(t *testing.T) {
	one, more := 0, 0
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		h := newHarness(t, Queue{Name: "low", Default: true}, Queue{Name: "high", Priority: 50})
		h.c.cfg.PreemptExempt = time.Duration(rng.IntN(3)) * time.Minute
		for w := range 6 + rng.IntN(10) {
			h.worker(fmt.Sprintf("w%02d", w), int32(2+rng.IntN(7)), 1+rng.IntN(6))
		}
		var running []int64
		for range 10 + rng.IntN(50) {
			id := h.submit(&jobspb.JobSpec{Cpus: int32(1 + rng.IntN(3)), Priority: int32(rng.IntN(20)), Preemptible: rng.IntN(3) > 0})
			if rng.IntN(4) == 0 {
				h.advance(time.Duration(rng.IntN(90)) * time.Second)
			}
			running = append(running, id)
			h.step()
			if len(running) > 0 && rng.IntN(5) == 0 {
				i := rng.IntN(len(running))
				if r := h.rec(running[i], -1); r.State == string(Running) {
					h.finish(running[i], -1, Completed)
				}
			}
			if rng.IntN(15) == 0 {
				// An urgent job preempts: its victims are stopping.
				h.submit(&jobspb.JobSpec{Queue: "high", Cpus: int32(1 + rng.IntN(4))})
				h.step()
			}
		}
		if rng.IntN(3) == 0 {
			h.c.WorkerDown("w01")
		}
		h.advance(time.Duration(rng.IntN(5)) * time.Minute)
		for try := range 20 {
			id := h.submit(&jobspb.JobSpec{Queue: "high", Priority: int32(rng.IntN(60) - 30), Cpus: int32(1 + rng.IntN(5))})
			j := h.c.jobs[Key{id, -1}]
			fitsNow := false
			for _, w := range h.c.sortedWorkers() {
				fitsNow = fitsNow || h.c.fits(j, w, current)
			}
			if fitsNow {
				continue
			}
			now := h.now
			prio, n := h.c.priority(j, now), need(j.spec)
			v, anyVictim := h.c.youngestVictim(j, prio, n, now.UnixMilli())
			scan := h.c.scanVictims(j, h.c.sortedWorkers(), prio, n, now.UnixMilli())
			switch {
			case v != nil && (len(scan) != 1 || scan[0] != v):
				t.Fatalf("seed %d try %d: the index names job %s, the scan %v", seed, try, v.key, keysOf(scan))
			case v == nil && len(scan) == 1:
				t.Fatalf("seed %d try %d: the index finds no single victim (any %v), the scan %v", seed, try, anyVictim, keysOf(scan))
			case !anyVictim && len(scan) > 0:
				t.Fatalf("seed %d try %d: the index finds no victim at all, the scan %v", seed, try, keysOf(scan))
			}
			switch {
			case v != nil:
				one++
			case len(scan) > 1:
				more++
			}
			h.c.Cancel([]Key{{id, -1}})
		}
	}
	if one == 0 || more == 0 {
		t.Fatalf("%d cases with one victim enough and %d with more: the clusters do not try both", one, more)
	}
}

func keysOf(js []*job) []Key {
	var out []Key
	for _, j := range js {
		out = append(out, j.key)
	}
	return out
}

// For a job of one node that fits nowhere, the heap of workers by first
// end finds the reservation that a walk over every worker does, over
// clusters filled at random with jobs of several sizes and time limits
// (some with none), some ended, some workers gone.
func TestSoonestWorkerAsTheScan(t *testing.T) {
	found := 0
	for seed := range 40 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		h := newHarness(t)
		for w := range 4 + rng.IntN(12) {
			h.worker(fmt.Sprintf("w%02d", w), int32(4+rng.IntN(7)), 1+rng.IntN(6))
		}
		var ids []int64
		for range 10 + rng.IntN(60) {
			limit := int64(rng.IntN(3)) * 10 * time.Minute.Milliseconds() // ties are many
			ids = append(ids, h.submit(&jobspb.JobSpec{Cpus: int32(1 + rng.IntN(3)), TimeLimitMs: limit}))
			if rng.IntN(3) == 0 {
				h.advance(time.Duration(rng.IntN(3)) * 5 * time.Minute)
			}
			h.step()
			if i := rng.IntN(len(ids)); rng.IntN(4) == 0 && h.rec(ids[i], -1).State == string(Running) {
				h.finish(ids[i], -1, Completed)
			}
		}
		if rng.IntN(3) == 0 {
			h.c.WorkerDown("w01")
		}
		for try := range 10 {
			id := h.submit(&jobspb.JobSpec{Cpus: int32(1 + rng.IntN(4))})
			j := h.c.jobs[Key{id, -1}]
			fitsNow := false
			for _, w := range h.c.sortedWorkers() {
				fitsNow = fitsNow || h.c.fits(j, w, current)
			}
			if !fitsNow {
				n := need(j.spec)
				want := h.c.reserveByScan(j, n, 1)
				w, at, extra, ok := h.c.soonestWorker(j, n)
				var got *reservation
				if ok {
					got = h.c.reserved(at, map[*worker]capacity{w: extra})
					found++
				}
				if ok && (want == nil || fmt.Sprint(got.at, got.extra) != fmt.Sprint(want.at, want.extra)) ||
					!ok && want != nil && !want.at.IsZero() {
					t.Fatalf("seed %d try %d: the heap reserves %v, the walk %v", seed, try, got, want)
				}
			}
			h.c.Cancel([]Key{{id, -1}})
		}
	}
	if found == 0 {
		t.Fatal("no case had a worker free up by the limits")
	}
}
