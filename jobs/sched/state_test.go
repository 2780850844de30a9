package sched

import "testing"

// TestTransitions checks every pair of states against the table.
func TestTransitions(t *testing.T) {
	legal := map[[2]State]bool{}
	for _, to := range []State{Running, Cancelled, Completed} { // COMPLETED: from the job cache
		legal[[2]State{Pending, to}] = true
	}
	for _, to := range []State{Completed, Failed, Cancelled, Timeout, NodeFail, OutOfMemory, Preempted, Pending} {
		legal[[2]State{Running, to}] = true
	}
	for _, from := range States {
		for _, to := range States {
			if got := CanMove(from, to); got != legal[[2]State{from, to}] {
				t.Errorf("CanMove(%s, %s) = %v", from, to, got)
			}
		}
		if from.Terminal() != (from != Pending && from != Running) {
			t.Errorf("%s.Terminal() = %v", from, from.Terminal())
		}
		if !from.Valid() {
			t.Errorf("%s is not Valid", from)
		}
	}
	if State("BOGUS").Valid() {
		t.Error("BOGUS is Valid")
	}
}
