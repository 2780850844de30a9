package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// ParsePostgresURL checks a --state address: postgres://USER@HOST:PORT/DB
// (postgresql:// too), with libpq's parameters after a '?'. A password in
// it is refused: the address is given on the command line, where every
// user of the machine can read it.
func ParsePostgresURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a PostgreSQL URL: %v", raw, err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("%q is not a PostgreSQL URL: want postgres://USER@HOST:PORT/DB", raw)
	}
	if _, has := u.User.Password(); has || u.Query().Has("password") {
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		q := u.Query()
		q.Del("password")
		u.RawQuery = q.Encode()
		return nil, fmt.Errorf("%s: the URL holds a password, which anyone on this machine can read on the command line; "+
			"put it in a pgpass file named by PGPASSFILE (or ~/.pgpass), or in a file given with --state-password-file", u.Redacted())
	}
	if u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, fmt.Errorf("%q: want postgres://USER@HOST:PORT/DB, with a host and a database", raw)
	}
	return u, nil
}

// OpenPostgres opens the state kept in the PostgreSQL database at u (see
// ParsePostgresURL), migrating its schema to this rbs's version. The
// password is read from passwordFile when it is given, else as libpq
// reads it (PGPASSFILE, ~/.pgpass, PGPASSWORD).
func OpenPostgres(ctx context.Context, u *url.URL, passwordFile string) (*Store, error) {
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile)
		if err != nil {
			return nil, fmt.Errorf("reading the database password: %w", err)
		}
		cfg.Password = strings.TrimRight(string(b), "\r\n")
	}
	holder := holderName()
	cfg.RuntimeParams["application_name"] = holder
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = connectTimeout
	}
	db := stdlib.OpenDB(*cfg)
	// The scheduler writes from one goroutine; readers of job output take
	// the others.
	db.SetMaxOpenConns(8)
	where := u.Redacted()
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s: %w", where, err)
	}
	if err := migrate(db, postgres, where); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db, dialect: postgres, holder: holder}, nil
}

// connectTimeout bounds a connection attempt to the database server.
const connectTimeout = 10 * time.Second

// pgDiskFull is PostgreSQL's SQLSTATE disk_full.
const pgDiskFull = "53100"

func isPostgresFull(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == pgDiskFull
}
