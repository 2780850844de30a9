package sched

import (
	"slices"
	"testing"

	"github.com/rbs-build/rbs/jobs/memo"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// cachedSpec is a job spec with the cache on, keyed as the API edge keys
// it.
func cachedSpec(cmd string, deps ...int64) *jobspb.JobSpec {
	s := &jobspb.JobSpec{Command: []string{cmd}, Cache: jobspb.CachePolicy_CACHE_ON, Outputs: []string{"out"}}
	s.CacheKey = memo.Spec(s, "")
	for _, d := range deps {
		s.Deps = append(s.Deps, &jobspb.Dependency{Kind: "afterok", JobId: d, Index: -1})
	}
	return s
}

// run schedules, and completes with output root root, every job the round
// starts; it returns the assignments by job id.
func (h *harness) runAll(roots map[string]string) map[string]*workerpb.AssignJob {
	h.t.Helper()
	got := map[string]*workerpb.AssignJob{}
	for {
		h.c.Tick()
		h.c.Schedule()
		var started []*workerpb.AssignJob
		for _, o := range h.commit() {
			if a := o.Msg.GetAssignJob(); a != nil {
				started = append(started, a)
			}
		}
		h.answerChecks(true)
		if len(started) == 0 && len(h.c.resolving) == 0 {
			return got
		}
		for _, a := range started {
			got[a.JobId] = a
			j := h.c.byTask[a.TaskId]
			h.c.Ended(j.rec.Worker, &workerpb.JobEnded{TaskId: a.TaskId, State: string(Completed), OutputRoot: roots[a.JobId]})
		}
	}
}

// answerChecks answers the cache checks asked so far.
func (h *harness) answerChecks(present bool) int {
	n := 0
	for _, chk := range h.c.CacheChecks() {
		h.c.CacheChecked(chk, present)
		n++
	}
	return n
}

func TestJobCache(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 4, 4)
	a := h.submit(cachedSpec("prep"))
	h.submit(cachedSpec("train", a))
	first := h.runAll(map[string]string{"1": "aa/1", "2": "bb/2"})
	if len(first) != 2 {
		t.Fatalf("first run started %v, want jobs 1 and 2", first)
	}
	if up := first["2"].Upstream; len(up) != 1 || up[0].JobId != "1" || up[0].OutputRoot != "aa/1" {
		t.Fatalf("job 2 got upstream %v, want job 1's output aa/1", up)
	}

	// The same pipeline again is answered from the cache, job after job.
	a2 := h.submit(cachedSpec("prep"))
	b2 := h.submit(cachedSpec("train", a2))
	if !h.c.Settling([]int64{a2, b2}) {
		t.Fatal("a pipeline waiting on cache checks is not settling")
	}
	if again := h.runAll(nil); len(again) != 0 {
		t.Fatalf("an unchanged pipeline ran %v", again)
	}
	for _, c := range []struct {
		id   int64
		from string
		root string
	}{{a2, "1", "aa/1"}, {b2, "2", "bb/2"}} {
		r := h.rec(c.id, -1)
		if r.State != string(Completed) || r.CachedFrom != c.from || r.OutputRoot != c.root {
			t.Errorf("job %d: %s from %q root %q; want COMPLETED from %s with %s", c.id, r.State, r.CachedFrom, r.OutputRoot, c.from, c.root)
		}
	}
	if h.c.Settling([]int64{a2, b2}) {
		t.Fatal("an answered pipeline is still settling")
	}
	if n, from := h.c.CachedTasks(b2); n != 1 || from != "2" {
		t.Fatalf("CachedTasks(%d) = %d, %q", b2, n, from)
	}

	// A changed last stage runs, with the first stage's cached output.
	a3 := h.submit(cachedSpec("prep"))
	h.submit(cachedSpec("train --epochs 2", a3))
	third := h.runAll(map[string]string{"6": "cc/3"})
	if len(third) != 1 || third["6"] == nil || third["6"].Upstream[0].OutputRoot != "aa/1" {
		t.Fatalf("after changing the last stage, ran %v; want job 6 alone, after job 1's output", third)
	}

	// An entry whose outputs the CAS lost is a miss: the job runs, and its
	// result becomes the entry.
	a4 := h.submit(cachedSpec("prep"))
	h.c.Schedule()
	h.commit()
	if n := h.answerChecks(false); n != 1 {
		t.Fatalf("%d checks asked, want 1", n)
	}
	if ran := h.runAll(map[string]string{"7": "dd/4"}); ran["7"] == nil {
		t.Fatalf("job %d, whose entry lost its outputs, did not run: %v", a4, ran)
	}
	if r := h.rec(a4, -1); r.CachedFrom != "" || r.OutputRoot != "dd/4" {
		t.Fatalf("job %d: cached from %q, root %q", a4, r.CachedFrom, r.OutputRoot)
	}

	// Refresh runs whatever the cache holds, and replaces the entry.
	s := cachedSpec("prep")
	s.Cache = jobspb.CachePolicy_CACHE_REFRESH
	h.submit(s)
	if ran := h.runAll(map[string]string{"8": "ee/5"}); ran["8"] == nil {
		t.Fatalf("a refresh did not run: %v", ran)
	}
	h.restart()
	h.worker("w", 4, 4)
	a5 := h.submit(cachedSpec("prep"))
	h.runAll(nil)
	if r := h.rec(a5, -1); r.CachedFrom != "8" {
		t.Fatalf("after a refresh and a restart, job %d was cached from %q, want 8", a5, r.CachedFrom)
	}

	// Only COMPLETED jobs are remembered; a job with the cache off is
	// neither answered nor remembered.
	off := cachedSpec("prep")
	off.Cache = jobspb.CachePolicy_CACHE_OFF
	h.submit(off)
	if ran := h.runAll(nil); len(ran) != 1 {
		t.Fatalf("a job with the cache off ran %v, want it alone", ran)
	}
	f := h.submit(cachedSpec("flaky"))
	h.c.Schedule()
	h.commit()
	h.finish(f, -1, Failed)
	f2 := h.submit(cachedSpec("flaky"))
	if ran := h.runAll(nil); ran[Key{f2, -1}.String()] == nil {
		t.Fatalf("job %d, whose key only a FAILED job had, did not run: %v", f2, ran)
	}
}

// A check lost with the server that asked for it is asked again by the
// next.
func TestJobCacheCheckAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 4, 4)
	h.submit(cachedSpec("prep"))
	h.runAll(map[string]string{"1": "aa/1"})
	id := h.submit(cachedSpec("prep"))
	h.c.Schedule()
	h.commit()
	if r := h.rec(id, -1); r.PendingReason != ReasonCacheCheck {
		t.Fatalf("job %d waits for %q, want %s", id, r.PendingReason, ReasonCacheCheck)
	}
	h.restart()
	h.runAll(nil)
	if r := h.rec(id, -1); r.CachedFrom != "1" {
		t.Fatalf("after a restart, job %d: %s cached from %q", id, r.State, r.CachedFrom)
	}
}

// A sweep's tasks get their values, and a sweep extended by one value is
// answered from the cache for the values it had.
func TestSweepCache(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 8, 8)
	sweep := func(lrs ...string) *jobspb.JobSpec {
		s := &jobspb.JobSpec{Command: []string{"train", "--lr={lr}", "--batch={batch}"}, Cache: jobspb.CachePolicy_CACHE_ON,
			Sweep: []*jobspb.SweepParam{{Name: "lr", Values: lrs}, {Name: "batch", Values: []string{"32", "64"}}}}
		s.CacheKey = memo.Spec(s, "")
		s.Array = &jobspb.ArraySpec{Text: "0-" + string(rune('0'+2*len(lrs)-1))}
		return s
	}
	h.submit(sweep("0.1", "0.01"))
	first := h.runAll(nil)
	a := first["1_3"]
	if a == nil || a.Env["RBS_SWEEP_LR"] != "0.01" || a.Env["RBS_SWEEP_BATCH"] != "64" || !slices.Equal(a.Command, []string{"train", "--lr=0.01", "--batch=64"}) {
		t.Fatalf("task 1_3 got %v", a)
	}
	id := h.submit(sweep("0.1", "0.01", "0.001"))
	ran := h.runAll(nil)
	if len(ran) != 2 || ran["2_4"] == nil || ran["2_5"] == nil || ran["2_4"].Env["RBS_SWEEP_LR"] != "0.001" {
		t.Fatalf("a sweep grown by lr=0.001 ran %v, want tasks 2_4 and 2_5 alone", ran)
	}
	if n, _ := h.c.CachedTasks(id); n != 4 {
		t.Fatalf("%d tasks of the grown sweep were cached, want 4", n)
	}
}
