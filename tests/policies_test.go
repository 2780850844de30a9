package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// policyServer starts a server with the cluster.rbs src and named user
// tokens ("NAME NAME-token" for each user), and returns it with a function
// that runs the CLI as one of them.
func policyServer(t *testing.T, src string, users ...string) (*server, func(user string, args ...string) string) {
	t.Helper()
	var lines strings.Builder
	for _, u := range users {
		lines.WriteString(u + " " + u + "-token\n")
	}
	usersFile := filepath.Join(t.TempDir(), "users")
	cfg := filepath.Join(t.TempDir(), "cluster.rbs")
	if err := os.WriteFile(usersFile, []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--token", "shared-token", "--config", cfg}
	if len(users) > 0 {
		args = append(args, "--users-file", usersFile)
	}
	srv := startServer(t, args...)
	as := func(user string, args ...string) string {
		t.Helper()
		cmd := exec.Command(rbsBin, args...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+user+"-token")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("rbs %q as %s: %v\n%s%s", args, user, err, out, stderr.String())
		}
		return string(out)
	}
	return srv, as
}

// waitLoop is a job's command that waits for the file it is given.
const waitLoop = `while [ ! -e "$1" ]; do sleep 0.05; done`

type shareView struct {
	Name           string      `json:"name"`
	Share          float64     `json:"share"`
	CPUSeconds     float64     `json:"cpu_seconds"`
	BillingSeconds float64     `json:"billing_seconds"`
	Factor         float64     `json:"factor"`
	Users          []shareView `json:"users"`
}

// userShares reads `rbs job shares --json` into a map by user.
func userShares(t *testing.T, srv *server) map[string]shareView {
	t.Helper()
	var got struct {
		Accounts []shareView `json:"accounts"`
	}
	out := rbs(t, srv, "job", "shares", "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	users := map[string]shareView{}
	for _, a := range got.Accounts {
		for _, u := range a.Users {
			users[u.Name] = u
		}
	}
	return users
}

// Two users with the same usage and shares of 3 and 1: the one with the
// larger share has the higher factor, so her job starts first though she
// submitted it last. Usage survives a restart of the server.
func TestFairShareOrder(t *testing.T) {
	srv, as := policyServer(t, `queue(name = "batch")
account(name = "big", shares = 3, users = ["alice"])
account(name = "small", shares = 1, users = ["bob"])
fair_share(weight = 10000, half_life = "1h")
`, "alice", "bob")
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	dir := t.TempDir()
	submitAs := func(user string, args ...string) string {
		return strings.TrimSpace(as(user, append([]string{"job", "submit", "--parsable"}, args...)...))
	}
	// Both use one CPU for as long: the same usage.
	ran := filepath.Join(dir, "ran")
	a1 := submitAs("alice", "--", "sh", "-c", waitLoop, "sh", ran)
	b1 := submitAs("bob", "--", "sh", "-c", waitLoop, "sh", ran)
	waitFor(t, srv, a1, "RUNNING", inState("RUNNING"))
	waitFor(t, srv, b1, "RUNNING", inState("RUNNING"))
	if err := os.WriteFile(ran, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", a1, b1)
	shares := userShares(t, srv)
	if a, b := shares["alice"], shares["bob"]; a.CPUSeconds <= 0 || b.CPUSeconds <= 0 || a.Share != 0.75 || b.Share != 0.25 || a.Factor <= b.Factor {
		t.Fatalf("shares: alice %+v, bob %+v; want usage for both, shares 0.75 and 0.25, alice's factor above bob's", a, b)
	}
	// Two blockers fill the worker; bob's job is submitted before
	// alice's; when one blocker ends, alice's starts first.
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	blockers := []string{submit(t, srv, "--", "sh", "-c", waitLoop, "sh", first), submit(t, srv, "--", "sh", "-c", waitLoop, "sh", second)}
	for _, id := range blockers {
		waitFor(t, srv, id, "RUNNING", inState("RUNNING"))
	}
	order := filepath.Join(dir, "order")
	bob := submitAs("bob", "--", "sh", "-c", `echo bob >>"$1"`, "sh", order)
	alice := submitAs("alice", "--", "sh", "-c", `echo alice >>"$1"`, "sh", order)
	if shown := rbs(t, srv, "job", "show", alice); !strings.Contains(shown, "fair share ") || !strings.Contains(shown, "factor 0.") {
		t.Fatalf("job show of a pending job has no fair-share factor:\n%s", shown)
	}
	if err := os.WriteFile(first, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, srv, alice, "COMPLETED", inState("COMPLETED"))
	if err := os.WriteFile(second, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", bob)
	if got, err := os.ReadFile(order); err != nil || string(got) != "alice\nbob\n" {
		t.Fatalf("the jobs ran in the order %q (%v), want alice's first", got, err)
	}
	// A restarted server goes on from the usage it stored.
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
	srv.start(t, srv.Addr)
	after := userShares(t, srv)
	if a, b := after["alice"], after["bob"]; a.CPUSeconds <= 0 || b.CPUSeconds <= 0 || a.Factor <= b.Factor {
		t.Fatalf("after a restart: alice %+v, bob %+v; want their usage kept", a, b)
	}
}

// Queues a and b lend each other their quota of one CPU: a borrows b's
// while b is idle, and b takes it back, preempting a's borrowed job, when
// a job of its own comes.
func TestQuotaBorrowAndReclaim(t *testing.T) {
	srv, _ := policyServer(t, `queue(name = "a", default = True, quota = {"cpus": 1}, cohort = "c")
queue(name = "b", quota = {"cpus": 1}, cohort = "c")
`)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	release := filepath.Join(t.TempDir(), "release")
	own := submit(t, srv, "--", "sh", "-c", waitLoop, "sh", release)
	waitFor(t, srv, own, "RUNNING", inState("RUNNING"))
	borrowed := submit(t, srv, "--", "sh", "-c", waitLoop, "sh", release)
	if j := waitFor(t, srv, borrowed, "RUNNING", inState("RUNNING")); !j.Borrowed || show(t, srv, own).Borrowed {
		t.Fatalf("the second job of queue a: %+v, want it marked borrowed, and the first not", j)
	}
	if shown := rbs(t, srv, "job", "show", borrowed); !strings.Contains(shown, "borrowed from queue a's cohort") {
		t.Fatalf("job show of the borrowing job:\n%s", shown)
	}
	waitLogsMatch(t, srv, borrowed, regexp.MustCompile(`borrows quota from cohort c`))
	third := submit(t, srv, "--", "true")
	waitFor(t, srv, third, "waiting on the cohort", func(j jobView) bool {
		return j.PendingReason == "QuotaExceeded: cohort c has 2/2 CPUs in use"
	})
	if queues := rbs(t, srv, "job", "queues"); !strings.Contains(queues, "2/1 cpus") || !strings.Contains(queues, "0/1 cpus") {
		t.Fatalf("job queues:\n%s", queues)
	}
	// b reclaims its CPU: the borrowed job is preempted and requeued.
	bJob := submit(t, srv, "--queue", "b", "--", "echo", "b ran")
	rbs(t, srv, "job", "wait", bJob)
	if j := show(t, srv, bJob); j.State != "COMPLETED" {
		t.Fatalf("b's job: %+v", j)
	}
	j := waitFor(t, srv, borrowed, "requeued or running again", func(j jobView) bool { return j.Attempts >= 1 && j.State != "RUNNING" || j.Attempts >= 2 })
	if shown := rbs(t, srv, "job", "show", borrowed); !strings.Contains(shown, "1 PREEMPTED") {
		t.Fatalf("the reclaimed job (%+v):\n%s", j, shown)
	}
	waitLogsMatch(t, srv, borrowed, regexp.MustCompile(`queue b reclaims the quota it lent to queue a`))
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rbs(t, srv, "job", "wait", own, borrowed, third)
	for _, id := range []string{own, borrowed, third} {
		if j := show(t, srv, id); j.State != "COMPLETED" {
			t.Fatalf("job %s: %+v", id, j)
		}
	}
}

// A 2-node gang packed by rack runs on the two workers of one rack, where
// it would otherwise take the tightest fit, which spans two.
func TestPackedGang(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4", "--topology", "rack=r1")
	startWorker(t, srv, "w2", "--cpus", "4", "--job-slots", "4", "--topology", "rack=r1")
	startWorker(t, srv, "w3", "--cpus", "2", "--job-slots", "4", "--topology", "rack=r2")
	loose := submit(t, srv, "--nodes", "2", "--", "true")
	rbs(t, srv, "job", "wait", loose)
	if j := show(t, srv, loose); j.State != "COMPLETED" || strings.Join(j.Workers, ",") != "w3,w1" {
		t.Fatalf("the unpacked gang: %+v, want the tightest fit w3,w1", j)
	}
	packed := submit(t, srv, "--nodes", "2", "--pack", "rack", "--pack-required", "--", "true")
	rbs(t, srv, "job", "wait", packed)
	if j := show(t, srv, packed); j.State != "COMPLETED" || strings.Join(j.Workers, ",") != "w1,w2" {
		t.Fatalf("the packed gang: %+v, want rack r1's w1,w2", j)
	}
	if shown := rbs(t, srv, "job", "show", packed); !strings.Contains(shown, "by rack: one, required") {
		t.Fatalf("job show:\n%s", shown)
	}
	if _, stderr, err := rbsRun(srv, "job", "submit", "--nodes", "2", "--pack-required", "--", "true"); err == nil || !strings.Contains(stderr, "--pack-required") {
		t.Fatalf("--pack-required without --pack: %v %s", err, stderr)
	}
	if _, stderr, err := rbsRun(srv, "remote", "worker", "--server", srv.Addr, "--topology", "rack"); err == nil || !strings.Contains(stderr, `--topology "rack"`) {
		t.Fatalf("a bad --topology: %v %s", err, stderr)
	}
}
