package memlimit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread, the one whose groups
// /proc/self/cgroup shows, and runs what a test sends onMain on it.
func init() { runtime.LockOSThread() }

var onMain = make(chan func())

func TestMain(m *testing.M) {
	done := make(chan int)
	go func() { done <- m.Run() }()
	for {
		select {
		case f := <-onMain:
			f()
		case code := <-done:
			os.Exit(code)
		}
	}
}

// runOnMain runs f on the main thread.
func runOnMain(f func()) {
	ran := make(chan struct{})
	onMain <- func() { f(); close(ran) }
	<-ran
}

// inGroupV1 moves the calling thread, which must be locked, into g, and
// returns how to move it back.
func inGroupV1(t *testing.T, g *Group) (back func()) {
	t.Helper()
	tid := strconv.Itoa(unix.Gettid())
	if err := writeFile(g.file("tasks"), tid); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := writeFile(filepath.Join(filepath.Dir(g.dir), "tasks"), tid); err != nil {
			t.Error(err)
		}
	}
}

// v1Group is newKernelGroup for the tests that need cgroup v1, where Start
// puts a thread of this process in a group for a moment.
func v1Group(t *testing.T) *Group {
	g := newKernelGroup(t, 0)
	if g.Mode() != ModeCgroup1 {
		t.Skipf("a %s group: threads of one process are not put in different groups", g.Mode())
	}
	return g
}

// While the main thread is in a group (as Start may hold it), this
// process's groups found from another thread are its own, and a group made
// then is made beside that group, not inside it: inside, the thread that
// starts its job would go back into the first group, and be killed when
// that group's job ends.
func TestNewBesideAGroupAThreadIsIn(t *testing.T) {
	a := v1Group(t)
	var back func()
	runOnMain(func() { back = inGroupV1(t, a) })
	defer runOnMain(back)
	own, _ := os.ReadFile("/proc/self/cgroup")
	if !strings.Contains(string(own), "/"+filepath.Base(a.Path())+"\n") {
		t.Fatalf("the main thread is not in %s:\n%s", a.Path(), own)
	}
	// Found anew, now, rather than as New found them before.
	old := parents
	parents = sync.OnceValue(findParents)
	defer func() { parents = old }()
	b := newKernelGroup(t, 0)
	if filepath.Dir(b.Path()) != filepath.Dir(a.Path()) {
		t.Fatalf("made %s, want it beside %s", b.Path(), a.Path())
	}
}

// Closing a group that a thread of this process is in reports the thread
// and kills nothing: neither this process nor what that thread forked.
func TestCloseSparesThisProcess(t *testing.T) {
	g := v1Group(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	back := inGroupV1(t, g)
	// Forked by the thread in the group, as another part of this process
	// could have done: it must not die with the group while that thread
	// is there. It exits 3 once its stdin closes.
	child := exec.Command("sh", "-c", "read -r _; exit 3")
	stdin, err := child.StdinPipe()
	if err == nil {
		err = child.Start()
	}
	if err != nil {
		back()
		t.Fatal(err)
	}
	err = g.Close()
	back()
	if err == nil || !strings.Contains(err.Error(), "a thread of this process") {
		t.Fatalf("Close with a thread of this process in the group: %v", err)
	}
	stdin.Close()
	if err := child.Wait(); child.ProcessState.ExitCode() != 3 {
		t.Fatalf("what a thread of this process forked in the group ended with %v, want exit status 3", err)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close once the thread left: %v", err)
	}
}

// Sweep removes a stale group with the groups inside it (as New made them
// before it read the calling thread's groups), and a stale group it cannot
// remove does not keep it from the others.
func TestSweepNestedAndPastAFailure(t *testing.T) {
	prefix := fmt.Sprintf("memlimit-sweep2-%d-", os.Getpid())
	stuck := v1Group(t)
	outer, err := New(prefix+"outer", 0)
	if err != nil {
		t.Fatal(err)
	}
	inner := filepath.Join(outer.Path(), prefix+"inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := (&Group{dir: inner, mode: ModeCgroup1}).Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	// The stuck group holds a thread of this process (the main thread),
	// which Sweep must neither kill nor let stop it.
	var back func()
	runOnMain(func() { back = inGroupV1(t, stuck) })
	n, err := Sweep(func(name string) bool { return strings.HasPrefix(name, prefix) || name == filepath.Base(stuck.Path()) })
	runOnMain(back)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "a thread of this process") {
		t.Fatalf("Sweep = %d, %v; want 1 removed and the stuck group reported", n, err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the inner group's process survived")
	}
	if _, err := os.Stat(outer.Path()); !os.IsNotExist(err) {
		t.Fatalf("the stale group is still there: %v", err)
	}
}

// Jobs started at once from many goroutines each end with a group that
// holds no thread of this process: Start moves one thread at a time (see
// Start for what Linux does otherwise).
func TestConcurrentStartsLeaveNoThreadBehind(t *testing.T) {
	v1Group(t)
	const goroutines, starts = 8, 200
	errs := make(chan error, goroutines)
	for i := range goroutines {
		go func() {
			for n := range starts {
				g, err := New(fmt.Sprintf("memlimit-conc-%d-%d-%d", os.Getpid(), i, n), 0)
				if err != nil {
					errs <- err
					return
				}
				cmd := exec.Command("true")
				if err = g.Start(cmd, (*exec.Cmd).Start); err == nil {
					err = cmd.Wait()
				}
				if cerr := g.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range goroutines {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
