package tests

import (
	"strings"
	"testing"
)

// TestQuickstart runs the README's first command, the quickstart script,
// as a new user would.
func TestQuickstart(t *testing.T) {
	requireTool(t, "bazel")
	requireTool(t, "python3")
	out, err := run(t, "..", []string{"RBS_REMOTE="}, "./examples/quickstart.sh")
	if err != nil {
		t.Fatalf("quickstart failed: %v\n%s", err, out)
	}
	for _, want := range []string{"remote cache hit", "2 tests: 2 passed, 0 failed", "task 3 of job 1", "stamp: rbs"} {
		if !strings.Contains(out, want) {
			t.Fatalf("quickstart output lacks %q:\n%s", want, out)
		}
	}
}
