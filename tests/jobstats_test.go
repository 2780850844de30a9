package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A job that keeps one CPU busy for 2 s of CPU time on a request of 2 CPUs
// uses at most half of what it was given: rbs job stats says so, and its
// figures agree with each other. The job records who submitted it.
func TestJobStats(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	burn := `import time
while time.process_time() < 2: pass`
	id := submit(t, srv, "--name", "burn", "--cpus", "2", "--", "python3", "-c", burn)
	idle := submit(t, srv, "--name", "idle", "--", "true")
	rbs(t, srv, "job", "wait", id, idle)

	var rep struct {
		Jobs []struct {
			ID            string   `json:"id"`
			User          string   `json:"user"`
			Queue         string   `json:"queue"`
			CPUs          int32    `json:"cpus"`
			WallSeconds   float64  `json:"wall_seconds"`
			CPUSeconds    float64  `json:"cpu_seconds"`
			CPUEfficiency *float64 `json:"cpu_efficiency"`
		} `json:"jobs"`
		Users []struct {
			Name string `json:"name"`
			Jobs int    `json:"jobs"`
		} `json:"users"`
		Worst []struct {
			ID string `json:"id"`
		} `json:"worst"`
	}
	out := rbs(t, srv, "job", "stats", "--since", "1h", "--json")
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Jobs) != 2 || len(rep.Users) != 1 || rep.Users[0].Name != me.Username || rep.Users[0].Jobs != 2 {
		t.Fatalf("stats of two jobs of %s: %s", me.Username, out)
	}
	j := rep.Jobs[0]
	if j.ID != id {
		j = rep.Jobs[1]
	}
	switch {
	case j.ID != id || j.User != me.Username || j.CPUs != 2:
		t.Fatalf("burn job %+v, want job %s of %s on 2 CPUs", j, id, me.Username)
	case j.CPUSeconds < 2 || j.CPUSeconds > 3:
		t.Fatalf("burn job used %.3f s of CPU, want 2 s and the interpreter's start", j.CPUSeconds)
	case j.CPUEfficiency == nil || *j.CPUEfficiency > 0.5+1e-9 || *j.CPUEfficiency <= 0:
		t.Fatalf("burn job's CPU efficiency %v, want at most 50%% (one busy CPU of two)", j.CPUEfficiency)
	}
	if want := j.CPUSeconds / (2 * j.WallSeconds); *j.CPUEfficiency-want > 1e-3 || want-*j.CPUEfficiency > 1e-3 {
		t.Fatalf("efficiency %v is not CPU time over 2 CPUs × %.3f s of wall time (%v)", *j.CPUEfficiency, j.WallSeconds, want)
	}

	table := rbs(t, srv, "job", "stats", "--since", "1h")
	for _, want := range []string{"CPU_EFF", "By queue:", "By user:", me.Username, "Worst CPU efficiency:"} {
		if !strings.Contains(table, want) {
			t.Fatalf("stats table lacks %q:\n%s", want, table)
		}
	}
	lines := strings.Split(strings.TrimSpace(rbs(t, srv, "job", "stats", "--since", "1h", "--parsable")), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "JobID|Name|User|") || strings.Count(lines[1], "|") != strings.Count(lines[0], "|") {
		t.Fatalf("parsable stats: %q", lines)
	}
	if got := rbs(t, srv, "job", "stats", "--since", "1h", "--user", "nobody-else", "--parsable"); strings.Count(got, "\n") != 1 {
		t.Fatalf("stats of another user listed jobs: %q", got)
	}
	future := time.Now().Add(time.Hour).Format("2006-01-02T15:04")
	if _, stderr, err := rbsRun(srv, "job", "stats", "--since", "yesterday-ish"); err == nil || !strings.Contains(stderr, `"yesterday-ish"`) {
		t.Fatalf("a bad --since was taken: %v %s", err, stderr)
	}
	if got := rbs(t, srv, "job", "stats", "--since", future, "--until", time.Now().Add(2*time.Hour).Format(time.RFC3339), "--parsable"); strings.Count(got, "\n") != 1 {
		t.Fatalf("stats of a range in the future listed jobs: %q", got)
	}
	if got := show(t, srv, id); got.State != "COMPLETED" {
		t.Fatalf("show: %+v", got)
	}
}

// rbs job show of a pending job says where it stands in its queue and, by
// the time limits of what runs ahead, when it should start.
func TestJobQueuePositionAndExpectedStart(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "1", "--job-slots", "1")
	running := submit(t, srv, "--time", "10m", "--", "sleep", "600")
	waitFor(t, srv, running, "RUNNING", inState("RUNNING"))
	first := submit(t, srv, "--time", "5m", "--", "true")
	second := submit(t, srv, "--time", "5m", "--", "true")
	type pending struct {
		State         string  `json:"state"`
		QueuePosition int     `json:"queue_position"`
		ExpectedStart *string `json:"expected_start"`
		StartTime     *string `json:"start_time"`
	}
	get := func(id string) pending {
		var p pending
		if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	started := show(t, srv, running).StartTime
	at, err := time.Parse(time.RFC3339, *started)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id    string
		pos   int
		after time.Duration
	}{{first, 1, 10 * time.Minute}, {second, 2, 15 * time.Minute}} {
		p := get(c.id)
		if p.State != "PENDING" || p.QueuePosition != c.pos || p.ExpectedStart == nil {
			t.Fatalf("job %s: %+v, want PENDING at position %d with an expected start", c.id, p, c.pos)
		}
		exp, err := time.Parse(time.RFC3339, *p.ExpectedStart)
		if err != nil {
			t.Fatal(err)
		}
		if d := exp.Sub(at); d != c.after {
			t.Fatalf("job %s expected to start %v after the running job started, want %v", c.id, d, c.after)
		}
	}
	text := rbs(t, srv, "job", "show", second)
	if !strings.Contains(text, "Position:    2 in queue batch") || !strings.Contains(text, "Starts:      ") {
		t.Fatalf("show of a pending job:\n%s", text)
	}
	rbs(t, srv, "job", "cancel", running, first, second)
}

// With named tokens (--users-file), a job records the user whose token
// submitted it, whatever the client says it runs as; the shared token's
// jobs record the client's user. Named tokens open the web endpoint too.
func TestJobUsersFromNamedTokens(t *testing.T) {
	users := filepath.Join(t.TempDir(), "users")
	if err := os.WriteFile(users, []byte("# the team\nann ann-token\nbob bob-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--token", "shared-token", "--users-file", users)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	as := func(token string, args ...string) string {
		t.Helper()
		cmd := exec.Command(rbsBin, append([]string{"job", "submit", "--parsable"}, args...)...)
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+token, "USER=mallory")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("submit with a named token: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	ann, bob := as("ann-token", "--", "true"), as("bob-token", "--", "true")
	shared := submit(t, srv, "--", "true")
	rbs(t, srv, "job", "wait", ann, bob, shared)
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{ann: "ann", bob: "bob", shared: me.Username} {
		var j struct {
			User string `json:"user"`
		}
		if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil {
			t.Fatal(err)
		}
		if j.User != want {
			t.Errorf("job %s recorded user %q, want %q", id, j.User, want)
		}
	}
	if got := rbs(t, srv, "job", "stats", "--since", "1h", "--user", "ann", "--parsable"); strings.Count(got, "\n") != 2 || !strings.Contains(got, "|ann|") {
		t.Fatalf("stats of ann: %q", got)
	}
	resp := httpGet(t, srv, "/api/jobs?history=1", "Bearer bob-token", "")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the web API with bob's token: %s", resp.Status)
	}
	if _, _, err := rbsRun(&server{Addr: srv.Addr, token: "carol-token"}, "job", "list"); err == nil {
		t.Fatal("a token in no file was accepted")
	}
}
