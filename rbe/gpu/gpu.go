// Package gpu discovers a machine's NVIDIA GPUs through NVML. Without the
// NVIDIA library (or without cgo) it reports zero GPUs and why.
package gpu

import (
	"fmt"

	"github.com/rbs-build/rbs/proto/workerpb"
)

// Discover returns the GPUs of this machine. When none can be listed it
// returns an empty list and the reason, which callers may log.
func Discover() ([]*workerpb.Gpu, string) { return discover() }

// library is the part of NVML that discovery uses, named after go-nvml's
// functions; nvml_cgo.go binds it to go-nvml, whose nvml.Return values are
// the errors.
type library interface {
	Init() error
	Shutdown() error
	DeviceGetCount() (int, error)
	DeviceGetHandleByIndex(index int) (device, error)
}

// device is the part of an NVML device handle that discovery uses.
type device interface {
	GetUUID() (string, error)
	GetName() (string, error)
	// GetMemoryInfo returns the device's total memory in bytes.
	GetMemoryInfo() (uint64, error)
}

// discoverWith lists the GPUs lib reports. A device whose handle cannot be
// had ends the list there, with the reason; a device's UUID, name or memory
// that cannot be read is left empty.
func discoverWith(lib library) (gpus []*workerpb.Gpu, reason string) {
	defer func() {
		// go-nvml panics when the library cannot be loaded at all.
		if r := recover(); r != nil {
			gpus, reason = nil, fmt.Sprintf("NVML unavailable: %v", r)
		}
	}()
	if err := lib.Init(); err != nil {
		return nil, "NVML unavailable: " + err.Error()
	}
	defer lib.Shutdown()
	n, err := lib.DeviceGetCount()
	if err != nil {
		return nil, "NVML device count: " + err.Error()
	}
	for i := range n {
		dev, err := lib.DeviceGetHandleByIndex(i)
		if err != nil {
			return gpus, fmt.Sprintf("NVML device %d: %v", i, err)
		}
		g := &workerpb.Gpu{Index: int32(i)}
		if uuid, err := dev.GetUUID(); err == nil {
			g.Uuid = uuid
		}
		if name, err := dev.GetName(); err == nil {
			g.Name = name
		}
		if mem, err := dev.GetMemoryInfo(); err == nil {
			g.MemoryBytes = int64(mem)
		}
		gpus = append(gpus, g)
	}
	return gpus, ""
}
