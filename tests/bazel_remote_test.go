package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var exampleOutputs = []string{"words.txt", "upper.txt", "counted.txt", "greeting.txt"}

func readOutputs(t *testing.T, w *bazelWorkspace) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range exampleOutputs {
		b, err := os.ReadFile(filepath.Join(w.dir, "bazel-bin", name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

func TestBazelRemoteExecution(t *testing.T) {
	w := newBazelWorkspace(t)
	srv := startServer(t)
	startWorker(t, srv, "w1", "--action-slots", "2")
	startWorker(t, srv, "w2", "--action-slots", "2")
	remote := "--remote_executor=grpc://" + srv.Addr

	w.mustBazel("build", "//...")
	local := readOutputs(t, w)
	w.mustBazel("clean")

	first := w.mustBazel("test", remote, "//...")
	kinds := processes(t, first)
	if kinds["remote"] == 0 || kinds["linux-sandbox"] != 0 || kinds["local"] != 0 {
		t.Fatalf("actions did not all run remotely: %v\n%s", kinds, first)
	}
	if !strings.Contains(first, "PASSED") {
		t.Fatalf("sh_test did not pass remotely:\n%s", first)
	}
	if got := readOutputs(t, w); !equalMaps(got, local) {
		t.Fatalf("remote outputs differ from local ones:\nremote %q\nlocal  %q", got, local)
	}

	w.mustBazel("clean")
	assertAllCacheHits(t, w.mustBazel("test", remote, "//..."))

	var st struct {
		Actions struct {
			Completed int `json:"completed"`
		} `json:"actions"`
		Workers []struct {
			Name string `json:"name"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Workers) != 2 || st.Actions.Completed < kinds["remote"] {
		t.Fatalf("status: %+v, want 2 workers and at least %d executed actions", st, kinds["remote"])
	}

	out, err := w.bazel("build", remote, "//fail:fail")
	if err == nil {
		t.Fatalf("the failing action succeeded:\n%s", out)
	}
	for _, want := range []string{"Exit 3", "this action fails on purpose"} {
		if !strings.Contains(out, want) {
			t.Fatalf("Bazel output does not show %q:\n%s", want, out)
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A worker killed with SIGKILL in the middle of an action loses the action,
// not the build: the server runs it again on the other worker.
// slowAction makes //slow:slow a genrule whose action appends a line to
// the file runs each time it starts, then waits until the file release
// exists.
func slowAction(t *testing.T, w *bazelWorkspace) (runs, release string) {
	t.Helper()
	dir := t.TempDir()
	runs, release = filepath.Join(dir, "runs"), filepath.Join(dir, "release")
	build := fmt.Sprintf(`genrule(
    name = "slow",
    outs = ["slow.txt"],
    cmd = "echo ran >> %s; while [ ! -e %s ]; do sleep 0.05; done; echo done > $@",
    tags = ["manual"],
)
`, runs, release)
	if err := os.WriteFile(filepath.Join(w.dir, "slow", "BUILD"), []byte(build), 0o644); err != nil {
		t.Fatal(err)
	}
	return runs, release
}

func TestBazelSurvivesWorkerLoss(t *testing.T) {
	w := newBazelWorkspace(t)
	// The action notes each run, then waits for the release: the worker is
	// killed while it certainly runs the action.
	runs, release := slowAction(t, w)
	// A worker killed is lost once unheard of for --worker-timeout.
	srv := startServer(t, "--worker-timeout", "3s")
	workers := map[string]*worker{
		"w1": startWorker(t, srv, "w1", "--action-slots", "1"),
		"w2": startWorker(t, srv, "w2", "--action-slots", "1"),
	}
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Without its own retries, Bazel sees the build through only if the
		// server runs the action again.
		out, err := w.bazel("build", "--remote_executor=grpc://"+srv.Addr, "--remote_retries=0", "//slow:slow")
		done <- result{out, err}
	}()
	// waitRuns waits until the action has started n times.
	waitRuns := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
			b, _ := os.ReadFile(runs)
			if strings.Count(string(b), "ran\n") >= n {
				return
			}
			select {
			case r := <-done:
				t.Fatalf("the build ended before the slow action started %d times: %v\n%s", n, r.err, r.out)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("the slow action started %d times, not %d", strings.Count(string(b), "ran\n"), n)
			}
		}
	}

	waitRuns(1)
	var victim string
	for deadline := time.Now().Add(time.Minute); victim == ""; time.Sleep(100 * time.Millisecond) {
		var st struct {
			Workers []struct {
				Name        string `json:"name"`
				ActionSlots struct {
					Used int `json:"used"`
				} `json:"action_slots"`
			} `json:"workers"`
		}
		if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		for _, wk := range st.Workers {
			if wk.ActionSlots.Used > 0 {
				victim = wk.Name
			}
		}
		if victim == "" && time.Now().After(deadline) {
			t.Fatalf("the slow action runs, but no worker shows a used slot: %+v", st)
		}
	}
	if err := workers[victim].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitRuns(2)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("build failed after worker %s was killed: %v\n%s", victim, r.err, r.out)
	}
	b, err := os.ReadFile(filepath.Join(w.dir, "bazel-bin", "slow", "slow.txt"))
	if err != nil || string(b) != "done\n" {
		t.Fatalf("slow.txt = %q, %v", b, err)
	}
	if !strings.Contains(srv.log.String(), "worker disconnected") {
		t.Fatalf("the server did not notice the lost worker:\n%s", srv.log.String())
	}
}

// Jobs use their own slot class: a fleet whose job slots are all busy still
// runs a build's remote actions.
func TestBazelBuildsWhileJobSlotsAreFull(t *testing.T) {
	w := newBazelWorkspace(t)
	srv := startServer(t)
	startWorker(t, srv, "w1", "--job-slots", "1", "--action-slots", "2")
	startWorker(t, srv, "w2", "--job-slots", "1", "--action-slots", "2")
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, submit(t, srv, "--", "sleep", "infinity")) // until cancelled
	}
	for _, id := range ids[:2] {
		waitFor(t, srv, id, "RUNNING", inState("RUNNING"))
	}
	if j := show(t, srv, ids[2]); j.State != "PENDING" || j.PendingReason != "Resources" {
		t.Fatalf("third job: %+v", j)
	}
	out := w.mustBazel("build", "--remote_executor=grpc://"+srv.Addr, "//...")
	if kinds := processes(t, out); kinds["remote"] == 0 {
		t.Fatalf("no remote actions: %v\n%s", kinds, out)
	}
	var st struct {
		Workers []struct {
			JobSlots struct {
				Used, Total int
			} `json:"job_slots"`
		} `json:"workers"`
		Jobs map[string]int `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Workers) != 2 || st.Workers[0].JobSlots.Used != 1 || st.Workers[1].JobSlots.Used != 1 || st.Jobs["RUNNING"] != 2 || st.Jobs["PENDING"] != 1 {
		t.Fatalf("status while the jobs run: %+v", st)
	}
	rbs(t, srv, append([]string{"job", "cancel"}, ids...)...)
}
