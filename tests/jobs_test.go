package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/memlimit"
)

// rbsRun runs the rbs CLI against srv and returns stdout, stderr and the
// error, without failing the test.
func rbsRun(srv *server, args ...string) (string, string, error) {
	cmd := exec.Command(rbsBin, args...)
	cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return string(out), stderr.String(), err
}

// submit runs `rbs job submit --parsable` and returns the job id.
func submit(t *testing.T, srv *server, args ...string) string {
	t.Helper()
	out := rbs(t, srv, append([]string{"job", "submit", "--parsable"}, args...)...)
	id := strings.TrimSpace(out)
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("submit printed %q, want a job id", out)
	}
	return id
}

type jobView struct {
	ID              string   `json:"id"`
	State           string   `json:"state"`
	PendingReason   string   `json:"pending_reason"`
	ExitCode        int      `json:"exit_code"`
	Attempts        int      `json:"attempts"`
	Workers         []string `json:"workers"`
	PeakMemoryBytes int64    `json:"peak_memory_bytes"`
	OutputBytes     int64    `json:"output_bytes"`
	OOMKilled       bool     `json:"oom_killed"`
	Borrowed        bool     `json:"borrowed"`
	SubmitTime      *string  `json:"submit_time"`
	StartTime       *string  `json:"start_time"`
	EndTime         *string  `json:"end_time"`
	Priority        struct {
		Base, Queue, Age, Total int64
	} `json:"priority"`
	Dependencies []struct {
		Kind, ID, State string
		NeverSatisfied  bool `json:"never_satisfied"`
	} `json:"dependencies"`
}

func show(t *testing.T, srv *server, id string) jobView {
	t.Helper()
	var j jobView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil {
		t.Fatal(err)
	}
	return j
}

// waitFor polls a job until cond holds.
func waitFor(t *testing.T, srv *server, id string, what string, cond func(jobView) bool) jobView {
	t.Helper()
	var j jobView
	eventually(t, "job "+id+" to become "+what, func() bool {
		j = show(t, srv, id)
		return cond(j)
	}, func() string { return fmt.Sprintf("%+v", j) })
	return j
}

// eventually polls cond, a state it waits for, until it holds, failing the
// test after a minute with what describe says of the last state seen.
func eventually(t *testing.T, what string, cond func() bool, describe func() string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s: %s", what, describe())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func inState(s string) func(jobView) bool { return func(j jobView) bool { return j.State == s } }

func TestJobLifecycle(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")

	out := rbs(t, srv, "job", "submit", "--name", "hello", "--env", "GREETING=hi", "--", "sh", "-c", `echo "$GREETING from $RBS_JOB_ID"`)
	m := strings.TrimSpace(out)
	if !strings.HasPrefix(m, "Submitted job ") {
		t.Fatalf("submit printed %q", out)
	}
	id := strings.TrimPrefix(m, "Submitted job ")
	rbs(t, srv, "job", "wait", id)
	if got := rbs(t, srv, "job", "logs", id); got != "hi from "+id+"\n" {
		t.Fatalf("logs %q", got)
	}
	// The command is shown as a line to paste into a shell.
	if out := rbs(t, srv, "job", "show", id); !strings.Contains(out, `Command:     sh -c 'echo "$GREETING from $RBS_JOB_ID"'`+"\n") {
		t.Fatalf("show does not quote the command:\n%s", out)
	}
	j := show(t, srv, id)
	if j.State != "COMPLETED" || j.ExitCode != 0 || j.Attempts != 1 || len(j.Workers) != 1 || j.Workers[0] != "w1" || j.StartTime == nil || j.EndTime == nil {
		t.Fatalf("show: %+v", j)
	}
	for _, ts := range []*string{j.SubmitTime, j.StartTime, j.EndTime} {
		if _, err := time.Parse(time.RFC3339, *ts); err != nil {
			t.Fatalf("time %q is not RFC 3339", *ts)
		}
	}

	// A script, a failure, and wait's exit status.
	script := filepath.Join(t.TempDir(), "fail.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho failing >&2\nexit 4\n"), 0o755)
	bad := submit(t, srv, "--script", script)
	if _, _, err := rbsRun(srv, "job", "wait", id, bad); err == nil {
		t.Fatal("wait succeeded although a job failed")
	}
	if j := show(t, srv, bad); j.State != "FAILED" || j.ExitCode != 4 {
		t.Fatalf("failed job: %+v", j)
	}
	if got := rbs(t, srv, "job", "logs", bad); got != "failing\n" {
		t.Fatalf("stderr in logs: %q", got)
	}

	// Output larger than what the server reads at once comes back whole.
	big := submit(t, srv, "--", "seq", "1500000")
	rbs(t, srv, "job", "wait", big)
	var want strings.Builder
	for i := 1; i <= 1500000; i++ {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if got := rbs(t, srv, "job", "logs", big); got != want.String() {
		t.Fatalf("logs of a %d-byte output: %d bytes, not the same", want.Len(), len(got))
	}

	// logs -f follows until the end: the job writes "two" only once the
	// follower has printed "one".
	release := filepath.Join(t.TempDir(), "release")
	slow := submit(t, srv, "--", "sh", "-c", `echo one; while [ ! -e "$1" ]; do sleep 0.05; done; echo two`, "sh", release)
	follow := exec.Command(rbsBin, "job", "logs", "-f", slow)
	follow.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token)
	followed, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(followed)
	if first, err := lines.ReadString('\n'); err != nil || first != "one\n" {
		follow.Process.Kill()
		follow.Wait()
		t.Fatalf("logs -f printed %q first (%v), want one", first, err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(lines)
	if werr := follow.Wait(); err != nil || werr != nil || string(rest) != "two\n" {
		t.Fatalf("logs -f went on with %q (%v, %v), want two", rest, err, werr)
	}

	// TIMEOUT.
	late := submit(t, srv, "--time", "1s", "--", "sh", "-c", "echo started; sleep 60")
	if j := waitFor(t, srv, late, "TIMEOUT", inState("TIMEOUT")); j.EndTime == nil {
		t.Fatalf("timeout: %+v", j)
	}

	// cancel: running and pending.
	long := submit(t, srv, "--", "sleep", "60")
	waitFor(t, srv, long, "RUNNING", inState("RUNNING"))
	blocked := submit(t, srv, "--deps", "afterok:"+long, "--", "true")
	rbs(t, srv, "job", "cancel", long, blocked)
	waitFor(t, srv, long, "CANCELLED", inState("CANCELLED"))
	if j := show(t, srv, blocked); j.State != "CANCELLED" {
		t.Fatalf("pending job after cancel: %+v", j)
	}

	// list and queues.
	var listed []jobView
	json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--history", "--json")), &listed)
	if len(listed) != 7 {
		t.Fatalf("list --history has %d jobs, want 7", len(listed))
	}
	json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--json")), &listed)
	if len(listed) != 0 {
		t.Fatalf("list shows %d ended jobs without --history", len(listed))
	}
	var queues []struct {
		Name    string `json:"name"`
		Default bool   `json:"default"`
	}
	json.Unmarshal([]byte(rbs(t, srv, "job", "queues", "--json")), &queues)
	if len(queues) != 1 || queues[0].Name != "batch" || !queues[0].Default {
		t.Fatalf("queues %+v", queues)
	}

	// Bad input gets a clear error naming the value.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--array", "0-99%0", "--", "true"}, `"0-99%0"`},
		{[]string{"--time", "soon", "--", "true"}, `"soon"`},
		{[]string{"--deps", "afterok:99999", "--", "true"}, "99999"},
		{[]string{"--deps", "before:1", "--", "true"}, `"before:1"`},
		{[]string{"--queue", "nope", "--", "true"}, `"nope"`},
		{[]string{"--env", "NOEQUALS", "--", "true"}, `"NOEQUALS"`},
	} {
		_, stderr, err := rbsRun(srv, append([]string{"job", "submit"}, tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("submit %v: %v, stderr %q; want an error naming %s", tc.args, err, stderr, tc.want)
		}
	}
}

func TestJobArrayThrottleAndDependencies(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "8", "--job-slots", "8")
	startWorker(t, srv, "w2", "--cpus", "8", "--job-slots", "8")

	// The tasks run until the release, which comes once two of them have
	// started, as each says by a file of its own: those two overlap
	// whatever the machine's speed.
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	arr := submit(t, srv, "--array", "0-5%2", "--", "sh", "-c", `date +%s.%N; : >"$2/started-$RBS_ARRAY_INDEX"; while [ ! -e "$1" ]; do sleep 0.05; done; date +%s.%N; echo "index $RBS_ARRAY_INDEX"`, "sh", release, dir)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		started, _ := filepath.Glob(filepath.Join(dir, "started-*"))
		if len(started) > 2 {
			t.Fatalf("%d array tasks run at once under %%2: %v", len(started), started)
		}
		if len(started) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two array tasks never ran at once: %v", started)
		}
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", arr)
	type span struct{ start, end float64 }
	var spans []span
	for i := 0; i <= 5; i++ {
		lines := strings.Fields(rbs(t, srv, "job", "logs", fmt.Sprintf("%s_%d", arr, i)))
		if len(lines) != 4 || lines[3] != strconv.Itoa(i) {
			t.Fatalf("task %d output %q", i, lines)
		}
		s, _ := strconv.ParseFloat(lines[0], 64)
		e, _ := strconv.ParseFloat(lines[1], 64)
		spans = append(spans, span{s, e})
	}
	// From the tasks' own timestamps: never more than 2 at once.
	type event struct {
		t     float64
		delta int
	}
	var events []event
	for _, s := range spans {
		events = append(events, event{s.start, 1}, event{s.end, -1})
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].t != events[j].t {
			return events[i].t < events[j].t
		}
		return events[i].delta < events[j].delta
	})
	running, peak := 0, 0
	for _, e := range events {
		running += e.delta
		peak = max(peak, running)
	}
	if peak != 2 {
		t.Fatalf("at most %d array tasks ran at once, want exactly 2 under %%2", peak)
	}

	ok := submit(t, srv, "--", "true")
	fail := submit(t, srv, "--", "false")
	rbs(t, srv, "job", "wait", ok)
	rbsRun(srv, "job", "wait", fail)
	afterOK := submit(t, srv, "--deps", "afterok:"+ok, "--", "true")
	afterOKOnFail := submit(t, srv, "--deps", "afterok:"+fail, "--", "true")
	afterAny := submit(t, srv, "--deps", "afterany:"+fail, "--", "true")
	afterNotOK := submit(t, srv, "--deps", "afternotok:"+fail, "--", "true")
	afterArray := submit(t, srv, "--deps", "afterok:"+arr, "--", "true")
	rbs(t, srv, "job", "wait", afterOK, afterAny, afterNotOK, afterArray)
	j := waitFor(t, srv, afterOKOnFail, "DependencyNeverSatisfied", func(j jobView) bool { return j.PendingReason == "DependencyNeverSatisfied" })
	if j.State != "PENDING" || len(j.Dependencies) != 1 || j.Dependencies[0].State != "FAILED" {
		t.Fatalf("afterok on a failed job: %+v", j)
	}

	// A dependency waiting on a running job says Dependency.
	long := submit(t, srv, "--", "sleep", "30")
	waiting := submit(t, srv, "--deps", "afterany:"+long, "--", "true")
	waitFor(t, srv, waiting, "waiting on its dependency", func(j jobView) bool { return j.PendingReason == "Dependency" })
	rbs(t, srv, "job", "cancel", long)
	rbs(t, srv, "job", "wait", waiting)
}

func TestJobPriorityBackfillAndReasons(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "4")

	// Occupy one CPU until the release; the scheduler counts on its time
	// limit.
	dir := t.TempDir()
	release, order := filepath.Join(dir, "release"), filepath.Join(dir, "order")
	first := submit(t, srv, "--cpus", "1", "--time", "30s", "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	waitFor(t, srv, first, "RUNNING", inState("RUNNING"))
	record := func(name string) []string { return []string{"--", "sh", "-c", `echo "$1" >>"$2"`, "sh", name, order} }
	// The big job needs both CPUs: it waits, with a reservation at the end
	// of first's time limit.
	big := submit(t, srv, append([]string{"--cpus", "2", "--priority", "100", "--time", "1m"}, record("big")...)...)
	// A job without a time limit fits in the free CPU but could delay the
	// big job: it waits for Priority.
	unlimited := submit(t, srv, append([]string{"--cpus", "1"}, record("unlimited")...)...)
	if j := waitFor(t, srv, unlimited, "scheduled", func(j jobView) bool { return j.PendingReason != "" }); j.PendingReason != "Priority" {
		t.Fatalf("unlimited job: %+v", j)
	}
	// A short job fits in the gap and ends before the reservation: backfilled.
	short := submit(t, srv, "--cpus", "1", "--time", "10s", "--", "true")
	// A job no worker could ever hold is refused, naming what the worker
	// has; held on purpose it waits, and once released it waits for a
	// worker that fits, saying why it cannot start.
	_, stderr, err := rbsRun(srv, "job", "submit", "--cpus", "64", "--", "true")
	if want := "no worker can ever run this job: only 2 CPUs on w1 (asked 64)"; err == nil || !strings.Contains(stderr, want) || !strings.Contains(stderr, "--hold") {
		t.Fatalf("submitting a 64-CPU job to a 2-CPU worker: %v, %q; want %q", err, stderr, want)
	}
	tooBig := submit(t, srv, "--hold", "--cpus", "64", "--", "true")
	waitFor(t, srv, tooBig, "held", func(j jobView) bool { return j.PendingReason == "JobHeldUser" })
	if out := rbs(t, srv, "job", "show", tooBig); !strings.Contains(out, "Starts:      unknown: it is held until rbs job release "+tooBig+"\n") {
		t.Fatalf("show of a held job:\n%s", out)
	}
	if out, stderr, err := rbsRun(srv, "job", "logs", tooBig); err != nil || out != "" || !strings.Contains(stderr, "job "+tooBig+" has not started: it is PENDING (JobHeldUser)") {
		t.Fatalf("logs of a held job: %v, stdout %q, stderr %q", err, out, stderr)
	}
	if out := rbs(t, srv, "job", "release", tooBig); out != "Released job "+tooBig+"\n" {
		t.Fatalf("release printed %q", out)
	}
	if _, stderr, err := rbsRun(srv, "job", "release", tooBig); err == nil || !strings.Contains(stderr, "job "+tooBig+" is not held: it is PENDING") {
		t.Fatalf("releasing a job again: %v, %q", err, stderr)
	}

	waitFor(t, srv, short, "RUNNING (backfilled)", func(j jobView) bool { return j.State != "PENDING" })
	if j := show(t, srv, big); j.State != "PENDING" || j.PendingReason != "Resources" || j.Priority.Base != 100 {
		t.Fatalf("big job: %+v", j)
	}
	waitFor(t, srv, tooBig, "pending for want of a worker", func(j jobView) bool { return j.PendingReason == "NoWorkerFits" })
	if out := rbs(t, srv, "job", "show", tooBig); !strings.Contains(out, "Starts:      unknown: no worker can ever run it: only 2 CPUs on w1 (asked 64)\n") {
		t.Fatalf("show of a job no worker fits:\n%s", out)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", first, big, unlimited)
	if got, err := os.ReadFile(order); err != nil || string(got) != "big\nunlimited\n" {
		t.Fatalf("the jobs ran in the order %q (%v), want big, then unlimited", got, err)
	}
	rbs(t, srv, "job", "cancel", tooBig)
}

// requireMemoryCgroup skips the test where a worker here cannot put jobs in
// a memory cgroup (it would fall back to RLIMIT_AS, which the kernel never
// OOM-kills for) — or fails it when RBS_TEST_REQUIRE_ALL=1.
func requireMemoryCgroup(t *testing.T) {
	t.Helper()
	g, err := memlimit.New(fmt.Sprintf("rbs-test-probe-%d", os.Getpid()), 0)
	if err != nil {
		t.Fatal(err)
	}
	mode := g.Mode()
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if mode != memlimit.ModeRlimit {
		return
	}
	if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
		t.Fatal("no memory cgroup can be created here (RBS_TEST_REQUIRE_ALL=1)")
	}
	t.Skip("no memory cgroup can be created here; set RBS_TEST_REQUIRE_ALL=1 to make this a failure")
}

// allocateAtOnce is a Python job that allocates n MiB as soon as it starts
// and writes to every page of it. The worker holds a job until it is in its
// memory cgroup, so even this first allocation counts against the limit and
// the peak.
func allocateAtOnce(n int) string {
	return fmt.Sprintf(`b = bytearray(%d << 20)
b[::4096] = b"x" * len(b[::4096])
print(len(b))
`, n)
}

func TestJobOutOfMemory(t *testing.T) {
	python := requireTool(t, "python3")
	requireMemoryCgroup(t)
	srv := startServer(t)
	startWorker(t, srv, "w1")
	id := submit(t, srv, "--memory-gb", "0.0625", "--time", "1m", "--", python, "-c", allocateAtOnce(512))
	if _, _, err := rbsRun(srv, "job", "wait", id); err == nil {
		t.Fatal("wait succeeded for a job over its memory limit")
	}
	if j := show(t, srv, id); j.State != "OUT_OF_MEMORY" || !j.OOMKilled || j.PeakMemoryBytes == 0 {
		t.Fatalf("job over its memory limit: %+v", j)
	}
	ok := submit(t, srv, "--memory-gb", "1", "--time", "1m", "--", python, "-c", allocateAtOnce(64))
	rbs(t, srv, "job", "wait", ok)
	if j := show(t, srv, ok); j.State != "COMPLETED" || j.OOMKilled || j.PeakMemoryBytes < 64<<20 {
		t.Fatalf("job within its memory limit: %+v, want COMPLETED with a peak of at least 64 MiB", j)
	}
}

// requestProxy forwards TCP connections to a server and reports each call
// a gRPC client starts through it (an HTTP/2 HEADERS frame from the
// client), so that a test knows how far the client has got.
type requestProxy struct {
	Addr     string
	requests chan struct{}
}

func startRequestProxy(t *testing.T, target string) *requestProxy {
	t.Helper()
	p := &requestProxy{requests: make(chan struct{}, 100)}
	p.Addr = relay(t, "127.0.0.1", target, p.forward, func(dst io.Writer, src io.Reader) { io.Copy(dst, src) })
	return p
}

// forward copies what an HTTP/2 client sends, frame by frame.
func (p *requestProxy) forward(dst io.Writer, src io.Reader) {
	preface := make([]byte, len("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
	if _, err := io.ReadFull(src, preface); err != nil {
		return
	}
	if _, err := dst.Write(preface); err != nil {
		return
	}
	header := make([]byte, 9) // length (24 bits), type, flags, stream id
	for {
		if _, err := io.ReadFull(src, header); err != nil {
			return
		}
		if _, err := dst.Write(header); err != nil {
			return
		}
		if _, err := io.CopyN(dst, src, int64(header[0])<<16|int64(header[1])<<8|int64(header[2])); err != nil {
			return
		}
		if header[3] == 0x1 { // HEADERS
			select {
			case p.requests <- struct{}{}:
			default:
			}
		}
	}
}

// waitRequests waits until n calls have gone through the proxy.
func (p *requestProxy) waitRequests(t *testing.T, n int, who string) {
	t.Helper()
	timeout := time.After(time.Minute)
	for i := range n {
		select {
		case <-p.requests:
		case <-timeout:
			t.Fatalf("%s made %d calls, not %d", who, i, n)
		}
	}
}

func TestJobsSurviveServerKill(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "1", "--job-slots", "1")
	// The job goes on to its next line when the test creates the file the
	// line before names; it records that it wrote "during".
	dir := t.TempDir()
	during, wrote, after := filepath.Join(dir, "during"), filepath.Join(dir, "wrote"), filepath.Join(dir, "after")
	running := submit(t, srv, "--", "sh", "-c", `echo before
while [ ! -e "$1" ]; do sleep 0.05; done
echo during; : >"$2"
while [ ! -e "$3" ]; do sleep 0.05; done
echo after`, "sh", during, wrote, after)
	waitFor(t, srv, running, "RUNNING", inState("RUNNING"))
	queued := submit(t, srv, "--", "echo", "queued")
	waitFor(t, srv, running, "some output", func(jobView) bool { return rbs(t, srv, "job", "logs", running) == "before\n" })

	// A follower and a waiter ride out the crash. Each reaches the server
	// through a proxy that tells when it has made its second call (the
	// first checks that the server is there): from then on it retries.
	follow := exec.Command(rbsBin, "job", "logs", "-f", running)
	wait := exec.Command(rbsBin, "job", "wait", running, queued)
	var followed, followErr, waited strings.Builder
	follow.Stdout, follow.Stderr, wait.Stdout = &followed, &followErr, &waited
	proxies := map[*exec.Cmd]*requestProxy{follow: startRequestProxy(t, srv.Addr), wait: startRequestProxy(t, srv.Addr)}
	for c, p := range proxies {
		c.Env = append(os.Environ(), "RBS_REMOTE="+p.Addr)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill() })
	}
	proxies[follow].waitRequests(t, 2, "logs -f")
	proxies[wait].waitRequests(t, 2, "wait")

	// The job writes "during" while the server is down.
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
	if err := os.WriteFile(during, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(wrote); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job never wrote its second line")
		}
	}
	srv.start(t, srv.Addr)

	// What the server had stored is there; what the worker could not send
	// yet may have arrived too.
	if got := rbs(t, srv, "job", "logs", running); got != "before\n" && got != "before\nduring\n" {
		t.Fatalf("logs after the crash %q", got)
	}
	if j := show(t, srv, queued); j.State != "PENDING" {
		t.Fatalf("queued job after the crash: %+v", j)
	}
	if err := os.WriteFile(after, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", running, queued)
	if j := show(t, srv, running); j.Attempts != 1 {
		t.Fatalf("the running job was restarted (attempt %d) instead of carrying on", j.Attempts)
	}
	if got := rbs(t, srv, "job", "logs", running); got != "before\nduring\nafter\n" {
		t.Fatalf("logs %q, want the output written while the server was down too", got)
	}
	if err := follow.Wait(); err != nil || followed.String() != "before\nduring\nafter\n" {
		t.Fatalf("logs -f across the crash: %v, printed %q; stderr %q", err, followed.String(), followErr.String())
	}
	if !strings.Contains(followErr.String(), "trying again") {
		t.Fatalf("logs -f did not say it lost the server: %q", followErr.String())
	}
	if err := wait.Wait(); err != nil || strings.Count(waited.String(), "COMPLETED") != 2 {
		t.Fatalf("wait across the crash: %v, printed %q", err, waited.String())
	}

	// A server that cannot be reached at the start is an error, not a wait.
	for _, args := range [][]string{{"job", "wait", running}, {"job", "logs", "-f", running}} {
		out, err := run(t, t.TempDir(), []string{"RBS_REMOTE=127.0.0.1:1"}, rbsBin, args...)
		if err == nil || !strings.Contains(out, "cannot reach the server") || strings.Contains(out, "trying again") {
			t.Fatalf("rbs %v against no server: %v\n%s", args, err, out)
		}
	}
}

func TestJobsRequeuedWhenWorkerDies(t *testing.T) {
	srv := startServer(t, "--worker-timeout", "2s")
	w1 := startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	// The first attempt runs until its worker dies; the second ends.
	again := submit(t, srv, "--", "sh", "-c", `echo attempt $RBS_ATTEMPT; if [ "$RBS_ATTEMPT" = 1 ]; then exec sleep 60; fi`)
	lost := submit(t, srv, "--no-requeue", "--", "sleep", "30")
	waitFor(t, srv, again, "RUNNING", inState("RUNNING"))
	waitFor(t, srv, lost, "RUNNING", inState("RUNNING"))
	w1.cmd.Process.Signal(syscall.SIGKILL)
	w1.cmd.Wait()
	w2 := startWorker(t, srv, "w2", "--cpus", "2", "--job-slots", "2")
	rbs(t, srv, "job", "wait", again)
	j := show(t, srv, again)
	if j.Attempts != 2 || j.Workers[0] != "w2" {
		t.Fatalf("requeued job: %+v", j)
	}
	if got := rbs(t, srv, "job", "logs", again); !strings.Contains(got, "attempt 2") {
		t.Fatalf("logs of the requeued job %q", got)
	}
	if j := waitFor(t, srv, lost, "NODE_FAIL", inState("NODE_FAIL")); j.Attempts != 1 {
		t.Fatalf("--no-requeue job: %+v", j)
	}
	// The new worker removed the dead one's job memory groups.
	if !strings.Contains(w2.log.String(), "removed the memory groups") {
		t.Fatalf("w2 did not sweep w1's memory groups; log:\n%s", w2.log.String())
	}
}

func TestQueuesFromClusterConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cluster.rbs")
	os.WriteFile(cfg, []byte(`queue(name = "batch", default = True)
queue(name = "debug", priority = 100, max_time = "1m")
`), 0o644)
	srv := startServer(t, "--config", cfg)
	startWorker(t, srv, "w1", "--cpus", "1", "--job-slots", "1")
	var queues []struct {
		Name           string `json:"name"`
		Priority       int    `json:"priority"`
		MaxTimeSeconds int    `json:"max_time_seconds"`
		Default        bool   `json:"default"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "queues", "--json")), &queues); err != nil {
		t.Fatal(err)
	}
	if len(queues) != 2 || queues[1].Name != "debug" || queues[1].Priority != 100 || queues[1].MaxTimeSeconds != 60 || !queues[0].Default {
		t.Fatalf("queues %+v", queues)
	}
	if _, stderr, err := rbsRun(srv, "job", "submit", "--queue", "debug", "--time", "2m", "--", "true"); err == nil || !strings.Contains(stderr, "exceeds queue debug") {
		t.Fatalf("over the queue's max_time: %v %q", err, stderr)
	}
	// The debug queue's priority puts its job ahead of an earlier batch
	// job; both wait behind a blocker until the release.
	dir := t.TempDir()
	release, order := filepath.Join(dir, "release"), filepath.Join(dir, "order")
	blocker := submit(t, srv, "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	waitFor(t, srv, blocker, "RUNNING", inState("RUNNING"))
	batch := submit(t, srv, "--", "sh", "-c", `echo batch >>"$1"`, "sh", order)
	debug := submit(t, srv, "--queue", "debug", "--", "sh", "-c", `echo debug >>"$1"`, "sh", order)
	if j := show(t, srv, debug); j.Priority.Queue != 100 || j.State != "PENDING" {
		t.Fatalf("debug job behind the blocker: %+v", j)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", blocker, batch, debug)
	if got, err := os.ReadFile(order); err != nil || string(got) != "debug\nbatch\n" {
		t.Fatalf("the jobs ran in the order %q (%v), want debug, then batch", got, err)
	}
	if j := show(t, srv, debug); j.PendingReason != "" || j.ExitCode != 0 {
		t.Fatalf("%+v", j)
	}
	bad := filepath.Join(t.TempDir(), "bad.rbs")
	os.WriteFile(bad, []byte(`queue(name = "a", max_time = "forever")`), 0o644)
	cmd := exec.Command(rbsBin, "remote", "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--config", bad)
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), `"forever"`) {
		t.Fatalf("a bad cluster.rbs: %v\n%s", err, out)
	}
}

// Waiting raises a job's priority: with age_priority(weight = 3, every =
// "1s") an old job overtakes a newer one of higher base priority, and an
// urgent job, whose base priority is above any age bonus, overtakes both.
// The jobs wait behind a blocker until all three are pending, so the order
// they run in is the scheduler's, not the order they were submitted in.
func TestAgeBonus(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "cluster.rbs")
	os.WriteFile(cfg, []byte(`queue(name = "batch")
age_priority(weight = 3, every = "1s", max = 10000)
`), 0o644)
	srv := startServer(t, "--config", cfg)
	startWorker(t, srv, "w1", "--cpus", "1", "--job-slots", "1")
	release, order := filepath.Join(dir, "release"), filepath.Join(dir, "order")
	blocker := submit(t, srv, "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	waitFor(t, srv, blocker, "RUNNING", inState("RUNNING"))
	record := func(name string, priority int) []string {
		return []string{"--name", name, "--priority", strconv.Itoa(priority), "--", "sh", "-c", `echo "$1" >>"$2"`, "sh", name, order}
	}
	old := submit(t, srv, record("old", 0)...)
	// Once old has waited a full interval it stays at least 3 ahead of
	// anything submitted later (until the cap, hours away), which outweighs
	// newer's base priority of 2.
	waitFor(t, srv, old, "aged", func(j jobView) bool { return j.Priority.Age >= 3 })
	newer := submit(t, srv, record("newer", 2)...)
	urgent := submit(t, srv, record("urgent", 20000)...)

	var pending []jobView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--state", "PENDING", "--json")), &pending); err != nil {
		t.Fatal(err)
	}
	prio := map[string]int64{}
	for _, j := range pending {
		prio[j.ID] = j.Priority.Total
	}
	if len(pending) != 3 || prio[urgent] <= prio[old] || prio[old] <= prio[newer] {
		t.Fatalf("pending behind the blocker: %+v; want urgent %s > old %s > newer %s by total priority", pending, urgent, old, newer)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", blocker, old, newer, urgent)
	got, err := os.ReadFile(order)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "urgent\nold\nnewer\n" {
		t.Fatalf("the jobs ran in the order %q, want urgent, old, newer", got)
	}
}

func TestJobEnvironment(t *testing.T) {
	srv := startServer(t, "--token", "s3cret")
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")

	show := `echo "data=${RBSTEST_DATA-unset} extra=${EXTRA-unset} token=${RBS_REMOTE_TOKEN-unset} remote=${RBS_REMOTE-unset} home=$HOME"`
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{nil, "data=/data extra=unset token=unset remote=" + srv.Addr},
		{[]string{"--export", "NONE"}, "data=unset extra=unset token=unset remote=unset"},
		{[]string{"--export", "RBSTEST_DATA,EXTRA=1"}, "data=/data extra=1 token=unset remote=unset"},
		{[]string{"--export", "ALL,EXTRA=2", "--env", "RBSTEST_DATA=over,ride"}, "data=over,ride extra=2 token=unset remote=" + srv.Addr},
	} {
		cmd := exec.Command(rbsBin, append(append([]string{"job", "submit", "--parsable"}, tc.flags...), "--", "sh", "-c", show)...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token, "RBSTEST_DATA=/data", "HOME=/submitter-home")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("submit %v: %v", tc.flags, err)
		}
		id := strings.TrimSpace(string(out))
		rbs(t, srv, "job", "wait", id)
		got := strings.TrimSpace(rbs(t, srv, "job", "logs", id))
		if !strings.HasPrefix(got, tc.want+" home=") || strings.HasSuffix(got, "home=/submitter-home") {
			t.Errorf("--export %v: job saw %q, want %q and the worker's HOME", tc.flags, got, tc.want)
		}
	}
	_, stderr, err := rbsRun(srv, "job", "submit", "--export", "NONE,X", "--", "true")
	if err == nil || !strings.Contains(stderr, `"NONE,X"`) {
		t.Errorf("--export NONE,X: %v, stderr %q; want an error naming the value", err, stderr)
	}

	// Slurm's variables, beside rbs's, for scripts written for Slurm.
	slurm := `echo "$SLURM_JOB_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_NNODES $SLURM_NODEID $SLURM_PROCID $SLURM_CPUS_PER_TASK $SLURM_JOB_NAME $SLURM_JOB_PARTITION"`
	arr := submit(t, srv, "--array", "0-1", "-c", "2", "-J", "sim", "--", "sh", "-c", slurm)
	plain := submit(t, srv, "--", "sh", "-c", slurm)
	rbs(t, srv, "job", "wait", arr, plain)
	for id, want := range map[string]string{
		arr + "_1": arr + " " + arr + " 1 1 0 0 2 sim batch",
		plain:      plain + "   1 0 0 1 sh batch",
	} {
		if got := strings.TrimSpace(rbs(t, srv, "job", "logs", id)); got != want {
			t.Errorf("job %s saw Slurm's variables as %q, want %q", id, got, want)
		}
	}
}

// TestLargestArray submits an array of the most tasks allowed and drives
// every command over all of it while it waits for a worker.
func TestLargestArray(t *testing.T) {
	srv := startServer(t)
	id := submit(t, srv, "--array", "0-99999%10", "--", "true")

	table := rbs(t, srv, "job", "list")
	if rows := strings.Split(strings.TrimSpace(table), "\n"); len(rows) != 2 || !strings.HasPrefix(rows[1], id+"_[0-99999%10] ") {
		t.Fatalf("list shows %d rows, want the header and one for the whole array:\n%.500s", len(rows), table)
	}
	var listed []jobView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--json")), &listed); err != nil || len(listed) != 100000 {
		t.Fatalf("list --json: %d jobs, %v", len(listed), err)
	}
	var shown []jobView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &shown); err != nil || len(shown) != 100000 || shown[99999].ID != id+"_99999" {
		t.Fatalf("show --json: %d tasks, %v", len(shown), err)
	}
	if got := show(t, srv, id+"_5"); got.State != "PENDING" || got.PendingReason != "NoWorkers" {
		t.Fatalf("task 5: %+v", got)
	}
	if out := rbs(t, srv, "job", "cancel", id); strings.Count(out, "CANCELLED") != 100000 {
		t.Fatalf("cancel reported %d cancelled tasks", strings.Count(out, "CANCELLED"))
	}
	out, _, err := rbsRun(srv, "job", "wait", id)
	if err == nil || strings.Count(out, "\tCANCELLED\t") != 100000 {
		t.Fatalf("wait: %v, %d tasks reported cancelled", err, strings.Count(out, "\tCANCELLED\t"))
	}

	// The tasks share one spec in the store: the database stays small.
	var size int64
	for _, name := range []string{"jobs.db", "jobs.db-wal"} {
		if fi, err := os.Stat(filepath.Join(srv.DataDir, name)); err == nil {
			size += fi.Size()
		}
	}
	if size > 64<<20 {
		t.Fatalf("the job database takes %d MiB for one array", size>>20)
	}
}

func TestJobRetention(t *testing.T) {
	srv := startServer(t, "--job-retention", "2s")
	startWorker(t, srv, "w1", "--cpus", "1", "--job-slots", "1")
	// The output is read by a follower while the job runs, so that the
	// check does not race the retention.
	release := filepath.Join(t.TempDir(), "release")
	id := submit(t, srv, "--", "sh", "-c", `echo kept a while; while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	follow := exec.Command(rbsBin, "job", "logs", "-f", id)
	follow.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr)
	followed, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(followed)
	if line, err := lines.ReadString('\n'); err != nil || line != "kept a while\n" {
		t.Fatalf("logs -f printed %q, %v", line, err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(lines); len(rest) > 0 {
		t.Fatalf("logs -f printed %q more", rest)
	}
	if err := follow.Wait(); err != nil {
		t.Fatalf("logs -f: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, stderr, err := rbsRun(srv, "job", "show", id)
		if err != nil && strings.Contains(stderr, "job "+id+" not found") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is still known long past its retention: %v %s", id, err, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out := rbs(t, srv, "job", "list", "--history", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("list --history after the retention: %s", out)
	}

	out, err := exec.Command(rbsBin, "remote", "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--job-retention", "soon").CombinedOutput()
	if err == nil || !strings.Contains(string(out), `"soon"`) {
		t.Fatalf("serve --job-retention soon: %v, %s", err, out)
	}
}

// TestScriptDirectives submits a script whose #RBS lines give flags, some
// of which the command line overrides, and which takes arguments.
func TestScriptDirectives(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	script := filepath.Join(t.TempDir(), "train.sh")
	os.WriteFile(script, []byte(`#!/bin/sh
# A training run.
#RBS -J "train model" --cpus-per-task 2 -p batch
#RBS --time 1:00 --env STAGE=script --env KEEP=yes
echo "$STAGE $KEEP $1 $2"
`), 0o755)
	id := submit(t, srv, "--env", "STAGE=typed", "--script", script, "--", "first", "second arg")
	rbs(t, srv, "job", "wait", id)
	if got := rbs(t, srv, "job", "logs", id); got != "typed yes first second arg\n" {
		t.Fatalf("logs %q", got)
	}
	var j struct {
		Name      string `json:"name"`
		CPUs      int    `json:"cpus"`
		TimeLimit int64  `json:"time_limit_seconds"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil {
		t.Fatal(err)
	}
	if j.Name != "train model" || j.CPUs != 2 || j.TimeLimit != 60 {
		t.Fatalf("show: %+v, want the #RBS name, cpus and time limit", j)
	}

	// A script written for sbatch: its #SBATCH options that rbs has are
	// honoured, and the others named in a warning.
	slurm := filepath.Join(t.TempDir(), "slurm.sh")
	os.WriteFile(slurm, []byte(`#!/bin/sh
#SBATCH --job-name=sim
#SBATCH --time=00:02:00
#SBATCH --array=0-1 --mem=100M
#SBATCH --mail-type=END
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID"
`), 0o755)
	out, stderr, err := rbsRun(srv, "job", "submit", "--parsable", "--script", slurm)
	arr := strings.TrimSpace(out)
	if err != nil || stderr != "rbs: warning: "+slurm+":5: #SBATCH --mail-type=END: ignored --mail-type, which rbs has no equivalent of\n" {
		t.Fatalf("submit of an sbatch script: %v, stdout %q, stderr %q", err, out, stderr)
	}
	rbs(t, srv, "job", "wait", arr)
	if got := rbs(t, srv, "job", "logs", arr+"_1"); got != "task 1 of "+arr+"\n" {
		t.Fatalf("logs of task 1 of the sbatch script's array: %q", got)
	}
	var task struct {
		Name        string `json:"name"`
		TimeLimit   int64  `json:"time_limit_seconds"`
		MemoryBytes int64  `json:"memory_bytes"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", arr+"_1")), &task); err != nil {
		t.Fatal(err)
	}
	if task.Name != "sim" || task.TimeLimit != 120 || task.MemoryBytes != 100<<20 {
		t.Fatalf("show: %+v, want the #SBATCH name, time limit and memory", task)
	}

	bad := filepath.Join(t.TempDir(), "bad.sh")
	os.WriteFile(bad, []byte("#!/bin/sh\n#RBS --time soon\necho never\n"), 0o755)
	_, stderr, err = rbsRun(srv, "job", "submit", "--script", bad)
	if err == nil || !strings.Contains(stderr, "bad.sh:2") || !strings.Contains(stderr, `"soon"`) {
		t.Fatalf("a bad #RBS line: %v, %q", err, stderr)
	}
}

// TestJobsRequeuedWhenWorkerHangs stops a worker (SIGSTOP: its connection
// stays open but its heartbeats stop). Its jobs are requeued or end as
// NODE_FAIL; when it wakes up, it reconnects and the attempts the server has
// given up on are stopped.
func TestJobsRequeuedWhenWorkerHangs(t *testing.T) {
	srv := startServer(t, "--worker-timeout", "2s")
	w1 := startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	dir := t.TempDir()
	again := submit(t, srv, "--", "sh", "-c", "echo $$ > "+dir+"/pid-$RBS_ATTEMPT; sleep 30")
	lost := submit(t, srv, "--no-requeue", "--", "sleep", "30")
	waitFor(t, srv, again, "RUNNING", inState("RUNNING"))
	waitFor(t, srv, lost, "RUNNING", inState("RUNNING"))
	w1.cmd.Process.Signal(syscall.SIGSTOP)
	defer w1.cmd.Process.Signal(syscall.SIGCONT)
	startWorker(t, srv, "w2", "--cpus", "2", "--job-slots", "2")

	j := waitFor(t, srv, again, "requeued onto w2", func(j jobView) bool { return j.State == "RUNNING" && j.Attempts == 2 })
	if j.Workers[0] != "w2" {
		t.Fatalf("requeued job: %+v", j)
	}
	if j := waitFor(t, srv, lost, "NODE_FAIL", inState("NODE_FAIL")); j.Attempts != 1 {
		t.Fatalf("--no-requeue job: %+v", j)
	}

	w1.cmd.Process.Signal(syscall.SIGCONT)
	b, err := os.ReadFile(filepath.Join(dir, "pid-1"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the first attempt (pid %d) still runs on w1 after it woke up; w1 log:\n%s", pid, w1.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if j := show(t, srv, again); j.State != "RUNNING" || j.Attempts != 2 {
		t.Fatalf("the requeued attempt was disturbed: %+v", j)
	}
}

// TestSubmitRejectsUnknownFlags checks that a mistyped flag, typed or in
// an #RBS line, is an error with a suggestion and submits nothing, and that
// a command starting with - is taken after --.
func TestSubmitRejectsUnknownFlags(t *testing.T) {
	srv := startServer(t)
	script := filepath.Join(t.TempDir(), "typo.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n#RBS --cpu 4\necho never\n"), 0o755)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--cpu", "4", "--", "true"}, `unknown flag --cpu, did you mean one of "--cpus"`},
		{[]string{"--cpus", "2", "--tim", "1h", "echo", "hi"}, `unknown flag --tim, did you mean one of "--mem", "--time"?`},
		{[]string{"--script", script}, `typo.sh:2: #RBS --cpu 4: unknown flag --cpu, did you mean one of "--cpus"`},
	} {
		out, stderr, err := rbsRun(srv, append([]string{"job", "submit"}, tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("submit %q: %v, printed %q, stderr %q; want an error containing %s", tc.args, err, out, stderr, tc.want)
		}
	}
	if out := rbs(t, srv, "job", "list", "--history", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("rejected submissions left jobs: %s", out)
	}
	submit(t, srv, "--", "-weird", "--cpu")
	var listed []struct {
		Name    string   `json:"name"`
		Command []string `json:"command"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--json")), &listed); err != nil || len(listed) != 1 || strings.Join(listed[0].Command, " ") != "-weird --cpu" {
		t.Fatalf("list after submit -- -weird: %+v, %v", listed, err)
	}
}

// TestJobWait checks that rbs job wait prints each job as it ends, counts a
// job that can never start as done (and failed), and gives up after
// --timeout, naming the jobs not ended.
func TestJobWait(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")
	// A client that never ends fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wait := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, rbsBin, append([]string{"job", "wait"}, args...)...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token)
		return cmd
	}

	// Each job is printed as it ends: the quick one while the other still
	// runs, held until the quick one's line has been read.
	release := filepath.Join(t.TempDir(), "release")
	slow := submit(t, srv, "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release)
	quick := submit(t, srv, "--", "true")
	cmd := wait(slow, quick)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewReader(stdout)
	if first, err := lines.ReadString('\n'); err != nil || first != quick+"\tCOMPLETED\texit 0\n" {
		t.Fatalf("wait printed %q first (%v), want the quick job's end", first, err)
	}
	if j := show(t, srv, slow); j.State != "RUNNING" {
		t.Fatalf("the slow job is %s before its release", j.State)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(lines)
	if werr := cmd.Wait(); err != nil || werr != nil || string(rest) != slow+"\tCOMPLETED\texit 0\n" {
		t.Fatalf("wait went on with %q (%v, %v), want the slow job's end", rest, err, werr)
	}

	// A job that can never start, and one afterok on it, are done with:
	// wait prints why and fails.
	failed := submit(t, srv, "--", "false")
	never := submit(t, srv, "--deps", "afterok:"+failed, "--", "echo", "never")
	chained := submit(t, srv, "--deps", "afterok:"+never, "--", "echo", "never")
	cmd = wait(failed, never, chained)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("wait of jobs that failed or can never start: %v (%v); stdout %q", err, ctx.Err(), out)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	sort.Strings(got)
	want := []string{
		failed + "\tFAILED\texit 1",
		never + "\tPENDING\tDependencyNeverSatisfied: afterok:" + failed + " (FAILED) can never be satisfied; the job can never start (cancel it with rbs job cancel " + never + ")",
		chained + "\tPENDING\tDependencyNeverSatisfied: afterok:" + never + " (PENDING) can never be satisfied; the job can never start (cancel it with rbs job cancel " + chained + ")",
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("wait printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(stderr.String(), "3 of 3 jobs did not complete") || !strings.Contains(stderr.String(), never+" can never start (DependencyNeverSatisfied)") {
		t.Fatalf("wait's error: %q", stderr.String())
	}
	// Following its output ends too: there is none to come.
	if got := rbs(t, srv, "job", "logs", "-f", never); got != "" {
		t.Fatalf("logs -f of a job that can never start: %q", got)
	}
	if j := show(t, srv, chained); j.State != "PENDING" || j.PendingReason != "DependencyNeverSatisfied" || len(j.Dependencies) != 1 || !j.Dependencies[0].NeverSatisfied {
		t.Fatalf("the job that can never start is left as %+v, want PENDING (DependencyNeverSatisfied) with its dependency never satisfied", j)
	}
	if got := rbs(t, srv, "job", "show", chained); !strings.Contains(got, "afterok:"+never+" (PENDING, can never be satisfied)") {
		t.Fatalf("show of a job that can never start:\n%s", got)
	}

	// --timeout gives up, naming what has not ended.
	held := submit(t, srv, "--", "sh", "-c", `while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release+"-never")
	waitFor(t, srv, held, "RUNNING", inState("RUNNING"))
	cmd = wait("--timeout", "1s", quick, held)
	stderr.Reset()
	cmd.Stderr = &stderr
	out, err = cmd.Output()
	if err == nil || ctx.Err() != nil || string(out) != quick+"\tCOMPLETED\texit 0\n" {
		t.Fatalf("wait --timeout 1s: %v (%v), stdout %q", err, ctx.Err(), out)
	}
	if want := "timed out after 1s: 1 job not ended: " + held + " RUNNING"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("wait --timeout 1s: stderr %q, want %q", stderr.String(), want)
	}
	rbs(t, srv, "job", "cancel", held)
}

// TestJobCancelEnded checks that cancelling a job that had already ended
// says so and fails, as scancel does, while the jobs it does cancel are
// cancelled and printed.
func TestJobCancelEnded(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	done := submit(t, srv, "--", "true")
	arr := submit(t, srv, "--array", "0-1", "--", "true")
	rbs(t, srv, "job", "wait", done, arr)
	long := submit(t, srv, "--", "sleep", "60")
	waitFor(t, srv, long, "RUNNING", inState("RUNNING"))
	blocked := submit(t, srv, "--deps", "afterok:"+long, "--", "true")
	for _, tc := range []struct {
		ids            []string
		stdout, stderr string // stderr "" when the command must succeed
	}{
		{[]string{done}, "", "rbs: error: job " + done + " had already ended: COMPLETED\n"},
		{[]string{done, blocked}, blocked + "\tCANCELLED\n", "rbs: error: job " + done + " had already ended: COMPLETED\n"},
		{[]string{long}, long + "\tRUNNING (stopping)\n", ""},
		{[]string{blocked}, "", "rbs: error: job " + blocked + " had already ended: CANCELLED\n"},
		{[]string{arr, done}, "", "rbs: error: 3 jobs had already ended: " + arr + "_0 COMPLETED, " + arr + "_1 COMPLETED, " + done + " COMPLETED\n"},
	} {
		out, stderr, err := rbsRun(srv, append([]string{"job", "cancel"}, tc.ids...)...)
		if out != tc.stdout || stderr != tc.stderr || (err == nil) != (tc.stderr == "") {
			t.Errorf("cancel %v: %v, stdout %q, stderr %q; want stdout %q, stderr %q", tc.ids, err, out, stderr, tc.stdout, tc.stderr)
		}
	}
	waitFor(t, srv, long, "CANCELLED", inState("CANCELLED"))
}

// TestSubmitLocalFiles submits from a project directory: a command naming a
// local file that is not sent gets a warning, --inputs . sends it, and a
// local script file given as the command runs as --script does, its
// directives honoured, as with sbatch.
func TestSubmitLocalFiles(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "shard.sh"), []byte("echo shard $RBS_ARRAY_INDEX\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\n#SBATCH --job-name=runner\n#RBS --env X=1\necho \"$X $1 $SLURM_JOB_NAME\"\n"), 0o755)
	submitIn := func(args ...string) (id, stderr string) {
		t.Helper()
		cmd := exec.Command(rbsBin, append([]string{"job", "submit", "--parsable"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token)
		var e strings.Builder
		cmd.Stderr = &e
		out, err := cmd.Output()
		id = strings.TrimSpace(string(out))
		if _, perr := strconv.Atoi(id); err != nil || perr != nil {
			t.Fatalf("submit %q: %v, stdout %q, stderr %q", args, err, out, e.String())
		}
		return id, e.String()
	}
	warning := "rbs: warning: shard.sh is a local file; pass --inputs . to send it, or --script for a script\n"
	if _, stderr := submitIn("--", "sh", "shard.sh"); stderr != warning {
		t.Fatalf("submit of a command naming a local file not sent: stderr %q, want %q", stderr, warning)
	}
	id, stderr := submitIn("--inputs", ".", "--array", "0-1", "--", "sh", "shard.sh")
	if !strings.HasPrefix(stderr, "rbs: inputs: ") || strings.Contains(stderr, "warning") {
		t.Fatalf("submit with --inputs .: stderr %q, want the upload's line alone", stderr)
	}
	rbs(t, srv, "job", "wait", id)
	if got := rbs(t, srv, "job", "logs", id+"_1"); got != "shard 1\n" {
		t.Fatalf("logs of the shard sent with --inputs .: %q", got)
	}
	id, stderr = submitIn("./run.sh", "first")
	if stderr != "" {
		t.Fatalf("submit ./run.sh: stderr %q", stderr)
	}
	rbs(t, srv, "job", "wait", id)
	if got := rbs(t, srv, "job", "logs", id); got != "1 first runner\n" {
		t.Fatalf("logs of ./run.sh submitted as sbatch takes it: %q", got)
	}
}
