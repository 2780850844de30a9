// Package gpu discovers a machine's NVIDIA GPUs through NVML. Without the
// NVIDIA library (or without cgo) it reports zero GPUs and why.
package gpu

import "github.com/rbs-build/rbs/proto/workerpb"

// Discover returns the GPUs of this machine. When none can be listed it
// returns an empty list and the reason, which callers may log.
func Discover() ([]*workerpb.Gpu, string) { return discover() }
