package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestJobInteractive drives rbs job submit -i: the client's stdin is the
// job's, the job's output comes to its stdout, and its exit status is the
// job's.
func TestJobInteractive(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")
	big := strings.Repeat("0123456789abcdef", 3<<16) // 3 MiB: over what the server holds
	for _, tc := range []struct {
		name    string
		stdin   string
		command []string
		stdout  string
		fails   string // in stderr when the client must fail
		status  int    // the client's exit status
	}{
		{"lines in, end of file closes stdin", "a\nb\n", []string{"sh", "-c", "while read l; do echo got $l; done; echo eof"}, "got a\ngot b\neof\n", "", 0},
		{"no stdin at all", "", []string{"sh", "-c", "cat; echo eof"}, "eof\n", "", 0},
		{"the job's failure and exit code are the client's", "x\n", []string{"sh", "-c", "cat; exit 4"}, "x\n", "FAILED (exit 4)", 4},
		{"more stdin than the server holds waits for the job to read it", big, []string{"sh", "-c", "wc -c | tr -d ' '"}, fmt.Sprintf("%d\n", len(big)), "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A client that never ends fails the test instead of hanging it.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, rbsBin, append([]string{"job", "submit", "-i", "--"}, tc.command...)...)
			cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN="+srv.token)
			cmd.Stdin = strings.NewReader(tc.stdin)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if string(out) != tc.stdout {
				t.Fatalf("stdout %.200q, want %.200q; stderr:\n%s", out, tc.stdout, stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), "Submitted job ") {
				t.Fatalf("stderr %q: want the submission line there", stderr.String())
			}
			switch {
			case tc.fails == "" && err != nil:
				t.Fatalf("client failed: %v\n%s", err, stderr.String())
			case tc.fails != "" && err == nil:
				t.Fatalf("client exited 0; want it to fail with %q", tc.fails)
			case tc.fails != "" && !strings.Contains(stderr.String(), tc.fails):
				t.Fatalf("stderr %q, want %q in it", stderr.String(), tc.fails)
			case cmd.ProcessState.ExitCode() != tc.status:
				t.Fatalf("client exited %d, want the job's %d", cmd.ProcessState.ExitCode(), tc.status)
			}
		})
	}

	// A job submitted without -i reads end of file at once: cat ends.
	id := submit(t, srv, "-t", "60s", "--", "sh", "-c", "cat; echo done")
	rbs(t, srv, "job", "wait", id)
	if got := rbs(t, srv, "job", "logs", id); got != "done\n" {
		t.Fatalf("logs of a job that reads stdin without -i: %q", got)
	}
}
