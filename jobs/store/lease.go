package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrFenced is the error of a Commit by a server whose lease was taken
// over: another server is active at a newer epoch, and nothing of the
// commit was written.
var ErrFenced = errors.New("another server took over the cluster's state")

const (
	// leaseLock is the PostgreSQL advisory lock the active server's
	// session holds.
	leaseLock = 0x7262_7300_0002
	// renewEvery is how often the active server renews its lease;
	// staleAfter is how long a lease stays good without renewal, after
	// which a standby ends the holder's sessions and takes over.
	renewEvery = time.Second
	staleAfter = 3 * time.Second
	// pollEvery is how often a standby tries to take the lease.
	pollEvery = 250 * time.Millisecond
)

// A Lease is a server's hold on being the active one of the servers that
// share a PostgreSQL state: PostgreSQL's advisory lock, held by one
// database session of the server, and the lease row, whose epoch is bumped
// by each server that takes it. Every Commit checks the epoch in its
// transaction, under a row lock that a takeover's bump waits for, so a
// server that lost the lease (stopped, then resumed) writes nothing. The
// active server renews the lease every second, in a row of its own that no
// commit holds; one that stops renewing for three seconds is deemed gone,
// and the standby that takes over ends its database sessions, which frees
// the lock.
type Lease struct {
	// Epoch is the epoch this server commits at.
	Epoch int64

	s    *Store
	conn *sql.Conn // the session holding the advisory lock
	lost chan struct{}
	err  error
	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// holderName names a server's database sessions (their application_name),
// so that a server taking over can end them.
func holderName() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "rbs-server-" + hex.EncodeToString(b)
}

// Acquire waits until this server holds the lease, then returns it with
// the epoch bumped: a server takes the lease before it loads the state. The
// address is where this server serves, recorded for the standbys; while
// another server holds the lease, standby is called with that server's
// address each time it changes. Acquire needs a PostgreSQL state; it returns
// ctx's error when ctx ends first.
func (s *Store) Acquire(ctx context.Context, address string, standby func(active string)) (*Lease, error) {
	if s.dialect != postgres {
		return nil, fmt.Errorf("a lease needs the state in PostgreSQL (--state postgres://…)")
	}
	lastActive := ""
	for {
		l, err := s.tryAcquire(ctx, address)
		if l != nil || err != nil && ctx.Err() != nil {
			return l, err
		}
		if err == nil {
			active, err := s.breakStale(ctx)
			if err == nil && active != "" && active != lastActive && standby != nil {
				lastActive = active
				standby(active)
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// tryAcquire takes the advisory lock and bumps the epoch, or returns nil
// when another session holds the lock.
func (s *Store) tryAcquire(ctx context.Context, address string) (*Lease, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := conn.QueryRowContext(ctx, s.rebind(`SELECT pg_try_advisory_lock(?)`), leaseLock).Scan(&got); err != nil || !got {
		conn.Close()
		return nil, err
	}
	epoch, err := s.bump(ctx, conn, address)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("taking the lease: %w", err)
	}
	rctx, stop := context.WithCancel(context.Background())
	l := &Lease{Epoch: epoch, s: s, conn: conn, lost: make(chan struct{}), stop: stop, done: make(chan struct{})}
	s.epoch = epoch
	go l.renew(rctx)
	return l, nil
}

// bump makes this server the lease's holder at the next epoch, in one
// transaction on the lock's session.
func (s *Store) bump(ctx context.Context, conn *sql.Conn, address string) (int64, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var epoch int64
	if err := tx.QueryRowContext(ctx, s.rebind(`INSERT INTO lease (id, epoch, holder, address) VALUES (1, 1, ?, ?)
		ON CONFLICT (id) DO UPDATE SET epoch = lease.epoch + 1, holder = excluded.holder, address = excluded.address
		RETURNING epoch`), s.holder, address).Scan(&epoch); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO lease_renewal (id, holder, renewed) VALUES (1, ?, now())
		ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, renewed = now()`), s.holder); err != nil {
		return 0, err
	}
	return epoch, tx.Commit()
}

// breakStale returns the active server's address, first ending the
// database sessions of a holder that has not renewed its lease in time.
func (s *Store) breakStale(ctx context.Context) (string, error) {
	var address, holder string
	var stale bool
	err := s.db.QueryRowContext(ctx, s.rebind(`SELECT l.address, r.holder, now() - r.renewed > ? * interval '1 millisecond' FROM lease l, lease_renewal r WHERE l.id = 1 AND r.id = 1`),
		staleAfter.Milliseconds()).Scan(&address, &holder, &stale)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil // the lock's holder has not written the row yet
	}
	if err != nil || !stale {
		return address, err
	}
	_, err = s.db.ExecContext(ctx, s.rebind(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ? AND pid <> pg_backend_pid()`), holder)
	return address, err
}

// renew keeps the lease until it is released or found lost.
func (l *Lease) renew(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(renewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, staleAfter)
		res, err := l.conn.ExecContext(rctx, l.s.rebind(`UPDATE lease_renewal SET renewed = now() WHERE id = 1 AND holder = ?`), l.s.holder)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if n, _ := res.RowsAffected(); n == 0 {
				err = fmt.Errorf("%w: the lease has another holder than this server, at epoch %d", ErrFenced, l.Epoch)
			}
		}
		if err != nil {
			l.err = fmt.Errorf("renewing the lease: %w", err)
			close(l.lost)
			return
		}
	}
}

// Lost is closed when the lease is found lost: this server must stop
// acting as the active one. Err then says why.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err is why the lease was lost.
func (l *Lease) Err() error { return l.err }

// Release gives the lease up, for a standby to take at once.
func (l *Lease) Release() {
	l.once.Do(func() {
		l.stop()
		<-l.done
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l.conn.ExecContext(ctx, l.s.rebind(`SELECT pg_advisory_unlock(?)`), leaseLock)
		l.conn.Close()
	})
}

// fence checks, in a commit's transaction, that the lease is still this
// server's; the row lock it takes makes a takeover wait for the commit.
func (s *Store) fence(ctx context.Context, tx *sql.Tx) error {
	if s.epoch == 0 {
		return nil
	}
	var epoch int64
	if err := tx.QueryRowContext(ctx, s.rebind(`SELECT epoch FROM lease WHERE id = 1 FOR SHARE`)).Scan(&epoch); err != nil {
		return fmt.Errorf("checking the lease: %w", err)
	}
	if epoch != s.epoch {
		return fmt.Errorf("%w at epoch %d (this server's is %d): nothing of this round was written", ErrFenced, epoch, s.epoch)
	}
	return nil
}
