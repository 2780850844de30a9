//go:build !cgo || !linux

package gpu

import "github.com/rbs-build/rbs/proto/workerpb"

func discover() ([]*workerpb.Gpu, string) {
	return nil, "GPU discovery needs a cgo build on Linux"
}
