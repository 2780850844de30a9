//go:build cgo && linux

package gpu

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/rbs-build/rbs/proto/workerpb"
)

func discover() ([]*workerpb.Gpu, string) { return discoverWith(goNVML{}) }

// goNVML is the library through go-nvml, which loads libnvidia-ml when
// Init is called.
type goNVML struct{}

func (goNVML) Init() error     { return nvmlError(nvml.Init()) }
func (goNVML) Shutdown() error { return nvmlError(nvml.Shutdown()) }

func (goNVML) DeviceGetCount() (int, error) {
	n, ret := nvml.DeviceGetCount()
	return n, nvmlError(ret)
}

func (goNVML) DeviceGetHandleByIndex(index int) (device, error) {
	dev, ret := nvml.DeviceGetHandleByIndex(index)
	if err := nvmlError(ret); err != nil {
		return nil, err
	}
	return goDevice{dev}, nil
}

type goDevice struct{ dev nvml.Device }

func (d goDevice) GetUUID() (string, error) {
	uuid, ret := d.dev.GetUUID()
	return uuid, nvmlError(ret)
}

func (d goDevice) GetName() (string, error) {
	name, ret := d.dev.GetName()
	return name, nvmlError(ret)
}

func (d goDevice) GetMemoryInfo() (uint64, error) {
	mem, ret := d.dev.GetMemoryInfo()
	return mem.Total, nvmlError(ret)
}

// nvmlError is nil for SUCCESS, else the nvml.Return itself, whose Error
// is NVML's name for it (ERROR_LIBRARY_NOT_FOUND, ...).
func nvmlError(ret nvml.Return) error {
	if ret == nvml.SUCCESS {
		return nil
	}
	return ret
}
