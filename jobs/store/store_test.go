package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/rbs-build/rbs/jobs/store/pgtest"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

func TestCommitLoadAndReopen(t *testing.T) { forEachBackend(t, testCommitLoadAndReopen) }

func testCommitLoadAndReopen(t *testing.T, open func() (*Store, error)) {
	s, err := open()
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

	s, err = open()
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
func TestLoadMovesSpecsOutOfRecords(t *testing.T) { forEachBackend(t, testLoadMovesSpecsOutOfRecords) }

func testLoadMovesSpecsOutOfRecords(t *testing.T, open func() (*Store, error)) {
	s, err := open()
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
		if _, err := s.db.Exec(s.rebind(`INSERT INTO jobs (id, idx, state, record) VALUES (?, ?, ?, ?)`), r.Id, r.Index, r.State, b); err != nil {
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
	forEachBackend(t, testLoadRejectsRecordWithoutSpec)
}

func testLoadRejectsRecordWithoutSpec(t *testing.T, open func() (*Store, error)) {
	s, err := open()
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

func TestEmptyStore(t *testing.T) { forEachBackend(t, testEmptyStore) }

func testEmptyStore(t *testing.T, open func() (*Store, error)) {
	s, err := open()
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
func TestMergedBatches(t *testing.T) { forEachBackend(t, testMergedBatches) }

func testMergedBatches(t *testing.T, open func() (*Store, error)) {
	s, err := open()
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

// forEachBackend runs a test on SQLite and on PostgreSQL, each time with a
// database of its own that open opens (again, after a Close).
func forEachBackend(t *testing.T, test func(t *testing.T, open func() (*Store, error))) {
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		test(t, func() (*Store, error) { return Open(dir) })
	})
	t.Run("postgres", func(t *testing.T) {
		u, err := ParsePostgresURL(pgtest.Shared(t).NewDatabase(t))
		if err != nil {
			t.Fatal(err)
		}
		test(t, func() (*Store, error) { return OpenPostgres(context.Background(), u, pgtest.Shared(t).PasswordFile) })
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

// text is the output Logs read, joined.
func text(cs []LogChunk, last int64, err error) (string, int64, error) {
	var b []byte
	for _, c := range cs {
		b = append(b, c.Data...)
	}
	return string(b), last, err
}

// A database at a newer schema version than this rbs knows is refused, by
// name and version, and left as it was.
func TestNewerSchemaIsRefused(t *testing.T) { forEachBackend(t, testNewerSchemaIsRefused) }

func testNewerSchemaIsRefused(t *testing.T, open func() (*Store, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	newer := len(migrations) + 1
	if _, err := s.db.Exec(s.rebind(`UPDATE meta SET value = ? WHERE key = ?`), newer, schemaKey); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = open()
	want := fmt.Sprintf("schema version %d, newer than this rbs knows (%d)", newer, len(migrations))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("opening a newer schema: %v; want an error saying %q", err, want)
	}
}

// A SQLite database made before schema versions were numbered, and before
// output had a rank, is migrated in place and keeps its jobs.
func TestMigratesUnversionedSQLite(t *testing.T) {
	dir := t.TempDir()
	db, err := sql.Open("sqlite", "file:"+dir+"/jobs.db")
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := proto.Marshal(&jobspb.JobRecord{Id: 1, Index: -1, State: "COMPLETED"})
	spec, _ := proto.Marshal(&jobspb.JobSpec{Name: "old"})
	for _, q := range []string{
		`CREATE TABLE jobs (id INTEGER NOT NULL, idx INTEGER NOT NULL, state TEXT NOT NULL, record BLOB NOT NULL, PRIMARY KEY (id, idx))`,
		`CREATE TABLE logs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id INTEGER NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL)`,
		`CREATE TABLE specs (id INTEGER PRIMARY KEY, spec BLOB NOT NULL)`,
		`CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL)`,
		`INSERT INTO meta VALUES ('next_id', 2)`,
		`INSERT INTO logs (id, idx, data) VALUES (1, -1, 'before')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	if _, err := db.Exec(`INSERT INTO jobs VALUES (1, -1, 'COMPLETED', ?)`, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO specs VALUES (1, ?)`, spec); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load()
	if err != nil || len(st.Jobs) != 1 || st.Specs[1].GetName() != "old" || st.NextID != 2 {
		t.Fatalf("Load after migrating = %v, %v", st, err)
	}
	if err := s.Commit(&Batch{Logs: []LogChunk{{ID: 1, Index: -1, Rank: 1, Data: []byte(" after")}}}); err != nil {
		t.Fatal(err)
	}
	out, _, err := text(s.Logs(1, -1, 0, 1<<20))
	if err != nil || out != "before after" {
		t.Fatalf("Logs = %q, %v", out, err)
	}
	var version int
	if err := s.db.QueryRow(`SELECT value FROM meta WHERE key = ?`, schemaKey).Scan(&version); err != nil || version != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", version, err, len(migrations))
	}
}

func TestParsePostgresURL(t *testing.T) {
	tests := []struct {
		in, err string
	}{
		{in: "postgres://rbs@db.example:5432/rbs"},
		{in: "postgresql://rbs@127.0.0.1/state?sslmode=disable"},
		{in: "postgres://rbs:hunter2@db:5432/rbs", err: "holds a password"},
		{in: "postgres://rbs@db/rbs?password=hunter2", err: "holds a password"},
		{in: "mysql://rbs@db/rbs", err: "not a PostgreSQL URL"},
		{in: "postgres://rbs@db:5432", err: "with a host and a database"},
		{in: "postgres:///rbs", err: "with a host and a database"},
		{in: "postgres://rbs@db:x/rbs", err: "not a PostgreSQL URL"},
	}
	for _, tt := range tests {
		_, err := ParsePostgresURL(tt.in)
		if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("ParsePostgresURL(%q) = %v, want %q", tt.in, err, tt.err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParsePostgresURL(%q): the error shows the password: %v", tt.in, err)
		}
	}
}

func TestUsage(t *testing.T) { forEachBackend(t, testUsage) }

// Each user's fair-share usage is stored; a later row of a user, in the
// same batch or a later one, replaces an earlier one.
func testUsage(t *testing.T, open func() (*Store, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := &Batch{Usage: []Usage{{User: "alice", CPU: 1, AtUnixMs: 10}}}
	b.Merge(&Batch{Usage: []Usage{{User: "alice", CPU: 2.5, Memory: 0.25, GPU: 8, AtUnixMs: 20}, {User: "bob", CPU: 3, AtUnixMs: 30}}})
	if b.Empty() {
		t.Fatal("a batch of usage alone is empty")
	}
	if err := s.Commit(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(&Batch{Usage: []Usage{{User: "bob", CPU: 4, AtUnixMs: 40}}}); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := []Usage{{User: "alice", CPU: 2.5, Memory: 0.25, GPU: 8, AtUnixMs: 20}, {User: "bob", CPU: 4, AtUnixMs: 40}}
	if fmt.Sprint(st.Usage) != fmt.Sprint(want) {
		t.Fatalf("usage %v, want %v", st.Usage, want)
	}
}

func TestChunk(t *testing.T) {
	for _, c := range []struct{ n, want int }{{1, 1}, {2, 2}, {3, 2}, {7, 4}, {8, 8}, {499, 256}, {500, 500}, {10000, 500}} {
		if got := chunk(c.n); got != c.want {
			t.Errorf("chunk(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

// TestInsertInChunks writes batches of sizes that take several statements
// of insert's sizes, and reads back every row, the output in its order.
func TestInsertInChunks(t *testing.T) { forEachBackend(t, testInsertInChunks) }

func testInsertInChunks(t *testing.T, open func() (*Store, error)) {
	s, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var id int64
	var want []byte
	for _, n := range []int{1, 3, 7, 500, 777} {
		id++
		b := &Batch{Specs: map[int64]*jobspb.JobSpec{id: {Name: fmt.Sprint(n)}}, NextID: id + 1}
		for i := range n {
			b.Jobs = append(b.Jobs, &jobspb.JobRecord{Id: id, Index: int32(i), State: "PENDING"})
			c := byte('a' + i%26)
			b.Logs = append(b.Logs, LogChunk{ID: 1, Index: 0, Data: []byte{c}})
			want = append(want, c)
		}
		if err := s.Commit(b); err != nil {
			t.Fatalf("a batch of %d: %v", n, err)
		}
	}
	st, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1+3+7+500+777 {
		t.Fatalf("loaded %d records, want %d", len(st.Jobs), 1+3+7+500+777)
	}
	got, _, err := text(s.Logs(1, 0, 0, 1<<20))
	if err != nil || string(got) != string(want) {
		t.Fatalf("the output read back is %d bytes (%v), not the %d written in order", len(got), err, len(want))
	}
}
