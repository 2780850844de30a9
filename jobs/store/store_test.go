package store

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

func TestCommitLoadAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	batch := &Batch{
		Specs: map[int64]*jobspb.JobSpec{1: {Name: "a"}, 2: {Name: "arr", Array: &jobspb.ArraySpec{Text: "0-1"}}},
		Jobs: []*jobspb.JobRecord{
			{Id: 1, Index: -1, State: "PENDING"},
			{Id: 2, Index: 0, State: "RUNNING"},
			{Id: 2, Index: 1, State: "PENDING"},
		},
		Logs:   []LogChunk{{ID: 1, Index: -1, Data: []byte("hello ")}, {ID: 2, Index: 0, Data: []byte("other")}},
		NextID: 3,
	}
	if err := s.Commit(batch); err != nil {
		t.Fatal(err)
	}
	// An update replaces the record; the spec stays as first stored.
	if err := s.Commit(&Batch{Jobs: []*jobspb.JobRecord{{Id: 1, Index: -1, State: "COMPLETED"}},
		Logs: []LogChunk{{ID: 1, Index: -1, Data: []byte("world")}}}); err != nil {
		t.Fatal(err)
	}
	// A record that carries its spec is refused.
	if err := s.Commit(&Batch{Jobs: []*jobspb.JobRecord{{Id: 1, Index: -1, State: "COMPLETED", Spec: &jobspb.JobSpec{}}}}); err == nil {
		t.Fatal("a record with its spec was stored")
	}
	s.Close()

	s, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	jobs := st.Jobs
	if st.NextID != 3 || len(jobs) != 3 || jobs[0].State != "COMPLETED" || jobs[0].Spec != nil || jobs[2].Index != 1 ||
		st.Specs[1].GetName() != "a" || st.Specs[2].GetArray().GetText() != "0-1" || len(st.Specs) != 2 {
		t.Fatalf("Load = %v, specs %v, next %d", jobs, st.Specs, st.NextID)
	}
	out, last, err := text(s.Logs(1, -1, 0, 1<<20))
	if err != nil || string(out) != "hello world" {
		t.Fatalf("Logs = %q, %v", out, err)
	}
	first, at, err := text(s.Logs(1, -1, 0, 1))
	if err != nil || len(first) == 0 || len(first) == len(out) {
		t.Fatalf("Logs with max 1 = %q, %v; want the first piece only", first, err)
	}
	rest, _, err := text(s.Logs(1, -1, at, 1<<20))
	if err != nil || string(first)+string(rest) != "hello world" {
		t.Fatalf("Logs in parts = %q + %q, %v", first, rest, err)
	}
	more, _, err := text(s.Logs(1, -1, last, 1<<20))
	if err != nil || len(more) != 0 {
		t.Fatalf("Logs after %d = %q, %v", last, more, err)
	}
}

// Records written when each carried its own spec load with the spec moved
// to the specs table, where it stays once the records are rewritten.
func TestLoadMovesSpecsOutOfRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*jobspb.JobRecord{
		{Id: 4, Index: 0, State: "PENDING", Spec: &jobspb.JobSpec{Name: "old"}},
		{Id: 4, Index: 1, State: "PENDING", Spec: &jobspb.JobSpec{Name: "old"}},
	} {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.db.Exec(`INSERT INTO jobs (id, idx, state, record) VALUES (?, ?, ?, ?)`, r.Id, r.Index, r.State, b); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 2 || st.Jobs[0].Spec != nil || st.Specs[4].GetName() != "old" {
		t.Fatalf("Load = %v, specs %v", st.Jobs, st.Specs)
	}
	if err := s.Commit(&Batch{Jobs: []*jobspb.JobRecord{{Id: 4, Index: 0, State: "COMPLETED"}, {Id: 4, Index: 1, State: "COMPLETED"}}}); err != nil {
		t.Fatal(err)
	}
	st, err = s.Load()
	if err != nil || st.Specs[4].GetName() != "old" || st.Jobs[0].State != "COMPLETED" {
		t.Fatalf("after rewriting the records: %v, %v", st, err)
	}
	s.Close()
}

// A record whose spec is missing is an error, not a job without a command.
func TestLoadRejectsRecordWithoutSpec(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Commit(&Batch{Jobs: []*jobspb.JobRecord{{Id: 9, Index: -1, State: "PENDING"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(); err == nil || !strings.Contains(err.Error(), "job 9 has no spec") {
		t.Fatalf("Load = %v, want an error naming job 9", err)
	}
}

func TestEmptyStore(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil || len(st.Jobs) != 0 || len(st.Specs) != 0 || st.NextID != 1 {
		t.Fatalf("Load = %v, %v", st, err)
	}
	if err := s.Commit(&Batch{}); err != nil {
		t.Fatal(err)
	}
}

// Two rounds merged commit as the two would have one after the other.
func TestMergedBatches(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := &Batch{
		Specs:  map[int64]*jobspb.JobSpec{1: {Name: "a"}},
		Jobs:   []*jobspb.JobRecord{{Id: 1, Index: -1, State: "PENDING"}},
		Logs:   []LogChunk{{ID: 1, Index: -1, Data: []byte("one ")}},
		NextID: 2,
	}
	first.Merge(&Batch{
		Specs:  map[int64]*jobspb.JobSpec{2: {Name: "b"}},
		Jobs:   []*jobspb.JobRecord{{Id: 1, Index: -1, State: "COMPLETED"}, {Id: 2, Index: -1, State: "PENDING"}},
		Logs:   []LogChunk{{ID: 1, Index: -1, Data: []byte("two")}},
		NextID: 3,
	})
	(&Batch{}).Merge(&Batch{Specs: map[int64]*jobspb.JobSpec{9: {}}}) // a nil map takes specs too
	if err := s.Commit(first); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	states := map[int64]string{}
	for _, j := range st.Jobs {
		states[j.Id] = j.State
	}
	if states[1] != "COMPLETED" || states[2] != "PENDING" || st.NextID != 3 || len(st.Specs) != 2 {
		t.Fatalf("after a merged commit: states %v, next id %d, %d specs", states, st.NextID, len(st.Specs))
	}
}

func TestIsFull(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{coded(13), true},
		{coded(13 | 3<<8), true}, // an extended SQLITE_FULL code
		{coded(10), false},
		{fmt.Errorf("writing: %w", syscall.ENOSPC), true},
		{errors.New("database is locked"), false},
	}
	for _, tt := range tests {
		if got := IsFull(tt.err); got != tt.want {
			t.Errorf("IsFull(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

type coded int

func (c coded) Error() string { return fmt.Sprintf("sqlite error %d", int(c)) }
func (c coded) Code() int     { return int(c) }

// Directories whose names hold URI characters keep databases of their own.
func TestOpenEscapesThePath(t *testing.T) {
	base := t.TempDir()
	for i, name := range []string{"a#1", "a#2", "b?x=1", "c%20d"} {
		dir := base + "/" + name
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(&Batch{NextID: int64(i + 10)}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := os.Stat(dir + "/jobs.db"); err != nil {
			t.Fatalf("%s: no jobs.db of its own: %v", name, err)
		}
	}
	s, err := Open(base + "/a#1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err := s.Load(); err != nil || st.NextID != 10 {
		t.Fatalf("a#1 reads next id %v, %v; want its own 10", st, err)
	}
}

// text is the output Logs read, joined.
func text(cs []LogChunk, last int64, err error) (string, int64, error) {
	var b []byte
	for _, c := range cs {
		b = append(b, c.Data...)
	}
	return string(b), last, err
}
