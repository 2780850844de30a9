package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"
)

// TestPool checks which groups a Pool keeps and what the next job using one
// sees: under cgroup v1 an emptied group is handed out again for its limit
// with its peak reset, unless the kernel killed in it for memory; under
// cgroup v2 none is kept.
func TestPool(t *testing.T) {
	fds := openFiles(t)
	p := NewPool(fmt.Sprintf("memlimit-test-%d-pool-", os.Getpid()))
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("cleanup Close: %v", err)
		}
	})
	newGroup := func(limit int64) *Group {
		t.Helper()
		g, err := p.New(limit)
		if err != nil {
			t.Fatalf("New(%d): %v", limit, err)
		}
		t.Cleanup(func() { g.Close() })
		requireCgroup(t, g)
		return g
	}
	// run runs a payload in g and returns g's Stats.
	run := func(g *Group, name string, args ...string) (int64, bool) {
		t.Helper()
		startIn(t, g, name, args...).Wait()
		peak, oom, err := g.Stats()
		if err != nil {
			t.Fatalf("Stats: %v", err)
		}
		return peak, oom
	}
	closeKept := func(g *Group, kept bool) {
		t.Helper()
		if err := g.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		_, err := os.Stat(g.Path())
		if kept && err != nil || !kept && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after Close, stat %s: %v; want it kept: %v", g.Path(), err, kept)
		}
	}

	first := newGroup(512 * mib)
	v1 := first.Mode() == ModeCgroup1
	t.Logf("mode %s", first.Mode())
	if peak, _ := run(first, "/usr/bin/python3", "-c", allocate(100)); peak < 100*mib {
		t.Fatalf("peak of the first job %d, want >= 100 MiB", peak)
	}
	closeKept(first, v1)

	second := newGroup(512 * mib)
	if (second.Path() == first.Path()) != v1 {
		t.Fatalf("the second group of the limit is %s, the first %s: want the same only under cgroup v1", second.Path(), first.Path())
	}
	if peak, oom := run(second, "true"); peak >= 100*mib || oom {
		t.Fatalf("the next job in the group: peak %d MiB, OOM-killed %v; want its own small peak", peak/mib, oom)
	}
	other := newGroup(256 * mib)
	if other.Path() == first.Path() {
		t.Fatalf("a group of another limit is the kept %s", first.Path())
	}

	// A group the kernel killed in for memory is removed.
	killed := newGroup(64 * mib)
	if _, oom := run(killed, "/usr/bin/python3", "-c", allocate(400)); !oom {
		t.Fatal("the job over its limit was not OOM-killed")
	}
	closeKept(killed, false)
	after := newGroup(64 * mib)
	if _, oom := run(after, "true"); oom {
		t.Fatal("the job after one OOM-killed reads as OOM-killed")
	}
	closeKept(after, v1)

	// A group whose limit its job changed (here lowered: raising it would
	// need the swap limit raised first) is removed.
	changed := newGroup(64 * mib)
	run(changed, "true")
	if v1 {
		if err := writeFile(changed.file("memory.limit_in_bytes"), fmt.Sprint(32*mib)); err != nil {
			t.Fatal(err)
		}
	}
	closeKept(changed, false)

	// Closing the pool removes the groups it kept, and those closed after.
	closeKept(second, v1)
	if err := p.Close(); err != nil {
		t.Fatalf("Close of the pool: %v", err)
	}
	if _, err := os.Stat(second.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after the pool's Close, stat %s: %v, want not exist", second.Path(), err)
	}
	closeKept(other, false)
	// The files kept open with the groups are closed with them.
	if got := openFiles(t); got != fds {
		t.Fatalf("%d files open once the pool and its groups are closed, %d before", got, fds)
	}
}

// openFiles counts this process's open files.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}
