package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestJobGPUVisibility runs jobs on a worker whose own environment would
// show every GPU and checks that each job sees only the GPUs pinned to it:
// none unless it asked, whatever its --env or --export say.
func TestJobGPUVisibility(t *testing.T) {
	// The worker, and the submitter (whose --export ALL carries
	// NVIDIA_VISIBLE_DEVICES), run with the whole machine visible.
	t.Setenv("CUDA_VISIBLE_DEVICES", "0,1")
	t.Setenv("NVIDIA_VISIBLE_DEVICES", "all")
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2", "--gpus", "2")

	const print = `echo "cuda=${CUDA_VISIBLE_DEVICES-unset} nvidia=${NVIDIA_VISIBLE_DEVICES-unset}"`
	for _, tc := range []struct {
		flags []string
		want  string // a regexp of the job's output
	}{
		{nil, `^cuda= nvidia=void$`},
		{[]string{"--env", "CUDA_VISIBLE_DEVICES=0,1", "--env", "NVIDIA_VISIBLE_DEVICES=all"}, `^cuda= nvidia=void$`},
		{[]string{"--export", "NONE"}, `^cuda= nvidia=void$`},
		// Without NVML the worker's GPUs are known by index; with it, by UUID.
		{[]string{"--gpus", "1"}, `^cuda=0 nvidia=(0|GPU-[^,]+)$`},
		{[]string{"--gpus", "1", "--env", "CUDA_VISIBLE_DEVICES=0,1"}, `^cuda=0 nvidia=(0|GPU-[^,]+)$`},
		{[]string{"--gpus", "2"}, `^cuda=0,1 nvidia=(0,1|GPU-[^,]+,GPU-[^,]+)$`},
	} {
		id := submit(t, srv, append(tc.flags, "--", "sh", "-c", print)...)
		rbs(t, srv, "job", "wait", id)
		if got := strings.TrimSpace(rbs(t, srv, "job", "logs", id)); !regexp.MustCompile(tc.want).MatchString(got) {
			t.Errorf("job %v saw %q, want %s", tc.flags, got, tc.want)
		}
	}
}

// Four GPUs on a worker: jobs of 1, 2 and 3 GPUs never share one, the
// one that does not fit waits for its GPUs, and job show lists the
// devices each was given.
func TestJobGPUsNeverOverlap(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "8", "--job-slots", "8", "--gpus", "4")
	release := filepath.Join(t.TempDir(), "release")
	hold := `echo "gpus=$CUDA_VISIBLE_DEVICES"; while [ ! -e "$1" ]; do sleep 0.05; done`
	one := submit(t, srv, "--gpus", "1", "--", "sh", "-c", hold, "sh", release)
	two := submit(t, srv, "--gpus", "2", "--", "sh", "-c", hold, "sh", release)
	three := submit(t, srv, "--gpus", "3", "--", "sh", "-c", hold, "sh", release)
	seen := map[string]string{}
	for _, id := range []string{one, two} {
		logs := waitLogsMatch(t, srv, id, regexp.MustCompile(`gpus=\S+\n`))
		for _, g := range strings.Split(strings.TrimSpace(strings.TrimPrefix(logs, "gpus=")), ",") {
			if other, dup := seen[g]; dup {
				t.Fatalf("GPU %s given to jobs %s and %s", g, other, id)
			}
			seen[g] = id
		}
		if shown := rbs(t, srv, "job", "show", id); !strings.Contains(shown, "gpus=[") {
			t.Fatalf("job show does not list the GPUs of job %s:\n%s", id, shown)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("GPUs in use: %v, want 3", seen)
	}
	if j := waitFor(t, srv, three, "waiting for GPUs", func(j jobView) bool { return j.State == "PENDING" && j.PendingReason == "Resources" }); j.State != "PENDING" {
		t.Fatal(j)
	}
	if shown := rbs(t, srv, "job", "show", three); !strings.Contains(shown, "not enough free GPUs (asked 3, free 1)") {
		t.Fatalf("job show of the waiting 3-GPU job:\n%s", shown)
	}
	rbs(t, srv, "job", "cancel", two)
	logs := waitLogsMatch(t, srv, three, regexp.MustCompile(`gpus=\S+\n`))
	for _, g := range strings.Split(strings.TrimSpace(strings.TrimPrefix(logs, "gpus=")), ",") {
		if seen[g] == one {
			t.Fatalf("the 3-GPU job got GPU %s of job %s, still running", g, one)
		}
	}
	os.WriteFile(release, nil, 0o644)
	rbs(t, srv, "job", "wait", one, three)
}
