package tests

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// unavailable skips a test that cannot set up a fault it needs (err, out
// being what the attempt said), or fails it under RBS_TEST_REQUIRE_ALL=1.
func unavailable(t *testing.T, what string, err error, out []byte) {
	t.Helper()
	if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
		t.Fatalf("%s is required (RBS_TEST_REQUIRE_ALL=1): %v %s", what, err, out)
	}
	t.Skipf("cannot %s (%v %s); set RBS_TEST_REQUIRE_ALL=1 to make this a failure", what, err, out)
}

// netLink is a network namespace joined to the test's own by a veth pair
// on a private link-local /30. A process run in it (Exec) reaches the
// test's network at HostIP, and only while the link is up.
type netLink struct {
	ns, host, peer string
	HostIP         string
}

var netLinks atomic.Int32

// newNetLink creates a namespace and its link for the test's life.
func newNetLink(t *testing.T) *netLink {
	t.Helper()
	requireTool(t, "ip")
	n := (os.Getpid()+int(netLinks.Add(1)))%250 + 1
	l := &netLink{
		ns:     fmt.Sprintf("rbs-test-%d", n),
		host:   fmt.Sprintf("rbsh%d", n),
		peer:   fmt.Sprintf("rbsw%d", n),
		HostIP: fmt.Sprintf("169.254.%d.1", n),
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", l.host).Run()
		exec.Command("ip", "netns", "del", l.ns).Run()
	})
	steps := [][]string{
		{"netns", "add", l.ns},
		{"link", "add", l.host, "type", "veth", "peer", "name", l.peer},
		{"link", "set", l.peer, "netns", l.ns},
		{"addr", "add", l.HostIP + "/30", "dev", l.host},
		{"link", "set", l.host, "up"},
		{"-n", l.ns, "addr", "add", fmt.Sprintf("169.254.%d.2/30", n), "dev", l.peer},
		{"-n", l.ns, "link", "set", l.peer, "up"},
		{"-n", l.ns, "link", "set", "lo", "up"},
	}
	for i, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			if i == 0 {
				unavailable(t, "create a network namespace", err, out)
			}
			t.Fatalf("ip %s: %v %s", strings.Join(s, " "), err, out)
		}
	}
	return l
}

// Exec is the prefix that runs a command in the namespace.
func (l *netLink) Exec() []string { return []string{"ip", "netns", "exec", l.ns} }

// Cut takes the link down: packets either way are dropped.
func (l *netLink) Cut(t *testing.T) { l.ip(t, "link", "set", l.host, "down") }

// Restore brings the link up again.
func (l *netLink) Restore(t *testing.T) { l.ip(t, "link", "set", l.host, "up") }

// Lossy drops each packet in and out of the namespace with probability p.
func (l *netLink) Lossy(t *testing.T, p float64) {
	t.Helper()
	for _, chain := range []string{"INPUT", "OUTPUT"} {
		args := append(l.Exec(), "iptables", "-A", chain, "-m", "statistic", "--mode", "random", "--probability", fmt.Sprint(p), "-j", "DROP")
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			unavailable(t, "drop packets at random with iptables", err, out)
		}
	}
}

func (l *netLink) ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
	}
}

// delayRelay relays connections from ip to target (see relay), holding
// every chunk of bytes for delay in each direction, in order: a slow link
// the kernel here cannot make (it has no netem). It returns the address to
// dial.
func delayRelay(t *testing.T, ip, target string, delay time.Duration) string {
	t.Helper()
	slow := func(dst io.Writer, src io.Reader) { delayed(dst, src, delay) }
	return relay(t, ip, target, slow, slow)
}

// delayed copies src to dst, each chunk written delay after it was read.
func delayed(dst io.Writer, src io.Reader, delay time.Duration) {
	type chunk struct {
		due time.Time
		b   []byte
	}
	queue := make(chan chunk, 4096)
	go func() {
		defer close(queue)
		for {
			b := make([]byte, 32<<10)
			n, err := src.Read(b)
			if n > 0 {
				queue <- chunk{time.Now().Add(delay), b[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.b); err != nil {
			for range queue {
			}
			return
		}
	}
}

// A worker cut off by its network, not dead, while it runs a job and a
// Bazel action: after the worker timeout the job is requeued and the action
// sent to another worker, and both finish there. When the link comes back,
// the cut-off worker's results of the same work, finished meanwhile, are
// refused: the job ended once, in its second attempt, with that attempt's
// output, and the action counts once, with the other worker's result.
func TestWorkerPartitioned(t *testing.T) {
	link := newNetLink(t)
	ws := newBazelWorkspace(t)
	dir := t.TempDir()
	actionRuns, releaseAction := filepath.Join(dir, "action-runs"), filepath.Join(dir, "release-action")
	build := fmt.Sprintf(`genrule(
    name = "slow",
    outs = ["slow.txt"],
    cmd = "echo ran >> %[1]s; while [ ! -e %[2]s ]; do sleep 0.05; done; echo done > $@; echo ended >> %[1]s",
)
`, actionRuns, releaseAction)
	if err := os.WriteFile(filepath.Join(ws.dir, "slow", "BUILD"), []byte(build), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token", "partition-token", "--listen", "0.0.0.0:0", "--worker-timeout", "3s")
	_, port, _ := net.SplitHostPort(srv.Addr)
	cutOff := launchWorker(t, srv, net.JoinHostPort(link.HostIP, port), link.Exec(), "w1", "--job-slots", "1", "--action-slots", "1")

	file, record := ran(t)
	release := filepath.Join(t.TempDir(), "release")
	job := submit(t, srv, "--", "sh", "-c", record+`; echo "start $RBS_ATTEMPT"; while [ ! -e `+release+` ]; do sleep 0.05; done; echo "end $RBS_ATTEMPT"`)
	waitFor(t, srv, job, "RUNNING on w1", func(j jobView) bool { return j.State == "RUNNING" && strings.Join(j.Workers, ",") == "w1" })
	type result struct {
		out string
		err error
	}
	built := make(chan result, 1)
	go func() {
		out, err := ws.bazel("build", "--remote_executor=grpc://"+srv.Addr, "--remote_header=Authorization=Bearer partition-token", "//slow:slow")
		built <- result{out, err}
	}()
	waitLines := func(path, line string, n int) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d lines %q in %s", n, line, filepath.Base(path)), func() bool {
			b, _ := os.ReadFile(path)
			return strings.Count(string(b), line+"\n") >= n
		}, func() string { b, _ := os.ReadFile(path); return string(b) })
	}
	waitLines(actionRuns, "ran", 1)

	startWorker(t, srv, "w2", "--job-slots", "1", "--action-slots", "1")
	link.Cut(t)
	// The job runs again on w2, and so does the action.
	j := waitFor(t, srv, job, "RUNNING on w2", func(j jobView) bool { return j.State == "RUNNING" && strings.Join(j.Workers, ",") == "w2" })
	if j.Attempts != 2 {
		t.Fatalf("job %s after the cut: %+v; want its second attempt", job, j)
	}
	waitLines(actionRuns, "ran", 2)
	// Both copies of each finish; w1's reports wait for the link.
	for _, f := range []string{release, releaseAction} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := <-built
	if r.err != nil {
		t.Fatalf("the build failed across the partition: %v\n%s", r.err, r.out)
	}
	rbs(t, srv, "job", "wait", job)
	waitLines(actionRuns, "ended", 2)
	eventually(t, "w1 to end its copy of the job", func() bool { return strings.Contains(cutOff.log.String(), `msg="job ended"`) }, cutOff.log.String)

	link.Restore(t)
	eventually(t, "w1 to register again", func() bool { return strings.Count(cutOff.log.String(), "msg=registered") >= 2 }, cutOff.log.String)
	// A gang submitted now runs on both workers: once it has ended, w1's
	// stale reports, sent first on its new stream, have been dealt with.
	after := submit(t, srv, "--nodes", "2", "--", "true")
	rbs(t, srv, "job", "wait", after)
	if j := show(t, srv, after); j.State != "COMPLETED" {
		t.Fatalf("the gang after the partition: %+v", j)
	}

	if j = show(t, srv, job); j.State != "COMPLETED" || j.Attempts != 2 || strings.Join(j.Workers, ",") != "w2" {
		t.Fatalf("job %s: %+v; want COMPLETED in its second attempt, on w2", job, j)
	}
	logs := rbs(t, srv, "job", "logs", job)
	if !strings.HasSuffix(logs, "start 2\nend 2\n") || strings.Contains(logs, "end 1") {
		t.Fatalf("job %s's output %q: want attempt 2's end, and nothing of w1's stale attempt", job, logs)
	}
	if b, _ := os.ReadFile(file); strings.Count(string(b), "\n") != 2 {
		t.Fatalf("the job's runs: %q; want its two attempts", b)
	}
	_, samples := scrape(t, srv, "Bearer partition-token")
	if got := samples[`rbs_execute_phase_seconds_count{phase="execution"}`]; got != 1 {
		t.Fatalf("%v executions counted, want 1: w1's stale result is not counted", got)
	}
	got, err := os.ReadFile(filepath.Join(ws.dir, "bazel-bin", "slow", "slow.txt"))
	if err != nil || string(got) != "done\n" {
		t.Fatalf("slow.txt = %q, %v", got, err)
	}
}

// Workers whose link to the server is slow (200 ms each way) and lossy
// (20% of packets dropped, in and out) run a Bazel build's actions, jobs, an
// array and a gang: every one completes, each job and task runs once, and
// the build is green with the right outputs.
func TestWorkersOnSlowLossyLink(t *testing.T) {
	link := newNetLink(t)
	ws := newBazelWorkspace(t)
	srv := startServer(t, "--token", "lossy-token", "--listen", "0.0.0.0:0")
	relay := delayRelay(t, link.HostIP, srv.Addr, 200*time.Millisecond)
	link.Lossy(t, 0.2)
	for _, name := range []string{"w1", "w2"} {
		launchWorker(t, srv, relay, link.Exec(), name, "--cpus", "4", "--job-slots", "4", "--action-slots", "2")
	}

	type result struct {
		out string
		err error
	}
	built := make(chan result, 1)
	go func() {
		out, err := ws.bazel("test", "--remote_executor=grpc://"+srv.Addr, "--remote_header=Authorization=Bearer lossy-token", "//:all")
		built <- result{out, err}
	}()
	file, record := ran(t)
	var ids []string
	for range 10 {
		ids = append(ids, submit(t, srv, "--", "sh", "-c", record+"; seq 1 2000"))
	}
	const tasks = 20
	ids = append(ids, submit(t, srv, "--array", fmt.Sprintf("0-%d%%4", tasks-1), "--", "sh", "-c", record))
	// Rank 0 drives a gang: it waits for rank 1 to have run.
	ids = append(ids, submit(t, srv, "--nodes", "2", "--", "sh", "-c", record+`; if [ "$RBS_NODE_RANK" = 0 ]; then while ! grep -q "^$RBS_JOB_ID.-.1$" `+file+`; do sleep 0.05; done; fi`))
	rbs(t, srv, append([]string{"job", "wait"}, ids...)...)

	var listed []jobView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--history", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	for _, j := range listed {
		if j.State != "COMPLETED" || j.Attempts != 1 {
			t.Errorf("job %s: %+v; want COMPLETED in its first attempt", j.ID, j)
		}
	}
	for _, id := range ids[:10] {
		if got := rbs(t, srv, "job", "logs", id); strings.Count(got, "\n") != 2000 || !strings.HasSuffix(got, "\n2000\n") {
			t.Errorf("job %s's output has %d lines, want seq's 2000", id, strings.Count(got, "\n"))
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		if seen[l] {
			t.Errorf("%s ran twice", l)
		}
		seen[l] = true
	}
	if want := 10 + tasks + 2; len(seen) != want {
		t.Errorf("%d runs, want %d", len(seen), want)
	}
	r := <-built
	if r.err != nil {
		t.Fatalf("the build over the lossy link failed: %v\n%s", r.err, r.out)
	}
	got, err := os.ReadFile(filepath.Join(ws.dir, "bazel-bin", "counted.txt"))
	if err != nil || !strings.Contains(string(got), "ALPHA\nBETA\nGAMMA\n") {
		t.Fatalf("counted.txt = %q, %v", got, err)
	}
}
