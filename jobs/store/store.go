// Package store provides Store, the durable state of the batch scheduler:
// job records, their specs, job output, maintenance windows and counters,
// in SQLite (modernc.org/sqlite, WAL, full synchronous commits) under the
// server's data directory by default (Open), or in a PostgreSQL database
// that several servers share (OpenPostgres). Callers group every state
// change of a scheduling round into one Commit, which returns only once the
// transaction is durable, so nothing is acknowledged before it is.
//
// The schema's versions are numbered (schema.go); opening a database
// migrates it to this rbs's version, and refuses one at a newer version.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
)

// Store is the scheduler's database.
type Store struct {
	db      *sql.DB
	dialect dialect
	dir     string // the SQLite database's directory; "" for PostgreSQL
	// epoch is the lease's epoch this server commits at (see Lease); 0
	// where no lease is held (SQLite).
	epoch int64
	// holder names this server's PostgreSQL sessions.
	holder string
	// stmts are Commit's statements, prepared (see prepare), by their
	// text before rebind.
	stmts map[string]*sql.Stmt
}

// commitTimeout bounds one Commit: a database that does not answer fails
// the round rather than hanging the scheduler.
const commitTimeout = time.Minute

// Open opens (creating if needed) the database in dir.
func Open(dir string) (*Store, error) {
	path := filepath.Join(dir, "jobs.db")
	// The path is escaped into the URI: a '#' or '?' in it would end the
	// file name there, and two directories could share one database.
	uri := url.URL{Scheme: "file", Path: path, RawQuery: "_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)"}
	db, err := sql.Open("sqlite", uri.String())
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// One connection: the scheduler writes from one goroutine, and SQLite
	// serializes writers anyway.
	db.SetMaxOpenConns(1)
	if err := migrate(db, sqlite, path); err != nil {
		db.Close()
		return nil, err
	}
	s := &Store{db: db, dialect: sqlite, dir: dir}
	if err := s.prepare(); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error {
	for _, st := range s.stmts {
		st.Close()
	}
	return s.db.Close()
}

// LogChunk is output of one job to append.
type LogChunk struct {
	ID    int64
	Index int32
	// Rank is the node of a multi-node job the output is from; 0 for one
	// node.
	Rank int32
	Data []byte
}

// Batch is the changes of one scheduling round.
type Batch struct {
	// Specs are the specs of jobs submitted in the round, by job id. A spec
	// is stored once for a job and all its array tasks, and never changes.
	Specs map[int64]*jobspb.JobSpec
	// Jobs are the records to write, without their spec.
	Jobs   []*jobspb.JobRecord
	Logs   []LogChunk
	NextID int64 // when non-zero, the next job id to hand out
	// Forget lists jobs to delete, with all their tasks, spec and output.
	Forget []int64
	// Reservations are maintenance windows to write; Unreserve names the
	// ones to delete. A name is in at most one of them.
	Reservations []*jobspb.Reservation
	Unreserve    []string
	// Submits are the idempotency keys of submissions taken in the round,
	// with the ids they were given.
	Submits []Submit
	// Usage is the fair-share usage of users whose usage changed; a later
	// row of a user replaces an earlier one.
	Usage []Usage
}

// Usage is one user's decayed fair-share usage as of a time: CPU-,
// GiB-of-memory- and GPU-seconds.
type Usage struct {
	User             string
	CPU, Memory, GPU float64
	AtUnixMs         int64
}

// A Submit is a submission's idempotency key and the ids of its jobs: the
// same key submitted again gets the same ids, not new jobs.
type Submit struct {
	Key string
	IDs []int64
}

// Empty reports whether the batch changes nothing.
func (b *Batch) Empty() bool {
	return len(b.Specs) == 0 && len(b.Jobs) == 0 && len(b.Logs) == 0 && b.NextID == 0 && len(b.Forget) == 0 &&
		len(b.Reservations) == 0 && len(b.Unreserve) == 0 && len(b.Submits) == 0 && len(b.Usage) == 0
}

// Merge adds the changes of a later round to b, so that both commit as one.
// Later records of a job overwrite earlier ones, as they would have.
func (b *Batch) Merge(later *Batch) {
	if len(later.Specs) > 0 && b.Specs == nil {
		b.Specs = map[int64]*jobspb.JobSpec{}
	}
	for id, sp := range later.Specs {
		b.Specs[id] = sp
	}
	b.Jobs = append(b.Jobs, later.Jobs...)
	b.Logs = append(b.Logs, later.Logs...)
	b.Forget = append(b.Forget, later.Forget...)
	b.Submits = append(b.Submits, later.Submits...)
	b.Usage = append(b.Usage, later.Usage...)
	// A later change of a reservation replaces an earlier one: a name is
	// in at most one of the two lists.
	for _, name := range later.Unreserve {
		b.Reservations = slices.DeleteFunc(b.Reservations, func(r *jobspb.Reservation) bool { return r.Name == name })
	}
	for _, r := range later.Reservations {
		b.Unreserve = slices.DeleteFunc(b.Unreserve, func(name string) bool { return name == r.Name })
	}
	b.Reservations = append(b.Reservations, later.Reservations...)
	b.Unreserve = append(b.Unreserve, later.Unreserve...)
	if later.NextID != 0 {
		b.NextID = later.NextID
	}
}

// IsFull reports whether a Commit failed because the disk is full.
func IsFull(err error) bool {
	var coded interface{ Code() int }
	if errors.As(err, &coded) && coded.Code()&0xff == sqliteFull {
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || isPostgresFull(err)
}

// sqliteFull is SQLite's primary result code SQLITE_FULL.
const sqliteFull = 13

// SpaceLeft returns the bytes free for the database on its file system.
// A database on another machine (PostgreSQL) reports no bound: its
// commit succeeding is all that can be known here.
func (s *Store) SpaceLeft() (int64, error) {
	if s.dir == "" {
		return math.MaxInt64, nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(s.dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// Commit writes the batch in one transaction and returns once it is durable.
func (s *Store) Commit(b *Batch) error {
	if b.Empty() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), commitTimeout)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.fence(ctx, tx); err != nil {
		return err
	}
	if err := s.putSpecs(tx, b.Specs); err != nil {
		return err
	}
	if err := s.putJobs(tx, b.Jobs); err != nil {
		return err
	}
	logs := make([][]any, len(b.Logs))
	for i, l := range b.Logs {
		logs[i] = []any{l.ID, l.Index, l.Rank, l.Data, s.epoch}
	}
	if err := s.insert(tx, logRows, logs); err != nil {
		return fmt.Errorf("saving job output: %w", err)
	}
	for _, id := range b.Forget {
		for _, q := range forgetJob {
			if _, err := s.exec(tx, q, id); err != nil {
				return fmt.Errorf("forgetting job %d: %w", id, err)
			}
		}
	}
	// A name is in at most one of the two lists (see Merge).
	for _, name := range b.Unreserve {
		if _, err := s.exec(tx, deleteReservation, name); err != nil {
			return fmt.Errorf("removing reservation %s: %w", name, err)
		}
	}
	for _, r := range b.Reservations {
		rec, err := proto.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := s.exec(tx, putReservation, r.Name, rec); err != nil {
			return fmt.Errorf("saving reservation %s: %w", r.Name, err)
		}
	}
	for _, sub := range b.Submits {
		if _, err := s.exec(tx, putSubmit, sub.Key, sub.IDs[len(sub.IDs)-1], formatIDs(sub.IDs)); err != nil {
			return fmt.Errorf("saving submission key %q: %w", sub.Key, err)
		}
	}
	for _, u := range b.Usage {
		if _, err := s.exec(tx, putUsage, u.User, u.CPU, u.Memory, u.GPU, u.AtUnixMs); err != nil {
			return fmt.Errorf("saving the usage of %s: %w", u.User, err)
		}
	}
	if b.NextID != 0 {
		if _, err := s.exec(tx, putNextID, b.NextID); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *Store) putSpecs(tx *sql.Tx, specs map[int64]*jobspb.JobSpec) error {
	rows := make([][]any, 0, len(specs))
	for id, sp := range specs {
		b, err := proto.Marshal(sp)
		if err != nil {
			return err
		}
		rows = append(rows, []any{id, b})
	}
	if err := s.insert(tx, specRows, rows); err != nil {
		return fmt.Errorf("saving job specs: %w", err)
	}
	return nil
}

// putJobs writes job records, the last of a job's records where a merged
// batch holds several: one statement may change a row once only.
func (s *Store) putJobs(tx *sql.Tx, jobs []*jobspb.JobRecord) error {
	type key struct {
		id  int64
		idx int32
	}
	last := make(map[key]int, len(jobs))
	for i, j := range jobs {
		if j.Spec != nil {
			return fmt.Errorf("saving job %d: its record carries its spec, which is stored apart", j.Id)
		}
		last[key{j.Id, j.Index}] = i
	}
	rows := make([][]any, 0, len(last))
	for i, j := range jobs {
		if last[key{j.Id, j.Index}] != i {
			continue
		}
		rec, err := proto.Marshal(j)
		if err != nil {
			return err
		}
		rows = append(rows, []any{j.Id, j.Index, j.State, rec, s.epoch})
	}
	if err := s.insert(tx, jobRows, rows); err != nil {
		return fmt.Errorf("saving job records: %w", err)
	}
	return nil
}

// insert writes rows, each the parameters of one, with the statements of
// m, in order: insertRows rows a statement, then fewer, a power of two a
// statement, so that the few statements there are can be prepared.
func (s *Store) insert(tx *sql.Tx, m multiRow, rows [][]any) error {
	args := make([]any, 0, min(len(rows), insertRows)*m.width)
	for len(rows) > 0 {
		n := chunk(len(rows))
		args = args[:0]
		for _, r := range rows[:n] {
			args = append(args, r...)
		}
		if _, err := s.exec(tx, m.text(n), args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// exec runs a statement written with ? placeholders in the transaction:
// the statement prepared for it, if any.
func (s *Store) exec(tx *sql.Tx, q string, args ...any) (sql.Result, error) {
	if st := s.stmts[q]; st != nil {
		return tx.Stmt(st).Exec(args...)
	}
	return tx.Exec(s.rebind(q), args...)
}

// rebind writes a query in the store's dialect.
func (s *Store) rebind(q string) string { return s.dialect.rebind(q) }

// State is what Load reads back: every job record (without its spec), the
// specs by job id, and the next job id to hand out.
type State struct {
	Jobs         []*jobspb.JobRecord
	Specs        map[int64]*jobspb.JobSpec
	NextID       int64
	Reservations []*jobspb.Reservation
	// Submits are the ids of submissions by their idempotency keys.
	Submits map[string][]int64
	// Usage is each user's fair-share usage, as last written.
	Usage []Usage
}

// Load reads the whole state. Every record's job has a spec in Specs.
func (s *Store) Load() (*State, error) {
	st := &State{Specs: map[int64]*jobspb.JobSpec{}, NextID: 1, Submits: map[string][]int64{}}
	err := s.db.QueryRow(s.rebind(`SELECT value FROM meta WHERE key = 'next_id'`)).Scan(&st.NextID)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	if err := s.loadSpecs(st); err != nil {
		return nil, err
	}
	if err := s.loadReservations(st); err != nil {
		return nil, err
	}
	if err := s.loadSubmits(st); err != nil {
		return nil, err
	}
	if err := s.loadUsage(st); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(s.rebind(`SELECT record FROM jobs ORDER BY id, idx`))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// Records written before specs had a table of their own carry their
	// spec; it moves to the table.
	moved := map[int64]*jobspb.JobSpec{}
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		j := &jobspb.JobRecord{}
		if err := proto.Unmarshal(b, j); err != nil {
			return nil, fmt.Errorf("a job record is unreadable: %w", err)
		}
		if j.Spec != nil {
			if st.Specs[j.Id] == nil {
				st.Specs[j.Id], moved[j.Id] = j.Spec, j.Spec
			}
			j.Spec = nil
		}
		if st.Specs[j.Id] == nil {
			return nil, fmt.Errorf("job %d has no spec", j.Id)
		}
		st.Jobs = append(st.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close() // free the connection for the Commit
	if len(moved) > 0 {
		if err := s.Commit(&Batch{Specs: moved}); err != nil {
			return nil, err
		}
	}
	return st, nil
}

func (s *Store) loadSpecs(st *State) error {
	rows, err := s.db.Query(s.rebind(`SELECT id, spec FROM specs`))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			return err
		}
		sp := &jobspb.JobSpec{}
		if err := proto.Unmarshal(b, sp); err != nil {
			return fmt.Errorf("the spec of job %d is unreadable: %w", id, err)
		}
		st.Specs[id] = sp
	}
	return rows.Err()
}

// Logs returns the output of a job (index -1 for a plain job) stored after
// sequence number after, as it was stored, each piece with the rank it is
// from, and the last sequence number returned. It stops at the first piece
// that brings the total to max bytes or more, so a caller reads long output
// a part at a time until a call returns nothing.
func (s *Store) Logs(id int64, index int32, after int64, max int) ([]LogChunk, int64, error) {
	rows, err := s.db.Query(s.rebind(`SELECT seq, rank, data FROM logs WHERE id = ? AND idx = ? AND seq > ? ORDER BY seq`), id, index, after)
	if err != nil {
		return nil, after, err
	}
	defer rows.Close()
	var out []LogChunk
	total := 0
	last := after
	for rows.Next() {
		var seq int64
		l := LogChunk{ID: id, Index: index}
		if err := rows.Scan(&seq, &l.Rank, &l.Data); err != nil {
			return nil, after, err
		}
		out = append(out, l)
		total += len(l.Data)
		last = seq
		if total >= max {
			break
		}
	}
	return out, last, rows.Err()
}

func (s *Store) loadReservations(st *State) error {
	rows, err := s.db.Query(s.rebind(`SELECT record FROM reservations ORDER BY name`))
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		r := &jobspb.Reservation{}
		if err := proto.Unmarshal(b, r); err != nil {
			return fmt.Errorf("a reservation is unreadable: %w", err)
		}
		st.Reservations = append(st.Reservations, r)
	}
	return rows.Err()
}

func (s *Store) loadSubmits(st *State) error {
	rows, err := s.db.Query(`SELECT key, ids FROM submits`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var key, ids string
		if err := rows.Scan(&key, &ids); err != nil {
			return err
		}
		parsed, err := parseIDs(ids)
		if err != nil {
			return fmt.Errorf("the ids of submission key %q are unreadable: %w", key, err)
		}
		st.Submits[key] = parsed
	}
	return rows.Err()
}

// formatIDs writes job ids as a comma-separated list; parseIDs reads one.
func (s *Store) loadUsage(st *State) error {
	rows, err := s.db.Query(`SELECT name, cpu, memory, gpu, at_ms FROM fair_usage ORDER BY name`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var u Usage
		if err := rows.Scan(&u.User, &u.CPU, &u.Memory, &u.GPU, &u.AtUnixMs); err != nil {
			return err
		}
		st.Usage = append(st.Usage, u)
	}
	return rows.Err()
}

func formatIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

func parseIDs(s string) ([]int64, error) {
	var ids []int64
	for _, p := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
