package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/store/pgtest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
)

// haPair starts two servers on one PostgreSQL state, the first active and
// the second standing by, each given extra flags too, and returns them with
// a server value that reaches both, as clients and workers given the list
// do.
func haPair(t *testing.T, extra ...string) (pg *pgtest.Server, state string, active, standby, both *server) {
	t.Helper()
	pg = pgtest.Start(t)
	state = pg.NewDatabase(t)
	args := append([]string{"--state", state, "--state-password-file", pg.PasswordFile}, extra...)
	active = startServer(t, args...)
	waitLog(t, active, "active: took the lease")
	standby = startServer(t, args...)
	waitLog(t, standby, "standing by: forwarding calls to the active server")
	return pg, state, active, standby, &server{Addr: active.Addr + "," + standby.Addr}
}

// waitLog waits until a line of the server's log holds s.
func waitLog(t *testing.T, srv *server, s string) {
	t.Helper()
	eventually(t, fmt.Sprintf("the server's log to say %q", s), func() bool { return strings.Contains(srv.log.String(), s) },
		func() string { return srv.log.String() })
}

// ran is a file every job of a test appends a line to, saying which job
// it is, so that a test can tell each ran once.
func ran(t *testing.T) (file, line string) {
	file = filepath.Join(t.TempDir(), "ran")
	return file, `echo "$RBS_JOB_ID.${RBS_ARRAY_INDEX:--}.${RBS_NODE_RANK:-0}" >>` + file
}

// Two servers share a PostgreSQL state, and a CAS and action cache (a
// third server's); the active one is killed with work running and more
// queued: 500 jobs counting array tasks (long singles, a 2-node gang, a
// 457-task array, singles) and a remote Bazel build sent to the standby.
// The standby takes over; running jobs carry on in the attempt they were
// in, with their output whole; every job that was acknowledged runs once;
// submissions through the list of servers go on across the takeover, and
// none is made twice; the Bazel build goes on green through Bazel's own
// retries: the new active server adopts the action the worker still runs
// and answers for the operation the old one started, so the action runs
// once.
func TestFailover(t *testing.T) {
	ws := newBazelWorkspace(t)
	runs, releaseAction := slowAction(t, ws)
	storage := startServer(t)
	_, _, a, b, both := haPair(t, "--cas", "grpc://"+storage.Addr, "--ac", "grpc://"+storage.Addr)
	for _, name := range []string{"w1", "w2"} {
		startWorker(t, both, name, "--cpus", "4", "--job-slots", "4", "--action-slots", "2")
	}
	file, record := ran(t)
	release := filepath.Join(t.TempDir(), "release")
	waitRelease := `while [ ! -e ` + release + ` ]; do sleep 0.05; done`

	long := []string{
		submit(t, both, "--", "sh", "-c", record+"; echo start; "+waitRelease+"; echo end"),
		submit(t, both, "--", "sh", "-c", record+"; echo start; "+waitRelease+"; echo end"),
	}
	gang := submit(t, both, "--nodes", "2", "--", "sh", "-c", record+"; echo rank $RBS_NODE_RANK; "+waitRelease)
	const tasks = 457
	array := submit(t, both, "--array", fmt.Sprintf("0-%d%%8", tasks-1), "--", "sh", "-c", record)
	var singles []string
	for range 20 {
		singles = append(singles, submit(t, both, "--", "sh", "-c", record))
	}
	type result struct {
		out string
		err error
	}
	built := make(chan result, 1)
	go func() {
		out, err := ws.bazel("build", "--remote_executor=grpc://"+b.Addr, "//slow:slow")
		built <- result{out, err}
	}()
	for _, id := range append(long, gang) {
		waitFor(t, both, id, "RUNNING", inState("RUNNING"))
	}
	eventually(t, "the slow action to start", func() bool {
		got, _ := os.ReadFile(runs)
		return len(got) > 0
	}, func() string { return "it has not" })

	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	// Submissions made while the standby takes over wait for it.
	for range 20 {
		singles = append(singles, submit(t, both, "--", "sh", "-c", record))
	}
	waitLog(t, b, "active: took the lease")
	for _, f := range []string{release, releaseAction} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ids := append(append(append([]string{}, long...), gang, array), singles...)
	rbs(t, both, append([]string{"job", "wait"}, ids...)...)

	for _, id := range append(long, gang) {
		if j := show(t, both, id); j.State != "COMPLETED" || j.Attempts != 1 {
			t.Fatalf("job %s across the takeover: %+v; want COMPLETED in its first attempt", id, j)
		}
	}
	for _, id := range long {
		if got := rbs(t, both, "job", "logs", id); got != "start\nend\n" {
			t.Fatalf("job %s's output %q, want it whole", id, got)
		}
	}
	if got := rbs(t, both, "job", "logs", gang); !strings.Contains(got, "rank 0") || !strings.Contains(got, "rank 1") {
		t.Fatalf("the gang's output %q", got)
	}

	// Each job, array task and gang rank ran exactly once.
	b2, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b2))
	want := len(long) + 2 + tasks + len(singles)
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l] {
			t.Errorf("%s ran twice", l)
		}
		seen[l] = true
	}
	if len(lines) != want {
		t.Fatalf("%d runs, want %d", len(lines), want)
	}
	var listed []jobView
	if err := json.Unmarshal([]byte(rbs(t, both, "job", "list", "--history", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	jobs := map[string]bool{}
	for _, j := range listed {
		jobs[strings.SplitN(j.ID, "_", 2)[0]] = true
	}
	if len(jobs) != len(ids) {
		t.Fatalf("%d jobs listed, want the %d submitted", len(jobs), len(ids))
	}

	r := <-built
	if r.err != nil {
		t.Fatalf("the build failed across the takeover: %v\n%s", r.err, r.out)
	}
	got, err := os.ReadFile(filepath.Join(ws.dir, "bazel-bin", "slow", "slow.txt"))
	if err != nil || string(got) != "done\n" {
		t.Fatalf("slow.txt = %q, %v", got, err)
	}
	if ran, _ := os.ReadFile(runs); string(ran) != "ran\n" {
		t.Fatalf("the action ran %d times across the takeover, want once", strings.Count(string(ran), "ran"))
	}
}

var epochLine = regexp.MustCompile(`took the lease of the shared state.* epoch=(\d+)`)

// An active server stopped (SIGSTOP) until the standby has taken over, then
// resumed, finds its epoch stale: it steps down, and writes nothing at its
// old epoch once the other has taken over.
func TestStoppedActiveStepsDown(t *testing.T) {
	pg, state, a, b, both := haPair(t)
	startWorker(t, both, "w1")
	first := submit(t, both, "--", "echo", "before")
	rbs(t, both, "job", "wait", first)
	m := epochLine.FindStringSubmatch(a.log.String())
	if m == nil {
		t.Fatalf("the active server's log names no epoch:\n%s", a.log.String())
	}
	old, _ := strconv.Atoi(m[1])

	a.cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { a.cmd.Process.Signal(syscall.SIGCONT) })
	stopped := time.Now()
	waitLog(t, b, "active: took the lease")
	t.Logf("the standby took over %v after the active stopped", time.Since(stopped).Round(time.Millisecond))

	db, err := pg.Open(state)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	written := func() string {
		var jobs, logs string
		if err := db.QueryRow(`SELECT COALESCE(string_agg(id || '.' || idx || '=' || md5(record), ',' ORDER BY id, idx), '') FROM jobs WHERE epoch = $1`, old).Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(`SELECT COALESCE(string_agg(seq::text, ',' ORDER BY seq), '') FROM logs WHERE epoch = $1`, old).Scan(&logs); err != nil {
			t.Fatal(err)
		}
		return jobs + " / " + logs
	}
	before := written()
	if !strings.Contains(before, first+".-1=") {
		t.Fatalf("no row of job %s at the old epoch %d: %s", first, old, before)
	}

	// The new active takes work while the old one is stopped, and after.
	after := submit(t, both, "--", "echo", "after")
	a.cmd.Process.Signal(syscall.SIGCONT)
	if err := a.exited(t); err == nil {
		t.Fatal("the old active exited cleanly; want it to step down with an error")
	}
	if !strings.Contains(a.log.String(), "stepping down") {
		t.Fatalf("the old active's log does not say it stepped down:\n%s", a.log.String())
	}
	rbs(t, both, "job", "wait", after)
	if got := written(); got != before {
		t.Fatalf("rows at the old epoch %d changed after the takeover:\nbefore %s\nafter  %s", old, before, got)
	}
	if got := rbs(t, both, "job", "logs", after); got != "after\n" {
		t.Fatalf("the job submitted after the takeover printed %q", got)
	}
}

// A submission retried with its idempotency key after a takeover (its
// answer lost with the old active) gets the job it made, not a second one.
func TestSubmitRetriedAcrossFailover(t *testing.T) {
	_, _, a, b, both := haPair(t)
	m, err := json.Marshal(&manifest.Manifest{Version: manifest.Version, Name: "once", Command: []string{"true"}, CPUs: 1, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	req := &jobspb.SubmitRequest{Manifests: [][]byte{m}, User: "tester", IdempotencyKey: "retry-me"}
	submitTo := func(srv *server) int64 {
		t.Helper()
		conn, err := client.Dial(client.Options{Target: srv.Addr})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := jobspb.NewJobsClient(conn).Submit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return r.JobId
	}
	first := submitTo(a)
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	waitLog(t, b, "active: took the lease")
	if again := submitTo(b); again != first {
		t.Fatalf("the retried submission made job %d; the first made %d", again, first)
	}
	req.IdempotencyKey = "another"
	if other := submitTo(both); other == first {
		t.Fatalf("a submission with another key got job %d again", first)
	}
	var listed []jobView
	if err := json.Unmarshal([]byte(rbs(t, b, "job", "list", "--history", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 2 {
		t.Fatalf("%d jobs, want 2: %+v", len(listed), listed)
	}
}
