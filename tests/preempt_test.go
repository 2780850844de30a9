package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A job of higher priority that cannot start preempts a --preemptible one:
// the victim gets SIGTERM, writes its checkpoint in the grace period, goes
// back to PENDING with the attempt PREEMPTED, and its next attempt resumes
// from the checkpoint once the preemptor is done.
func TestPreemption(t *testing.T) {
	srv := startServer(t, "--preempt-grace", "20s")
	startWorker(t, srv, "w1", "--cpus", "1", "--job-slots", "1")
	release := filepath.Join(t.TempDir(), "release")
	counter := `mkdir -p ckpt
n=$(cat ckpt/n 2>/dev/null || echo 0)
echo "attempt $RBS_ATTEMPT from $n"
trap 'echo "stopped at $n"; echo $n > ckpt/n; exit 143' TERM
while [ ! -e "$1" ]; do n=$((n+1)); echo $n > ckpt/n; echo "count $n"; sleep 0.1 & wait $!; done`
	victim := submit(t, srv, "--preemptible", "--checkpoint-dir", "ckpt", "--", "sh", "-c", counter, "sh", release)
	waitLogs(t, srv, victim, "count 3\n")

	urgent := submit(t, srv, "--priority", "100", "--", "echo", "urgent")
	rbs(t, srv, "job", "wait", urgent)
	v := waitFor(t, srv, victim, "running again", func(j jobView) bool { return j.State == "RUNNING" && j.Attempts == 2 })
	logs := waitLogsMatch(t, srv, victim, regexp.MustCompile(`attempt 2 from (\d+)`))
	stopped := regexp.MustCompile(`stopped at (\d+)`).FindStringSubmatch(logs)
	resumed := regexp.MustCompile(`attempt 2 from (\d+)`).FindStringSubmatch(logs)
	if stopped == nil || resumed == nil {
		t.Fatalf("the victim's output:\n%s", logs)
	}
	if n, _ := strconv.Atoi(resumed[1]); n < 3 || resumed[1] != stopped[1] {
		t.Fatalf("attempt 2 resumed from %s, want where attempt 1 stopped (%s, at least 3):\n%s", resumed[1], stopped[1], logs)
	}
	if shown := rbs(t, srv, "job", "show", victim); !strings.Contains(shown, "1 PREEMPTED") || !strings.Contains(shown, "preempted by job "+urgent) {
		t.Fatalf("job show of the victim:\n%s", shown)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if j := waitFor(t, srv, victim, "COMPLETED", inState("COMPLETED")); j.Attempts != 2 || v.Workers[0] != "w1" {
		t.Fatalf("the victim: %+v", j)
	}
}

// waitLogsMatch polls a job's output until re matches it, and returns it.
func waitLogsMatch(t *testing.T, srv *server, id string, re *regexp.Regexp) string {
	t.Helper()
	var logs string
	waitFor(t, srv, id, "printing "+re.String(), func(jobView) bool {
		logs = rbs(t, srv, "job", "logs", id)
		return re.MatchString(logs)
	})
	return logs
}
