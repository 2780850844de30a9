package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// FuzzSubmit feeds any bytes as the job manifest of a submission, the
// request every job reaches the scheduler as, through the API edge's
// decoding and validation to the scheduler. It checks that nothing panics,
// that a refusal is INVALID_ARGUMENT, and that an accepted job is
// scheduled on a worker, stored, and read back as it was described.
// `go test` runs its seeds; `go test -fuzz FuzzSubmit ./jobs/sched`
// explores further.
func FuzzSubmit(f *testing.F) {
	for _, m := range []string{
		`{"version": 1, "name": "echo", "command": ["echo", "hi"], "cpus": 1, "nodes": 1}`,
		`{"version": 1, "command": ["true"], "cpus": 2, "memory_bytes": 1073741824, "gpus": 1, "time_limit_ms": 60000, "env": {"A": "b"}, "nodes": 1}`,
		`{"version": 1, "script": "#!/bin/sh\necho hi\n", "array": "0-3%2", "cpus": 1, "nodes": 1}`,
		`{"version": 1, "command": ["x"], "array": "0-1e9", "cpus": 1, "nodes": 1}`,
		`{"version": 1, "command": ["x"], "queue": "nope", "cpus": 1, "nodes": 1}`,
		`{"version": 1, "command": ["x"], "cpus": -1, "nodes": 1}`,
		`{"version": 1, "command": ["x"], "cpus": 1, "nodes": 1, "after": [{"kind": "afterok", "job": "1"}]}`,
		`{"version": 1, "command": ["x"], "cpus": 1, "nodes": 1, "after": [{"kind": "whenever", "job": "1"}]}`,
		`{"version": 1, "command": ["x"], "cpus": 1, "nodes": 1, "after": [{"kind": "afterok", "entry": 1}]}`,
		`{"version": 1, "command": ["a\u0000b"], "cpus": 1, "nodes": 1}`,
		`{"version": 1, "command": ["x"], "env": {"A=B": "c"}, "cpus": 1, "nodes": 1}`,
		`{"version": 1, "command": ["x"], "cpus": 1, "nodes": 1, "platform": "linux-aarch64", "interactive": true}`,
		`{"version": 2}`,
		`{}`,
	} {
		f.Add([]byte(m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h := newHarness(t)
		h.worker("w", 4, 4, 0, 1)
		first := h.submit(&jobspb.JobSpec{Command: []string{"true"}}) // a job to depend on
		h.step()
		m, err := manifest.Decode(b)
		var j *manifest.Job
		if err == nil {
			j, err = m.Job(1)
		}
		if err != nil {
			return
		}
		id, err := h.c.Submit(j)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("refused with %v, want INVALID_ARGUMENT", err)
			}
			return
		}
		for _, a := range j.Spec.Command {
			if strings.ContainsRune(a, 0) {
				t.Fatalf("accepted the argument %q, which no program can be given", a)
			}
		}
		if id == first {
			t.Fatalf("job id %d handed out twice", id)
		}
		keys, err := h.c.Lookup(fmt.Sprint(id))
		if err != nil || len(keys) == 0 {
			t.Fatalf("accepted job %d cannot be looked up: %v", id, err)
		}
		h.step()
		before := h.c.Infos(keys, true)
		h.restart()
		after := h.c.Infos(keys, true)
		if len(before) != len(after) {
			t.Fatalf("%d tasks before a restart, %d after", len(before), len(after))
		}
		for i := range before {
			// Where it could run depends on the workers, which have yet
			// to reconnect.
			before[i].Placement, after[i].Placement = nil, nil
			before[i].StartUnknown, after[i].StartUnknown = "", ""
			if !proto.Equal(before[i], after[i]) {
				t.Fatalf("task %s before a restart:\n%v\nafter:\n%v", before[i].Id, before[i], after[i])
			}
		}
	})
}
