package store

import (
	"database/sql"
	"fmt"
	"math/bits"
	"strings"
)

// The statements Commit runs. Under SQLite they are prepared once, when
// the store opens (prepare), rather than parsed again each round: parsing
// was a tenth of the server's CPU in an array of short jobs. PostgreSQL's
// driver keeps its own prepared statements.
const (
	deleteReservation = `DELETE FROM reservations WHERE name = ?`
	putReservation    = `INSERT INTO reservations (name, record) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET record = excluded.record`
	putSubmit = `INSERT INTO submits (key, id, ids) VALUES (?, ?, ?)`
	putUsage  = `INSERT INTO fair_usage (name, cpu, memory, gpu, at_ms) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET cpu = excluded.cpu, memory = excluded.memory, gpu = excluded.gpu, at_ms = excluded.at_ms`
	putNextID = `INSERT INTO meta (key, value) VALUES ('next_id', ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`
)

// forgetJob deletes a job's rows, given its id.
var forgetJob = []string{
	`DELETE FROM jobs WHERE id = ?`,
	`DELETE FROM logs WHERE id = ?`,
	`DELETE FROM specs WHERE id = ?`,
	`DELETE FROM submits WHERE id = ?`,
}

// multiRow is a statement that writes rows of width parameters each: head
// (ending in VALUES), their tuples, then tail.
type multiRow struct {
	head, tail string
	width      int
}

var (
	logRows  = multiRow{`INSERT INTO logs (id, idx, rank, data, epoch) VALUES `, "", 5}
	specRows = multiRow{`INSERT INTO specs (id, spec) VALUES `, ` ON CONFLICT (id) DO NOTHING`, 2}
	jobRows  = multiRow{`INSERT INTO jobs (id, idx, state, record, epoch) VALUES `,
		` ON CONFLICT (id, idx) DO UPDATE SET state = excluded.state, record = excluded.record, epoch = excluded.epoch`, 5}
)

// text is m's statement for n rows.
func (m multiRow) text(n int) string {
	tuple := "(?" + strings.Repeat(", ?", m.width-1) + ")"
	return m.head + tuple + strings.Repeat(", "+tuple, n-1) + m.tail
}

// insertRows is the most rows one statement of insert writes: a round trip
// per row would make a large round slow on a database across a network,
// and SQLite takes at most 32766 parameters a statement.
const insertRows = 500

// chunk is how many of n rows insert writes with its next statement:
// insertRows, or the largest power of two at most n.
func chunk(n int) int {
	if n >= insertRows {
		return insertRows
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

// prepare prepares the statements Commit runs under SQLite.
func (s *Store) prepare() error {
	qs := append([]string{deleteReservation, putReservation, putSubmit, putUsage, putNextID}, forgetJob...)
	for _, m := range []multiRow{logRows, specRows, jobRows} {
		for n := 1; n < insertRows; n *= 2 {
			qs = append(qs, m.text(n))
		}
		qs = append(qs, m.text(insertRows))
	}
	s.stmts = make(map[string]*sql.Stmt, len(qs))
	for _, q := range qs {
		st, err := s.db.Prepare(s.rebind(q))
		if err != nil {
			return fmt.Errorf("preparing %q: %w", q, err)
		}
		s.stmts[q] = st
	}
	return nil
}
