package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

const mib = 1 << 20

var groupSeq atomic.Int64

// newKernelGroup creates a real cgroup-backed group, skipping (or, with
// RBS_TEST_REQUIRE_ALL=1, failing) where only rlimit mode is available.
func newKernelGroup(t *testing.T, limit int64) *Group {
	t.Helper()
	name := fmt.Sprintf("memlimit-test-%d-%d", os.Getpid(), groupSeq.Add(1))
	g, err := New(name, limit)
	if err != nil {
		t.Fatalf("New(%q, %d): %v", name, limit, err)
	}
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("cleanup Close: %v", err)
		}
	})
	t.Logf("mode %s, path %s", g.Mode(), g.Path())
	requireCgroup(t, g)
	if filepath.Base(g.Path()) != name {
		t.Fatalf("Path() = %q, want a directory named %q", g.Path(), name)
	}
	return g
}

// requireCgroup skips the test (or, with RBS_TEST_REQUIRE_ALL=1, fails
// it) unless g is backed by a cgroup.
func requireCgroup(t *testing.T, g *Group) {
	t.Helper()
	if g.Mode() == ModeRlimit {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatal("no cgroup available (mode rlimit) and RBS_TEST_REQUIRE_ALL=1")
		}
		t.Skip("no cgroup available here (mode rlimit)")
	}
}

// startIn starts the command, moves it into g, and then closes its stdin.
// Moving a process takes a while (milliseconds on some kernels) and memory
// it touches before the move is charged elsewhere, so a payload whose
// memory the test measures reads its stdin to the end before allocating.
func startIn(t *testing.T, g *Group, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("Add(%d): %v", cmd.Process.Pid, err)
	}
	stdin.Close()
	return cmd
}

// allocate is a Python payload that waits for its stdin to close (see
// startIn), then allocates n MiB and writes to every page of it, so that
// the pages are resident: the zeroed pages of a bare bytearray(n) may never
// be.
func allocate(n int) string {
	return fmt.Sprintf("import sys; sys.stdin.read(); b = bytearray(%d << 20); b[::4096] = b'x' * len(b[::4096])", n)
}

func killedBy(err error) (syscall.Signal, bool) {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return 0, false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

func TestNewRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", ".", "..", "a/b", "/abs", "trailing/", "nul\x00"} {
		g, err := New(name, 0)
		if err == nil {
			g.Close()
			t.Errorf("New(%q) succeeded, want error", name)
			continue
		}
		if want := fmt.Sprintf("%q", name); !strings.Contains(err.Error(), want) {
			t.Errorf("New(%q) error %q does not quote the name", name, err)
		}
	}
	if _, err := New("ok", -1); err == nil {
		t.Error("New with a negative limit succeeded, want error")
	}
}

func TestOOMKill(t *testing.T) {
	g := newKernelGroup(t, 64*mib)
	cmd := startIn(t, g, "/usr/bin/python3", "-c", allocate(400))
	err := cmd.Wait()
	if sig, ok := killedBy(err); !ok || sig != syscall.SIGKILL {
		t.Errorf("Wait = %v, want the process killed by SIGKILL", err)
	}
	peak, oom, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("peak %d MiB, oomKilled %v", peak/mib, oom)
	if !oom {
		t.Error("oomKilled = false, want true")
	}
	if peak > 64*mib {
		t.Errorf("peak = %d, above the 64 MiB limit", peak)
	}
}

func TestWithinLimit(t *testing.T) {
	g := newKernelGroup(t, 512*mib)
	cmd := startIn(t, g, "/usr/bin/python3", "-c", allocate(100))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	peak, oom, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	t.Logf("peak %d MiB, oomKilled %v", peak/mib, oom)
	if oom {
		t.Error("oomKilled = true, want false")
	}
	if peak < 100*mib {
		t.Errorf("peak = %d, want >= 100 MiB", peak)
	}
}

func TestCloseKillsLeftoversAndRemovesGroup(t *testing.T) {
	g := newKernelGroup(t, 0)
	cmd := startIn(t, g, "sleep", "30")
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()

	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(g.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, stat %s: %v, want not exist", g.Path(), err)
	}
	if sig, ok := killedBy(<-waited); !ok || sig != syscall.SIGKILL {
		t.Errorf("sleep was not killed by SIGKILL")
	}
	if err := g.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestRlimitFallback(t *testing.T) {
	old, oldParents := procCgroup, parents
	procCgroup, parents = filepath.Join(t.TempDir(), "no-such-file"), sync.OnceValue(findParents)
	defer func() { procCgroup, parents = old, oldParents }()

	g, err := New("fallback", 256*mib)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if g.Mode() != ModeRlimit || g.Path() != "" {
		t.Fatalf("Mode() = %q, Path() = %q; want rlimit mode and no path", g.Mode(), g.Path())
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	var got unix.Rlimit
	if err := unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_AS, nil, &got); err != nil {
		t.Fatal(err)
	}
	if got.Cur != 256*mib || got.Max != 256*mib {
		t.Errorf("RLIMIT_AS = %+v, want 256 MiB", got)
	}
	if peak, oom, err := g.Stats(); peak != 0 || oom || err != nil {
		t.Errorf("Stats = %d, %v, %v; want 0, false, nil", peak, oom, err)
	}
	if err := g.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestStatsFiles checks Stats against fake cgroup files, covering the
// cgroup v2 layout this machine may not have.
func TestStatsFiles(t *testing.T) {
	tests := []struct {
		name     string
		mode     Mode
		files    map[string]string
		wantPeak int64
		wantOOM  bool
	}{
		{"v2 peak", ModeCgroup2, map[string]string{
			"memory.peak":   "123456\n",
			"memory.events": "low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\noom_group_kill 0\n",
		}, 123456, true},
		{"v2 no oom", ModeCgroup2, map[string]string{
			"memory.peak":   "42\n",
			"memory.events": "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
		}, 42, false},
		{"v2 without memory.peak", ModeCgroup2, map[string]string{
			"memory.current": "777\n",
			"memory.events":  "oom_kill 0\n",
		}, 777, false},
		{"v1", ModeCgroup1, map[string]string{
			"memory.max_usage_in_bytes": "67108864\n",
			"memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		}, 64 * mib, true},
		{"v1 old kernel without oom_kill", ModeCgroup1, map[string]string{
			"memory.max_usage_in_bytes": "1000\n",
			"memory.oom_control":        "oom_kill_disable 0\nunder_oom 0\n",
		}, 1000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			g := &Group{mode: tt.mode, dir: dir}
			peak, oom, err := g.Stats()
			if err != nil {
				t.Fatalf("Stats: %v", err)
			}
			if peak != tt.wantPeak || oom != tt.wantOOM {
				t.Errorf("Stats = %d, %v; want %d, %v", peak, oom, tt.wantPeak, tt.wantOOM)
			}
		})
	}

	g := &Group{mode: ModeCgroup1, dir: t.TempDir()}
	if _, _, err := g.Stats(); err == nil || !strings.Contains(err.Error(), "memory.max_usage_in_bytes") {
		t.Errorf("Stats on an empty dir: %v, want an error naming memory.max_usage_in_bytes", err)
	}
}

func TestCgroupPath(t *testing.T) {
	const v1 = "9:name=systemd:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/\n"
	const v2 = "0::/system.slice/rbs.service\n"
	tests := []struct {
		data, controller, want string
		ok                     bool
	}{
		{v1, "memory", "/process_api/abc", true},
		{v1, "cpuacct", "/x", true},
		{v1, "", "/", true},
		{v1, "pids", "", false},
		{v2, "", "/system.slice/rbs.service", true},
		{v2, "memory", "", false},
	}
	for _, tt := range tests {
		got, ok := cgroupPath([]byte(tt.data), tt.controller)
		if got != tt.want || ok != tt.ok {
			t.Errorf("cgroupPath(%q, %q) = %q, %v; want %q, %v", tt.data, tt.controller, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFindMount(t *testing.T) {
	const mi = `22 1 0:20 / /sys rw,nosuid - sysfs sysfs rw
34 30 0:31 / /sys/fs/cgroup/memory rw,relatime shared:5 - cgroup cgroup rw,memory
35 30 0:32 / /sys/fs/cgroup/cpu\040x rw,relatime - cgroup cgroup rw,cpu
40 30 0:37 /kubepods/pod1 /sys/fs/cgroup rw,relatime - cgroup2 cgroup2 rw,nsdelegate
`
	tests := []struct {
		fstype, opt, wantMP, wantRoot string
		ok                            bool
	}{
		{"cgroup", "memory", "/sys/fs/cgroup/memory", "/", true},
		{"cgroup", "cpu", "/sys/fs/cgroup/cpu x", "/", true},
		{"cgroup2", "", "/sys/fs/cgroup", "/kubepods/pod1", true},
		{"cgroup", "pids", "", "", false},
	}
	for _, tt := range tests {
		mp, root, ok := findMount([]byte(mi), tt.fstype, tt.opt)
		if mp != tt.wantMP || root != tt.wantRoot || ok != tt.ok {
			t.Errorf("findMount(%q, %q) = %q, %q, %v; want %q, %q, %v", tt.fstype, tt.opt, mp, root, ok, tt.wantMP, tt.wantRoot, tt.ok)
		}
	}
}

func TestSweepRemovesStaleGroups(t *testing.T) {
	stale, err := New(fmt.Sprintf("memlimit-sweep-%d", os.Getpid()), 0)
	if err != nil {
		t.Fatal(err)
	}
	if stale.Mode() == ModeRlimit {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatal("no cgroup available (RBS_TEST_REQUIRE_ALL=1)")
		}
		t.Skip("no cgroup available")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := stale.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	keep, err := New(fmt.Sprintf("memlimit-keep-%d", os.Getpid()), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	n, err := Sweep(func(name string) bool { return strings.HasPrefix(name, "memlimit-sweep-") })
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the stale group's process survived")
	}
	if _, err := os.Stat(stale.Path()); !os.IsNotExist(err) {
		t.Fatalf("stale group still there: %v", err)
	}
	if _, err := os.Stat(keep.Path()); err != nil {
		t.Fatalf("Sweep removed a group it was not asked to: %v", err)
	}
}

func TestAddExitedProcess(t *testing.T) {
	g, err := New(fmt.Sprintf("memlimit-exited-%d", os.Getpid()), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("adding a process that already exited: %v", err)
	}
}

// TestStartInGroup: a process Start starts is in the group from its first
// instruction, not moved there later: it finds itself there at once, and
// its memory counts in the group's peak without waiting to be moved.
func TestStartInGroup(t *testing.T) {
	g := newKernelGroup(t, 512*mib)
	var out strings.Builder
	cmd := exec.Command("/usr/bin/python3", "-c", "import sys; print(open('/proc/self/cgroup').read()); b = bytearray(64 << 20); b[::4096] = b'x' * len(b[::4096])")
	cmd.Stdout = &out
	if !g.PlacesAtStart() {
		t.Fatalf("a %s group does not place processes as they start", g.Mode())
	}
	if err := g.Start(cmd, (*exec.Cmd).Start); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	rel := "/" + filepath.Base(g.Path())
	if !strings.Contains(out.String(), rel+"\n") {
		t.Errorf("the process found itself in\n%s\nwant a group ending %s", out.String(), rel)
	}
	peak, _, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if peak < 64*mib {
		t.Errorf("peak %d MiB, want at least the 64 MiB the process wrote", peak/mib)
	}
	threads, err := filepath.Glob("/proc/self/task/*/cgroup")
	if err != nil || len(threads) == 0 {
		t.Fatalf("this process's threads: %v %v", threads, err)
	}
	for _, f := range threads {
		if own, err := os.ReadFile(f); err == nil && strings.Contains(string(own), rel+"\n") {
			t.Errorf("a thread of this process stayed in the group (%s):\n%s", f, own)
		}
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 3, 511, 512, 513, 5000} {
		path := filepath.Join(dir, fmt.Sprint(size))
		want := strings.Repeat("x", size)
		if err := os.WriteFile(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := readFile(path); err != nil || string(got) != want {
			t.Errorf("readFile of %d bytes: %d bytes, %v", size, len(got), err)
		}
	}
	if _, err := readFile(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "none") {
		t.Errorf("readFile of a missing file: %v, want not exist, naming it", err)
	}
}
