package tests

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// A maintenance window made with rbs job reserve holds its workers back
// from jobs whose time limit would run into it, says so in their pending
// reason and placement, survives a restart of the server, and goes with
// --cancel.
func TestMaintenanceWindow(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	if out := rbs(t, srv, "job", "reserve", "kernel", "--in", "1h", "--for", "1h", "--reason", "kernel upgrade", "--workers", "w1"); !strings.HasPrefix(out, "Reserved kernel from ") {
		t.Fatalf("reserve printed %q", out)
	}
	if out, stderr, err := rbsRun(srv, "job", "reserve", "typo", "--for", "1h", "--workers", "w9"); err == nil || !strings.Contains(stderr, "no worker named w9 (workers: w1)") {
		t.Fatalf("a window on an unknown worker: %v %s %s", err, out, stderr)
	}

	long := submit(t, srv, "--time", "2h", "--", "true")
	short := submit(t, srv, "--time", "30m", "--", "true")
	rbs(t, srv, "job", "wait", short)
	waitFor(t, srv, long, "held back by the window", func(j jobView) bool { return j.PendingReason == "Reservation" })
	if shown := rbs(t, srv, "job", "show", long); !strings.Contains(shown, "1 worker: reserved for maintenance kernel (kernel upgrade) from ") {
		t.Fatalf("job show of the held job:\n%s", shown)
	}

	// The window survives a restart of the server.
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
	srv.start(t, srv.Addr)
	var windows []struct {
		Name    string   `json:"name"`
		Reason  string   `json:"reason"`
		Workers []string `json:"workers"`
		Active  bool     `json:"active"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "reserve", "--json")), &windows); err != nil || len(windows) != 1 ||
		windows[0].Name != "kernel" || windows[0].Reason != "kernel upgrade" || windows[0].Active || len(windows[0].Workers) != 1 {
		t.Fatalf("windows after a restart: %+v, %v", windows, err)
	}
	if table := rbs(t, srv, "job", "reserve"); !strings.Contains(table, "kernel") || !strings.Contains(table, "upcoming") {
		t.Fatalf("the list of windows:\n%s", table)
	}

	// Gone, the job it held starts.
	if out := rbs(t, srv, "job", "reserve", "--cancel", "kernel"); !strings.Contains(out, "Removed reservation kernel") {
		t.Fatalf("--cancel printed %q", out)
	}
	rbs(t, srv, "job", "wait", long)
	if out := rbs(t, srv, "job", "reserve", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("windows after --cancel: %s", out)
	}

	// A window holds build actions back too: with the one worker in it, a
	// remote build's action waits in the queue until the window is gone.
	// --in 0s is a window that starts now.
	rbs(t, srv, "job", "reserve", "now", "--in", "0s", "--for", "1h", "--reason", "disk swap")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	build := exec.Command(rbsBin, "build", "--remote", srv.Addr, "//app:words")
	build.Dir = ws
	var out strings.Builder
	build.Stdout, build.Stderr = &out, &out
	if err := build.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- build.Wait() }()
	eventually(t, "the build's action to queue", func() bool {
		var st struct {
			Queue struct {
				Queued int `json:"queued_actions"`
			} `json:"queue"`
		}
		if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("the build ended (%v) while its only worker was in maintenance:\n%s", err, out.String())
		default:
		}
		return st.Queue.Queued == 1
	}, out.String)
	rbs(t, srv, "job", "reserve", "--cancel", "now")
	if err := <-done; err != nil {
		t.Fatalf("the build after the window: %v\n%s", err, out.String())
	}
}
