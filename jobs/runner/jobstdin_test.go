package runner

import (
	"context"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
)

func TestJobStdin(t *testing.T) {
	in := func(off int64, data string, eof bool) *workerpb.JobStdin {
		return &workerpb.JobStdin{TaskId: "1#1", Offset: off, Data: []byte(data), Eof: eof}
	}
	for _, tc := range []struct {
		name        string
		interactive bool
		msgs        []*workerpb.JobStdin
		want        string
		acked       int64 // the last offset acknowledged
	}{
		{"in order", true, []*workerpb.JobStdin{in(0, "a\n", false), in(2, "b\n", false), in(4, "", true)}, "got a\ngot b\neof\n", 4},
		{"eof with the last chunk", true, []*workerpb.JobStdin{in(0, "a\nb\n", true)}, "got a\ngot b\neof\n", 4},
		{"chunks sent again are written once", true, []*workerpb.JobStdin{
			in(0, "a\n", false), in(0, "a\n", false), in(1, "\nb\n", false), in(2, "b\n", true), in(2, "b\n", true),
		}, "got a\ngot b\neof\n", 4},
		{"a gap closes stdin", true, []*workerpb.JobStdin{in(0, "a\n", false), in(4, "c\n", false), in(2, "b\n", true)}, "got a\neof\n", 6},
		{"not interactive: end of file at once", false, nil, "eof\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newJobRig(t)
			a := &workerpb.AssignJob{TaskId: "1#1", Interactive: tc.interactive,
				Command: []string{"/bin/sh", "-c", "while read l; do echo got $l; done; echo eof"}}
			if tc.interactive {
				r.rn.QueueStdin(a.TaskId)
			}
			// Queued before the job runs, as messages that follow the
			// assignment on the stream are.
			for _, m := range tc.msgs {
				r.rn.Stdin(m)
			}
			end := r.rn.Run(context.Background(), a)
			if end.State != "COMPLETED" {
				t.Fatalf("job ended %s: %s", end.State, end.Message)
			}
			var out []byte
			var acked int64
			for len(r.outbox) > 0 {
				m := <-r.outbox
				out = append(out, m.GetJobLog().GetData()...)
				if a := m.GetJobStdinAck(); a != nil {
					acked = a.Offset
				}
			}
			if string(out) != tc.want || acked != tc.acked {
				t.Fatalf("job wrote %q with stdin acknowledged to %d, want %q and %d", out, acked, tc.want, tc.acked)
			}
		})
	}
}
