package store

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// A dialect is what differs between the SQL engines the store runs on: the
// parameter placeholders and the schema's column types.
type dialect int

const (
	sqlite dialect = iota
	postgres
)

func (d dialect) String() string {
	if d == postgres {
		return "PostgreSQL"
	}
	return "SQLite"
}

// rebind writes the store's queries, which use ? for their parameters, in
// the dialect's placeholders ($1, $2, … for PostgreSQL).
func (d dialect) rebind(q string) string {
	if d != postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// A migration takes the schema from the version before it to its own. Its
// statements are in the store's placeholder syntax, one dialect's text for
// each; migrate runs them in one transaction with the version's bump.
type migration struct {
	sqlite, postgres []string
	// check, when set, runs before the statements of a SQLite database: it
	// brings a database made before versions were numbered to the point
	// the statements expect.
	check func(tx *sql.Tx) error
}

// migrations are the schema's versions: migrations[i] makes version i+1.
// A version, once released, never changes; a change is a new version.
var migrations = []migration{
	// 1: jobs, their output, their specs, maintenance windows and counters.
	{
		sqlite: []string{
			`CREATE TABLE IF NOT EXISTS jobs (id INTEGER NOT NULL, idx INTEGER NOT NULL, state TEXT NOT NULL, record BLOB NOT NULL, PRIMARY KEY (id, idx))`,
			`CREATE TABLE IF NOT EXISTS logs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id INTEGER NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL, rank INTEGER NOT NULL DEFAULT 0)`,
			`CREATE INDEX IF NOT EXISTS logs_by_job ON logs (id, idx, seq)`,
			`CREATE TABLE IF NOT EXISTS specs (id INTEGER PRIMARY KEY, spec BLOB NOT NULL)`,
			`CREATE TABLE IF NOT EXISTS reservations (name TEXT PRIMARY KEY, record BLOB NOT NULL)`,
		},
		postgres: []string{
			`CREATE TABLE jobs (id BIGINT NOT NULL, idx INTEGER NOT NULL, state TEXT NOT NULL, record BYTEA NOT NULL, PRIMARY KEY (id, idx))`,
			`CREATE TABLE logs (seq BIGSERIAL PRIMARY KEY, id BIGINT NOT NULL, idx INTEGER NOT NULL, data BYTEA NOT NULL, rank INTEGER NOT NULL DEFAULT 0)`,
			`CREATE INDEX logs_by_job ON logs (id, idx, seq)`,
			`CREATE TABLE specs (id BIGINT PRIMARY KEY, spec BYTEA NOT NULL)`,
			`CREATE TABLE reservations (name TEXT PRIMARY KEY, record BYTEA NOT NULL)`,
		},
		check: addRank,
	},
	// 2: the lease of the active server (PostgreSQL), the epoch each row
	// was written at, and the keys of submissions already taken.
	{
		sqlite: []string{
			`ALTER TABLE jobs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0`,
			`ALTER TABLE logs ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0`,
			`CREATE TABLE submits (key TEXT PRIMARY KEY, id INTEGER NOT NULL, ids TEXT NOT NULL)`,
		},
		postgres: []string{
			`ALTER TABLE jobs ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0`,
			`ALTER TABLE logs ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0`,
			`CREATE TABLE submits (key TEXT PRIMARY KEY, id BIGINT NOT NULL, ids TEXT NOT NULL)`,
			`CREATE TABLE lease (id INTEGER PRIMARY KEY CHECK (id = 1), epoch BIGINT NOT NULL, holder TEXT NOT NULL, address TEXT NOT NULL)`,
			// Renewals have a row of their own, so that they never wait
			// for a commit, which holds the lease's row.
			`CREATE TABLE lease_renewal (id INTEGER PRIMARY KEY CHECK (id = 1), holder TEXT NOT NULL, renewed TIMESTAMPTZ NOT NULL)`,
		},
	},
	// 3: each user's fair-share usage.
	{
		sqlite:   []string{`CREATE TABLE fair_usage (name TEXT PRIMARY KEY, cpu REAL NOT NULL, memory REAL NOT NULL, gpu REAL NOT NULL, at_ms INTEGER NOT NULL)`},
		postgres: []string{`CREATE TABLE fair_usage (name TEXT PRIMARY KEY, cpu DOUBLE PRECISION NOT NULL, memory DOUBLE PRECISION NOT NULL, gpu DOUBLE PRECISION NOT NULL, at_ms BIGINT NOT NULL)`},
	},
}

// metaTable holds the schema's version and the store's counters. It is
// made before any migration, since it says which of them have run.
const metaTable = `CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)`

// migrate brings the database's schema to the newest version this rbs
// knows. A database at a newer version than that is refused: this rbs would
// misread or damage it.
func migrate(db *sql.DB, d dialect, where string) error {
	if _, err := db.Exec(metaTable); err != nil {
		return fmt.Errorf("creating the schema in %s: %w", where, err)
	}
	for {
		done, err := migrateOne(db, d, where)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne runs the next migration the database lacks, if any, in a
// transaction that also records the new version; done reports that there
// was none. Servers that start together on one database may race here: the
// version row is locked (PostgreSQL) or the database is (SQLite), and a
// loser finds the version moved and goes on from there.
func migrateOne(db *sql.DB, d dialect, where string) (done bool, err error) {
	tx, err := db.Begin()
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	if d == postgres {
		// One migrator at a time: the lock is the transaction's.
		if _, err := tx.Exec(d.rebind(`SELECT pg_advisory_xact_lock(?)`), migrationLock); err != nil {
			return false, err
		}
	}
	var version int
	err = tx.QueryRow(d.rebind(`SELECT value FROM meta WHERE key = ?`), schemaKey).Scan(&version)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("reading the schema version of %s: %w", where, err)
	}
	if version > len(migrations) {
		return false, fmt.Errorf("the state in %s has schema version %d, newer than this rbs knows (%d): it was written by a newer rbs; run that version, or a later one",
			where, version, len(migrations))
	}
	if version == len(migrations) {
		return true, nil
	}
	m := migrations[version]
	stmts := m.sqlite
	if d == postgres {
		stmts = m.postgres
	}
	for _, q := range stmts {
		if _, err := tx.Exec(d.rebind(q)); err != nil {
			return false, fmt.Errorf("migrating %s to schema version %d: %w", where, version+1, err)
		}
	}
	if d == sqlite && m.check != nil {
		if err := m.check(tx); err != nil {
			return false, fmt.Errorf("migrating %s to schema version %d: %w", where, version+1, err)
		}
	}
	if _, err := tx.Exec(d.rebind(`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`), schemaKey, version+1); err != nil {
		return false, err
	}
	return false, tx.Commit()
}

const (
	schemaKey = "schema_version"
	// migrationLock is the PostgreSQL advisory lock migrations hold.
	migrationLock = 0x7262_7300_0001
)

// addRank adds the rank column to the logs of a SQLite database made before
// multi-node jobs.
func addRank(tx *sql.Tx) error {
	var n int
	if err := tx.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('logs') WHERE name = 'rank'`).Scan(&n); err != nil || n > 0 {
		return err
	}
	_, err := tx.Exec(`ALTER TABLE logs ADD COLUMN rank INTEGER NOT NULL DEFAULT 0`)
	return err
}
