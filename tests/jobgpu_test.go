package tests

import (
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
