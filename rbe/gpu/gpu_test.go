package gpu

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
	"google.golang.org/protobuf/proto"
)

// fakeNVML is a library with the devices and failures a test gives it.
type fakeNVML struct {
	devices   []fakeDevice
	initErr   error
	countErr  error
	handleErr map[int]error
	panicIn   string // the method that panics, as go-nvml does without its library
	shutdowns int
}

type fakeDevice struct {
	uuid, name string
	memory     uint64
	err        error // what every getter returns when set
}

func (f *fakeNVML) maybePanic(method string) {
	if f.panicIn == method {
		panic("libnvidia-ml.so.1: cannot open shared object file")
	}
}

func (f *fakeNVML) Init() error {
	f.maybePanic("Init")
	return f.initErr
}

func (f *fakeNVML) Shutdown() error {
	f.shutdowns++
	return nil
}

func (f *fakeNVML) DeviceGetCount() (int, error) {
	f.maybePanic("DeviceGetCount")
	return len(f.devices), f.countErr
}

func (f *fakeNVML) DeviceGetHandleByIndex(i int) (device, error) {
	if err := f.handleErr[i]; err != nil {
		return nil, err
	}
	return &fakeHandle{f, f.devices[i]}, nil
}

type fakeHandle struct {
	lib *fakeNVML
	fakeDevice
}

func (d *fakeHandle) GetUUID() (string, error) { return d.uuid, d.err }

func (d *fakeHandle) GetName() (string, error) {
	d.lib.maybePanic("GetName")
	return d.name, d.err
}

func (d *fakeHandle) GetMemoryInfo() (uint64, error) { return d.memory, d.err }

func TestDiscoverWith(t *testing.T) {
	h200 := fakeDevice{uuid: "GPU-4b6d3f4e-0000-1111-2222-333344445555", name: "NVIDIA H200", memory: 150754820096}
	l40 := fakeDevice{uuid: "GPU-9a8b7c6d-6666-7777-8888-999900001111", name: "NVIDIA L40S", memory: 48305799168}
	h200Gpu := &workerpb.Gpu{Index: 0, Uuid: h200.uuid, Name: h200.name, MemoryBytes: 150754820096}
	l40Gpu := &workerpb.Gpu{Index: 1, Uuid: l40.uuid, Name: l40.name, MemoryBytes: 48305799168}
	tests := []struct {
		name          string
		lib           fakeNVML
		want          []*workerpb.Gpu
		wantReason    string
		wantShutdowns int
	}{
		{"two devices", fakeNVML{devices: []fakeDevice{h200, l40}}, []*workerpb.Gpu{h200Gpu, l40Gpu}, "", 1},
		{"no devices", fakeNVML{}, nil, "", 1},
		{"no library", fakeNVML{initErr: errors.New("ERROR_LIBRARY_NOT_FOUND")}, nil, "NVML unavailable: ERROR_LIBRARY_NOT_FOUND", 0},
		{"count fails", fakeNVML{devices: []fakeDevice{h200}, countErr: errors.New("ERROR_UNKNOWN")}, nil, "NVML device count: ERROR_UNKNOWN", 1},
		{"second handle fails", fakeNVML{devices: []fakeDevice{h200, l40}, handleErr: map[int]error{1: errors.New("ERROR_GPU_IS_LOST")}},
			[]*workerpb.Gpu{h200Gpu}, "NVML device 1: ERROR_GPU_IS_LOST", 1},
		{"first handle fails", fakeNVML{devices: []fakeDevice{h200, l40}, handleErr: map[int]error{0: errors.New("ERROR_NO_PERMISSION")}},
			nil, "NVML device 0: ERROR_NO_PERMISSION", 1},
		{"attributes unreadable", fakeNVML{devices: []fakeDevice{{uuid: "x", name: "y", memory: 1, err: errors.New("ERROR_NOT_SUPPORTED")}}},
			[]*workerpb.Gpu{{Index: 0}}, "", 1},
		{"Init panics", fakeNVML{panicIn: "Init"}, nil, "NVML unavailable: libnvidia-ml.so.1: cannot open shared object file", 0},
		{"count panics", fakeNVML{devices: []fakeDevice{h200}, panicIn: "DeviceGetCount"}, nil, "NVML unavailable: libnvidia-ml.so.1: cannot open shared object file", 1},
		{"a device panics", fakeNVML{devices: []fakeDevice{h200, l40}, panicIn: "GetName"}, nil, "NVML unavailable: libnvidia-ml.so.1: cannot open shared object file", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gpus, reason := discoverWith(&tt.lib)
			if reason != tt.wantReason {
				t.Errorf("reason %q, want %q", reason, tt.wantReason)
			}
			if len(gpus) != len(tt.want) {
				t.Fatalf("%d GPUs %v, want %d %v", len(gpus), gpus, len(tt.want), tt.want)
			}
			for i := range gpus {
				if !proto.Equal(gpus[i], tt.want[i]) {
					t.Errorf("GPU %d: %v, want %v", i, gpus[i], tt.want[i])
				}
			}
			if tt.lib.shutdowns != tt.wantShutdowns {
				t.Errorf("Shutdown called %d times, want %d", tt.lib.shutdowns, tt.wantShutdowns)
			}
		})
	}
}

// TestDiscoverOnThisMachine checks the real binding: a machine with NVIDIA
// devices lists them with their UUIDs, names and memory; one without lists
// none and says why.
func TestDiscoverOnThisMachine(t *testing.T) {
	gpus, reason := Discover()
	t.Logf("%d GPUs; %s", len(gpus), reason)
	nodes, err := filepath.Glob("/dev/nvidia[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) == 0 {
		if len(gpus) != 0 || reason == "" {
			t.Fatalf("no /dev/nvidiaN here, but Discover = %v, %q; want no GPUs and a reason", gpus, reason)
		}
		return
	}
	if len(gpus) == 0 || reason != "" {
		t.Fatalf("%v exist, but Discover = %v, %q", nodes, gpus, reason)
	}
	for _, g := range gpus {
		if g.Uuid == "" || g.Name == "" || g.MemoryBytes == 0 {
			t.Errorf("GPU %d lacks its UUID, name or memory: %v", g.Index, g)
		}
	}
}
