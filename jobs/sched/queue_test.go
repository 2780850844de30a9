package sched

import (
	"fmt"
	"testing"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// TestParkedJobs checks that jobs parked on their dependencies or their
// array's cap come back when they may start, and only then: down a chain
// whose head failed, each finds it can never start; an array's tasks wait
// for a job and then for the cap, in index order, past a task cancelled
// while parked.
func TestParkedJobs(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 8, 8)
	head := h.submit(&jobspb.JobSpec{})
	afterok := func(id int64) []*jobspb.Dependency {
		return []*jobspb.Dependency{{Kind: "afterok", JobId: id, Index: -1}}
	}
	b := h.submit(&jobspb.JobSpec{Deps: afterok(head)})
	c := h.submit(&jobspb.JobSpec{Deps: afterok(b)})
	gate := h.submit(&jobspb.JobSpec{})
	tasks := h.submit(&jobspb.JobSpec{Array: &jobspb.ArraySpec{Text: "0-4%2"}, Deps: afterok(gate)})
	if got := h.step(); fmt.Sprint(got) != fmt.Sprintf("[%d@w %d@w]", head, gate) {
		t.Fatalf("started %v, want the head and the gate", got)
	}
	for _, k := range []Key{{b, -1}, {c, -1}, {tasks, 0}, {tasks, 4}} {
		if r := h.rec(k.ID, k.Index).PendingReason; r != ReasonDependency {
			t.Fatalf("job %s waits for %q, want Dependency", k, r)
		}
	}

	// The head fails: no round needs anything else to happen for the
	// chain to learn it can never start.
	h.finish(head, -1, Failed)
	for range 2 {
		h.c.Schedule()
		h.commit()
	}
	for _, id := range []int64{b, c} {
		if r := h.rec(id, -1).PendingReason; r != ReasonDependencyNeverSatisfied {
			t.Fatalf("job %d waits for %q after the head failed, want DependencyNeverSatisfied", id, r)
		}
	}

	h.finish(gate, -1, Completed)
	if got := h.step(); fmt.Sprint(got) != fmt.Sprintf("[%d_0@w %d_1@w]", tasks, tasks) {
		t.Fatalf("started %v once the gate completed, want tasks 0 and 1", got)
	}
	if r := h.rec(tasks, 2).PendingReason; r != ReasonArrayTaskLimit {
		t.Fatalf("task 2 waits for %q, want ArrayTaskLimit", r)
	}
	h.c.Cancel([]Key{{tasks, 2}})
	h.finish(tasks, 0, Completed)
	if got := h.step(); fmt.Sprint(got) != fmt.Sprintf("[%d_3@w]", tasks) {
		t.Fatalf("started %v after task 0 ended, want task 3 (2 was cancelled)", got)
	}
	h.finish(tasks, 1, Completed)
	h.finish(tasks, 3, Completed)
	if got := h.step(); fmt.Sprint(got) != fmt.Sprintf("[%d_4@w]", tasks) {
		t.Fatalf("started %v, want the last task", got)
	}
}
