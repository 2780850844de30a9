//go:build cgo && linux

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/rbs-build/rbs/proto/workerpb"
)

func discover() (gpus []*workerpb.Gpu, reason string) {
	defer func() {
		// go-nvml panics when the library cannot be loaded at all.
		if r := recover(); r != nil {
			gpus, reason = nil, fmt.Sprintf("NVML unavailable: %v", r)
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		return nil, "NVML unavailable: " + nvml.ErrorString(ret)
	}
	defer nvml.Shutdown()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, "NVML device count: " + nvml.ErrorString(ret)
	}
	for i := 0; i < n; i++ {
		dev, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return gpus, fmt.Sprintf("NVML device %d: %s", i, nvml.ErrorString(ret))
		}
		g := &workerpb.Gpu{Index: int32(i)}
		if uuid, ret := dev.GetUUID(); ret == nvml.SUCCESS {
			g.Uuid = uuid
		}
		if name, ret := dev.GetName(); ret == nvml.SUCCESS {
			g.Name = name
		}
		if mem, ret := dev.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryBytes = int64(mem.Total)
		}
		gpus = append(gpus, g)
	}
	return gpus, ""
}
