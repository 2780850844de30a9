package store

import (
	"testing"

	"github.com/rbs-build/rbs/proto/jobspb"
)

func TestCommitLoadAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	batch := &Batch{
		Jobs: []*jobspb.JobRecord{
			{Id: 1, Index: -1, State: "PENDING", Spec: &jobspb.JobSpec{Name: "a"}},
			{Id: 2, Index: 0, State: "RUNNING"},
			{Id: 2, Index: 1, State: "PENDING"},
		},
		Logs:   []LogChunk{{ID: 1, Index: -1, Data: []byte("hello ")}, {ID: 2, Index: 0, Data: []byte("other")}},
		NextID: 3,
	}
	if err := s.Commit(batch); err != nil {
		t.Fatal(err)
	}
	// An update replaces the record.
	if err := s.Commit(&Batch{Jobs: []*jobspb.JobRecord{{Id: 1, Index: -1, State: "COMPLETED", Spec: &jobspb.JobSpec{Name: "a"}}},
		Logs: []LogChunk{{ID: 1, Index: -1, Data: []byte("world")}}}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs, next, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if next != 3 || len(jobs) != 3 || jobs[0].State != "COMPLETED" || jobs[0].Spec.Name != "a" || jobs[2].Index != 1 {
		t.Fatalf("Load = %v, next %d", jobs, next)
	}
	out, last, err := s.Logs(1, -1, 0, 1<<20)
	if err != nil || string(out) != "hello world" {
		t.Fatalf("Logs = %q, %v", out, err)
	}
	first, at, err := s.Logs(1, -1, 0, 1)
	if err != nil || len(first) == 0 || len(first) == len(out) {
		t.Fatalf("Logs with max 1 = %q, %v; want the first piece only", first, err)
	}
	rest, _, err := s.Logs(1, -1, at, 1<<20)
	if err != nil || string(first)+string(rest) != "hello world" {
		t.Fatalf("Logs in parts = %q + %q, %v", first, rest, err)
	}
	more, _, err := s.Logs(1, -1, last, 1<<20)
	if err != nil || len(more) != 0 {
		t.Fatalf("Logs after %d = %q, %v", last, more, err)
	}
}

func TestEmptyStore(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs, next, err := s.Load()
	if err != nil || len(jobs) != 0 || next != 1 {
		t.Fatalf("Load = %v, %d, %v", jobs, next, err)
	}
	if err := s.Commit(&Batch{}); err != nil {
		t.Fatal(err)
	}
}
