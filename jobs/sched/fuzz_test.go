package sched

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// FuzzSubmit feeds the scheduler any bytes as the JobSpec of a submission,
// the request every job reaches the scheduler as. It checks that nothing
// panics, that a refusal is INVALID_ARGUMENT, and that an accepted job is
// scheduled on a worker, stored, and read back as it was described.
// `go test` runs its seeds; `go test -fuzz FuzzSubmit ./jobs/sched`
// explores further.
func FuzzSubmit(f *testing.F) {
	for _, s := range []*jobspb.JobSpec{
		{Command: []string{"echo", "hi"}},
		{Command: []string{"true"}, Cpus: 2, MemoryBytes: 1 << 30, Gpus: 1, TimeLimitMs: 60_000, Env: map[string]string{"A": "b"}},
		{Script: "#!/bin/sh\necho hi\n", Array: &jobspb.ArraySpec{Text: "0-3%2"}},
		{Command: []string{"x"}, Array: &jobspb.ArraySpec{Text: "0-1e9"}},
		{Command: []string{"x"}, Queue: "nope"},
		{Command: []string{"x"}, Cpus: -1},
		{Command: []string{"x"}, Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: 1, Index: -1}}},
		{Command: []string{"x"}, Deps: []*jobspb.Dependency{{Kind: "whenever", JobId: 1, Index: -1}}},
		{Command: []string{"a\x00b"}},
		{Command: []string{"x"}, Env: map[string]string{"A=B": "c"}},
		{},
	} {
		b, _ := proto.Marshal(s)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &jobspb.JobSpec{}
		if proto.Unmarshal(b, s) != nil {
			return
		}
		h := newHarness(t)
		h.worker("w", 4, 4, 0, 1)
		first := h.submit(&jobspb.JobSpec{Command: []string{"true"}}) // a job to depend on
		h.step()
		id, err := h.c.Submit(s)
		if err != nil {
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("refused with %v, want INVALID_ARGUMENT", err)
			}
			return
		}
		for _, a := range s.Command {
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
			if !proto.Equal(before[i], after[i]) {
				t.Fatalf("task %s before a restart:\n%v\nafter:\n%v", before[i].Id, before[i], after[i])
			}
		}
	})
}
