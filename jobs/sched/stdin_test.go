package sched

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sent renders what a round sends of an interactive job: "start 1#1" for
// an assignment, "1#1@0:ab" for stdin at offset 0, with "+eof" for its end.
func sent(out []Outbound) string {
	var parts []string
	for _, o := range out {
		switch {
		case o.Msg.GetAssignJob() != nil:
			parts = append(parts, "start "+o.Msg.GetAssignJob().TaskId)
		case o.Msg.GetJobStdin() != nil:
			m := o.Msg.GetJobStdin()
			p := fmt.Sprintf("%s@%d:%s", m.TaskId, m.Offset, m.Data)
			if m.Eof {
				p += "+eof"
			}
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " ")
}

func TestStdinDelivery(t *testing.T) {
	type step struct {
		do   func(h *harness, k Key)
		want string // what the round sends
	}
	in := func(data string, eof bool) func(*harness, Key) {
		return func(h *harness, k Key) {
			if !h.c.Stdin(k, []byte(data), eof) {
				h.t.Fatalf("stdin %q refused", data)
			}
		}
	}
	start := func(h *harness, k Key) { h.worker("w", 4, 1) }
	ack := func(off int64) func(*harness, Key) {
		return func(h *harness, k Key) { h.c.StdinAck("w", h.c.jobs[k].task, off) }
	}
	reconnect := func(h *harness, k Key) {
		h.c.WorkerDown("w")
		h.c.WorkerUp(WorkerInfo{Name: "w", CPUs: 4, Memory: 8 << 30, JobSlots: 1}, holding(h.c.jobs[k].task))
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"held until the job starts, then sent in order after its assignment", []step{
			{in("a\n", false), ""},
			{in("b\n", true), ""},
			{start, "start 1#1 1#1@0:a\nb\n+eof"},
		}},
		{"sent as it comes while the job runs", []step{
			{start, "start 1#1"},
			{in("a", false), "1#1@0:a"},
			{in("b", false), "1#1@1:b"},
			{in("", true), "1#1@2:+eof"},
			{in("late", false), ""},
		}},
		{"what is not acknowledged is sent again after a reconnect, from the same offsets", []step{
			{start, "start 1#1"},
			{in("ab", false), "1#1@0:ab"},
			{in("cd", true), "1#1@2:cd+eof"},
			{ack(2), ""},
			{reconnect, "1#1@2:cd+eof"},
			{ack(4), ""},
			{reconnect, "1#1@4:+eof"},
		}},
		{"an attempt that runs for AttachWait with no client attached gets its stdin closed", []step{
			{start, "start 1#1"},
			{func(h *harness, k Key) { h.advance(AttachWait - time.Second); h.c.Tick() }, ""},
			{func(h *harness, k Key) { h.advance(time.Second); h.c.Tick() }, "1#1@0:+eof"},
		}},
		{"an attached client keeps stdin open past AttachWait", []step{
			{func(h *harness, k Key) { h.c.Attach(k) }, ""},
			{start, "start 1#1"},
			{func(h *harness, k Key) { h.advance(2 * AttachWait); h.c.Tick() }, ""},
			{in("x", false), "1#1@0:x"},
		}},
		{"a client going away closes stdin", []step{
			{func(h *harness, k Key) {
				if err := h.c.Attach(k); err != nil {
					h.t.Fatal(err)
				}
			}, ""},
			{start, "start 1#1"},
			{in("x", false), "1#1@0:x"},
			{func(h *harness, k Key) { h.c.Detach(k) }, "1#1@1:+eof"},
		}},
		{"a later attempt starts with stdin closed", []step{
			{start, "start 1#1"},
			{in("x", false), "1#1@0:x"},
			{func(h *harness, k Key) {
				h.c.Ended("w", &workerpb.JobEnded{TaskId: "1#1", State: string(Failed), ExitCode: 1})
			}, "start 1#2 1#2@0:+eof"},
			{in("y", false), ""},
		}},
		{"an attempt whose stdin the server lost gets it closed when its worker reports", []step{
			{start, "start 1#1"},
			{in("x", false), "1#1@0:x"},
			{func(h *harness, k Key) { h.restart() }, ""},
			{func(h *harness, k Key) {
				h.c.WorkerUp(WorkerInfo{Name: "w", CPUs: 4, Memory: 8 << 30, JobSlots: 1}, holding("1#1"))
			}, "1#1@0:+eof"},
			{in("y", false), ""},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := h.submit(&jobspb.JobSpec{Interactive: true, MaxRetries: 1})
			k := Key{id, -1}
			for i, s := range tc.steps {
				s.do(h, k)
				h.c.Schedule()
				if got := sent(h.commit()); got != s.want {
					t.Fatalf("step %d sent %q, want %q", i, got, s.want)
				}
			}
		})
	}
}

func TestStdinBound(t *testing.T) {
	h := newHarness(t)
	id := h.submit(&jobspb.JobSpec{Interactive: true})
	k := Key{id, -1}
	chunk := bytes.Repeat([]byte("x"), MaxStdinChunk)
	for i := 0; i < MaxStdin/MaxStdinChunk; i++ {
		if !h.c.Stdin(k, chunk, false) {
			t.Fatalf("chunk %d refused with %d bytes held, under the bound", i, i*MaxStdinChunk)
		}
	}
	if h.c.Stdin(k, []byte("y"), false) {
		t.Fatalf("a byte over MaxStdin was taken while the job waits")
	}
	h.worker("w", 4, 1)
	h.c.Schedule()
	if n := strings.Count(sent(h.commit()), "1#1@"); n != MaxStdin/MaxStdinChunk {
		t.Fatalf("sent %d chunks at the start, want %d", n, MaxStdin/MaxStdinChunk)
	}
	if h.c.Stdin(k, []byte("y"), false) {
		t.Fatalf("a byte over MaxStdin was taken before the worker acknowledged any")
	}
	h.c.StdinAck("w", "1#1", 1)
	if !h.c.Stdin(k, []byte("y"), false) {
		t.Fatalf("a byte was refused after the worker acknowledged one")
	}
	if got := sent(h.commit()); got != fmt.Sprintf("1#1@%d:y", MaxStdin) {
		t.Fatalf("sent %q, want the byte at offset %d", got, MaxStdin)
	}
	for _, off := range []int64{0, MaxStdin + 2} { // stale and unsent offsets change nothing
		h.c.StdinAck("w", "1#1", off)
	}
	if got := len(h.c.stdins[k].held); got != MaxStdin {
		t.Fatalf("%d bytes held, want %d", got, MaxStdin)
	}
}

func TestAttach(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec *jobspb.JobSpec
		prep func(h *harness, k Key)
		want codes.Code
	}{
		{"interactive", &jobspb.JobSpec{Interactive: true}, func(*harness, Key) {}, codes.OK},
		{"not interactive", &jobspb.JobSpec{}, func(*harness, Key) {}, codes.FailedPrecondition},
		{"attached already", &jobspb.JobSpec{Interactive: true}, func(h *harness, k Key) { h.c.Attach(k) }, codes.FailedPrecondition},
		{"attached before, and gone", &jobspb.JobSpec{Interactive: true}, func(h *harness, k Key) { h.c.Attach(k); h.c.Detach(k) }, codes.FailedPrecondition},
		{"ended", &jobspb.JobSpec{Interactive: true}, func(h *harness, k Key) { h.c.Cancel([]Key{k}) }, codes.FailedPrecondition},
		{"unknown", &jobspb.JobSpec{Interactive: true}, func(h *harness, k Key) { delete(h.c.jobs, k) }, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			k := Key{h.submit(tc.spec), -1}
			tc.prep(h, k)
			if got := status.Code(h.c.Attach(k)); got != tc.want {
				t.Fatalf("Attach: %v, want %v", got, tc.want)
			}
		})
	}
}
