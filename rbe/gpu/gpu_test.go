package gpu

import (
	"os"
	"testing"
)

// TestDiscover checks that discovery never fails: on a machine without the
// NVIDIA library it reports zero GPUs with a reason; with one it lists
// devices with UUIDs.
func TestDiscover(t *testing.T) {
	gpus, reason := Discover()
	if len(gpus) == 0 && reason == "" {
		t.Fatal("no GPUs and no reason")
	}
	for _, g := range gpus {
		if g.Uuid == "" {
			t.Errorf("GPU %d has no UUID", g.Index)
		}
	}
	if _, err := os.Stat("/dev/nvidia0"); err == nil && len(gpus) == 0 {
		t.Errorf("/dev/nvidia0 exists but no GPU was found: %s", reason)
	}
	t.Logf("%d GPUs; %s", len(gpus), reason)
}
