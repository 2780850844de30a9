package sched

import (
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

func TestRetention(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.Retention = time.Hour
	h.worker("w", 4, 4)
	plain := h.submit(&jobspb.JobSpec{})
	arr := h.submit(&jobspb.JobSpec{Array: &jobspb.ArraySpec{Text: "0-1"}})
	failed := h.submit(&jobspb.JobSpec{})
	h.step()
	h.c.Log("w", h.c.jobs[Key{plain, -1}].task, 0, 0, []byte("output"))
	h.finish(plain, -1, Completed)
	h.finish(arr, 0, Completed)
	h.finish(failed, -1, Failed)
	h.step()
	// A job waiting on the failed one keeps it however old it gets.
	dependent := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: failed, Index: -1}}})
	h.step()

	h.advance(30 * time.Minute)
	h.finish(arr, 1, Completed) // the array's last task ends later
	h.advance(31 * time.Minute)
	h.step()
	if _, err := h.c.Lookup(itoa(plain)); err == nil {
		t.Fatal("a job that ended over an hour ago is still known")
	}
	if out, _, err := text(h.store.Logs(plain, -1, 0, 1<<20)); err != nil || len(out) != 0 {
		t.Fatalf("its output is still stored: %q, %v", out, err)
	}
	if _, err := h.c.Lookup(itoa(arr)); err != nil {
		t.Fatalf("an array whose last task ended 31 minutes ago was forgotten: %v", err)
	}
	if _, err := h.c.Lookup(itoa(failed)); err != nil {
		t.Fatalf("a job a waiting job depends on was forgotten: %v", err)
	}
	if r := h.rec(dependent, -1); r.PendingReason != ReasonDependencyNeverSatisfied {
		t.Fatalf("dependent: %s", r.PendingReason)
	}

	// Restarted, the server still knows when the array ended.
	h.restart()
	h.advance(30 * time.Minute)
	h.step()
	if _, err := h.c.Lookup(itoa(arr)); err == nil {
		t.Fatal("the array outlived its retention across a restart")
	}

	// Once nothing waits on it, the failed job goes a retention later.
	h.c.Cancel([]Key{{dependent, -1}})
	h.step()
	h.advance(61 * time.Minute)
	h.step()
	for _, id := range []int64{failed, dependent} {
		if _, err := h.c.Lookup(itoa(id)); err == nil {
			t.Fatalf("job %d outlived its retention", id)
		}
	}
	h.restart()
	if len(h.c.jobs) != 0 {
		t.Fatalf("the store still holds %d jobs", len(h.c.jobs))
	}
	if next, _ := h.c.Submit(typed(t, &jobspb.JobSpec{Command: []string{"x"}})); next != dependent+1 {
		t.Fatalf("next id %d after forgetting; ids must not be reused", next)
	}
}

func TestNoRetentionKeepsJobs(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 1, 1)
	id := h.submit(&jobspb.JobSpec{})
	h.step()
	h.finish(id, -1, Completed)
	h.advance(10 * 365 * 24 * time.Hour)
	h.step()
	if _, err := h.c.Lookup(itoa(id)); err != nil {
		t.Fatalf("without a retention a job was forgotten: %v", err)
	}
}

func itoa(id int64) string { return Key{id, -1}.String() }
