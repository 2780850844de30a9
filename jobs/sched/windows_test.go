package sched

import (
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMaintenanceWindows(t *testing.T) {
	h := newHarness(t)
	h.worker("a", 1, 1)
	window := func(name string, in, length time.Duration, workers ...string) *jobspb.Reservation {
		start := h.now.Add(in)
		return &jobspb.Reservation{Name: name, StartUnixMs: start.UnixMilli(), EndUnixMs: start.Add(length).UnixMilli(), Reason: "kernel upgrade", Workers: workers}
	}
	if err := h.c.Reserve(window("soon", time.Hour, time.Hour, "a")); err != nil {
		t.Fatal(err)
	}
	// Before the window: a job whose limit ends before it starts; others
	// wait, for the reservation.
	long := h.submit(&jobspb.JobSpec{TimeLimitMs: (2 * time.Hour).Milliseconds()})
	unlimited := h.submit(&jobspb.JobSpec{})
	short := h.submit(&jobspb.JobSpec{TimeLimitMs: (30 * time.Minute).Milliseconds()})
	if got := h.step(); len(got) != 1 || !strings.HasPrefix(got[0], strings.Split(Key{short, -1}.String(), "_")[0]+"@") {
		t.Fatalf("started %v, want only the 30-minute job", got)
	}
	for _, id := range []int64{long, unlimited} {
		if r := h.rec(id, -1).PendingReason; r != ReasonReservation {
			t.Fatalf("job %d waits for %q, want Reservation", id, r)
		}
	}
	h.finish(short, -1, Completed)
	h.step()
	if p := h.c.explain(h.c.jobs[Key{long, -1}]); len(p) != 1 || !strings.Contains(p[0], "reserved for maintenance soon (kernel upgrade) from 2026-01-01T01:00:00Z, before the job's time limit is up") {
		t.Fatalf("placement %v", p)
	}

	// Durable: a restarted Core has it, and it holds the worker through
	// the window, then lets the jobs start once it is over.
	h.restart()
	h.worker("a", 1, 1)
	if ws := h.c.Windows(); len(ws) != 1 || ws[0].Name != "soon" || ws[0].Reason != "kernel upgrade" {
		t.Fatalf("windows after a restart: %v", ws)
	}
	h.advance(90 * time.Minute)
	if got := h.step(); len(got) != 0 {
		t.Fatalf("started %v inside the window", got)
	}
	if p := h.c.explain(h.c.jobs[Key{long, -1}]); !strings.Contains(p[0], "reserved for maintenance soon (kernel upgrade) until 2026-01-01T02:00:00Z") {
		t.Fatalf("placement in the window: %v", p)
	}
	h.advance(31 * time.Minute)
	if got := h.step(); len(got) != 1 {
		t.Fatalf("started %v after the window, want the next job", got)
	}
	if ws := h.c.Windows(); len(ws) != 0 {
		t.Fatalf("the window is kept after its end: %v", ws)
	}
	h.restart()
	if ws := h.c.Windows(); len(ws) != 0 {
		t.Fatalf("the window came back after a restart: %v", ws)
	}

	// Only the workers named are held.
	h.worker("a", 1, 1)
	h.worker("b", 1, 1)
	if err := h.c.Reserve(window("a-only", 0, time.Hour, "a")); err != nil {
		t.Fatal(err)
	}
	other := h.submit(&jobspb.JobSpec{})
	h.step()
	if r := h.rec(other, -1); r.State == string(Running) && r.Worker == "a" {
		t.Fatalf("a job started on a, which is in maintenance")
	}
	if err := h.c.Unreserve("a-only"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		r    *jobspb.Reservation
		code codes.Code
		want string
	}{
		{window("bad name!", 0, time.Hour), codes.InvalidArgument, `reservation name "bad name!"`},
		{window("x", time.Hour, -time.Minute), codes.InvalidArgument, "ends before it starts"},
		{window("x", -2*time.Hour, time.Hour), codes.InvalidArgument, "would be over already"},
		{window("x", 0, 2*MaxWindow), codes.InvalidArgument, "within a year"},
		{window("x", 0, time.Hour, "a", "nowhere"), codes.InvalidArgument, "no worker named nowhere (workers: a, b)"},
	} {
		if err := h.c.Reserve(tc.r); status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Reserve(%v) = %v, want %v %q", tc.r, err, tc.code, tc.want)
		}
	}
	if err := h.c.Reserve(window("twice", 0, time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Reserve(window("twice", 0, time.Hour)); status.Code(err) != codes.AlreadyExists {
		t.Errorf("a second window of the same name: %v", err)
	}
	if err := h.c.Unreserve("never"); status.Code(err) != codes.NotFound {
		t.Errorf("removing an unknown window: %v", err)
	}
}
