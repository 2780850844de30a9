package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestQuickstart runs the README's first command, the quickstart script,
// as a new user would: the main job end to end on an embedded cluster.
func TestQuickstart(t *testing.T) {
	requireTool(t, "python3")
	outputs := filepath.Join(t.TempDir(), "outputs")
	out, err := run(t, "..", []string{"RBS_REMOTE=", "QUICKSTART_OUTPUTS=" + outputs}, "./examples/quickstart.sh")
	if err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"input_root"`, `"nodes": 2`, "[rank 0] rank 0: epoch 5: failing on purpose", "retrying (1 of 2)", "attempt 2 on workers ",
		"[rank 0] rank 0: resuming from epoch 4", "[rank 1] rank 1: resuming from epoch 4", "[rank 1] rank 1: all_reduce check: 3 (world size 2)",
		"Attempt:", "prepare", "afterok:", "afterany:", "The training run's outputs are in " + outputs,
	} {
		if !strings.Contains(out, want) {
			t.Fatalf("quickstart output lacks %q:\n%s", want, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(outputs, "out", "metrics.json"))
	if err != nil || !strings.Contains(string(b), `"resumed_from": 4`) || !strings.Contains(string(b), `"world_size": 2`) || !strings.Contains(string(b), `"weights_agree": true`) {
		t.Fatalf("metrics.json: %v %s", err, b)
	}
	if _, err := os.Stat(filepath.Join(outputs, "ckpt", "state.json")); err != nil {
		t.Fatalf("the checkpoint did not come back: %v", err)
	}
}

// TestDemos runs examples/demos.sh: Bazel with rbs as its remote cache,
// rbs build and test on the cluster, and a job array.
func TestDemos(t *testing.T) {
	requireTool(t, "bazel")
	requireTool(t, "python3")
	out, err := run(t, "..", []string{"RBS_REMOTE="}, "./examples/demos.sh")
	if err != nil {
		t.Fatalf("demos failed: %v\n%s", err, out)
	}
	for _, want := range []string{"remote cache hit", "2 tests: 2 passed, 0 failed", "task 3 of job 1", "stamp: rbs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("demos output lacks %q:\n%s", want, out)
		}
	}
}
