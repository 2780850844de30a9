package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rbs-build/rbs/jobs/store/pgtest"
	"github.com/rbs-build/rbs/proto/jobspb"
)

// openPostgres opens n stores on one new database, as n servers would.
func openPostgres(t *testing.T, n int) []*Store {
	t.Helper()
	pg := pgtest.Shared(t)
	u, err := ParsePostgresURL(pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []*Store
	for range n {
		s, err := OpenPostgres(context.Background(), u, pg.PasswordFile)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// acquireAsync runs b.Acquire and returns the channel its lease arrives on
// and the channel the active server's address does while b stands by.
func acquireAsync(t *testing.T, b *Store, address string) (<-chan *Lease, <-chan string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	leases, actives := make(chan *Lease, 1), make(chan string, 16)
	go func() {
		l, err := b.Acquire(ctx, address, func(active string) { actives <- active })
		if err != nil && ctx.Err() == nil {
			t.Error(err)
		}
		leases <- l
	}()
	return leases, actives
}

func TestLeaseReleasedIsTakenWithANewEpoch(t *testing.T) {
	s := openPostgres(t, 2)
	a, b := s[0], s[1]
	la, err := a.Acquire(context.Background(), "a:8980", nil)
	if err != nil {
		t.Fatal(err)
	}
	leases, actives := acquireAsync(t, b, "b:8980")
	if got := <-actives; got != "a:8980" {
		t.Fatalf("the standby sees %q active, want a:8980", got)
	}
	if err := a.Commit(&Batch{NextID: 5}); err != nil {
		t.Fatalf("the active's commit: %v", err)
	}
	la.Release()
	lb := <-leases
	if lb.Epoch != la.Epoch+1 {
		t.Fatalf("epochs %d then %d, want one more", la.Epoch, lb.Epoch)
	}
	defer lb.Release()
	if err := a.Commit(&Batch{NextID: 6}); !errors.Is(err, ErrFenced) {
		t.Fatalf("a commit at the old epoch: %v, want ErrFenced", err)
	}
	if err := b.Commit(&Batch{NextID: 7}); err != nil {
		t.Fatalf("the new active's commit: %v", err)
	}
	st, err := b.Load()
	if err != nil || st.NextID != 7 {
		t.Fatalf("next id %v, %v; want 7 (the fenced commit wrote nothing)", st, err)
	}
}

// A holder that stops renewing (a stopped process) loses the lease: the
// standby ends its sessions and takes over, and the old holder, resumed,
// writes nothing and finds its lease lost.
func TestStaleLeaseIsTakenOver(t *testing.T) {
	s := openPostgres(t, 2)
	a, b := s[0], s[1]
	la, err := a.Acquire(context.Background(), "a:8980", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(&Batch{Specs: map[int64]*jobspb.JobSpec{1: {Name: "j"}}, Jobs: []*jobspb.JobRecord{{Id: 1, Index: -1, State: "RUNNING"}}}); err != nil {
		t.Fatal(err)
	}
	// Stop renewing, keeping the lock's session: as SIGSTOP would.
	la.stop()
	<-la.done
	leases, _ := acquireAsync(t, b, "b:8980")
	var lb *Lease
	select {
	case lb = <-leases:
	case <-time.After(time.Minute):
		t.Fatal("the standby did not take over a lease that was not renewed")
	}
	defer lb.Release()
	if lb.Epoch != la.Epoch+1 {
		t.Fatalf("epochs %d then %d", la.Epoch, lb.Epoch)
	}
	// Resumed, the old holder's commits are refused (its session was
	// ended, and on a new one its epoch is stale).
	for range 2 {
		if err := a.Commit(&Batch{Jobs: []*jobspb.JobRecord{{Id: 1, Index: -1, State: "COMPLETED"}}}); err == nil {
			t.Fatal("the old holder committed after the takeover")
		} else if errors.Is(err, ErrFenced) {
			break
		}
	}
	var n int
	if err := b.db.QueryRow(`SELECT COUNT(*) FROM jobs WHERE epoch = $1 AND state <> 'RUNNING'`, la.Epoch).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows changed at the old epoch after the takeover, %v", n, err)
	}
}

// A holder whose sessions end (a killed process, a machine gone) frees the
// lock at once, before its lease would go stale, and finds its lease lost.
func TestLeaseOfAGoneHolderIsTakenAtOnce(t *testing.T) {
	s := openPostgres(t, 2)
	a, b := s[0], s[1]
	la, err := a.Acquire(context.Background(), "a:8980", nil)
	if err != nil {
		t.Fatal(err)
	}
	leases, actives := acquireAsync(t, b, "b:8980")
	<-actives
	if _, err := b.db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1`, a.holder); err != nil {
		t.Fatal(err)
	}
	select {
	case lb := <-leases:
		lb.Release()
	case <-time.After(staleAfter):
		t.Fatal("the lease of a gone holder was not taken before it went stale")
	}
	select {
	case <-la.Lost():
		if la.Err() == nil {
			t.Fatal("lost, with no reason")
		}
	case <-time.After(time.Minute):
		t.Fatal("the old holder did not find its lease lost")
	}
}

func TestAcquireNeedsPostgres(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Acquire(context.Background(), "a:1", nil); err == nil {
		t.Fatal("a lease on SQLite")
	}
}
