//go:build cgo && linux

package gpu

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestNVMLError checks that the binding passes on NVML's failures as
// errors (whose text, nvml.ErrorString's, becomes the reason) and its
// successes as none.
func TestNVMLError(t *testing.T) {
	if err := nvmlError(nvml.SUCCESS); err != nil {
		t.Errorf("nvmlError(SUCCESS) = %v, want nil", err)
	}
	for _, ret := range []nvml.Return{nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_UNINITIALIZED, nvml.ERROR_GPU_IS_LOST} {
		if err := nvmlError(ret); err != ret {
			t.Errorf("nvmlError(%s) = %v, want the nvml.Return itself", nvml.ErrorString(ret), err)
		}
	}
}
