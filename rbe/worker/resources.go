package worker

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/platform"
)

// MemoryBytes returns the machine's total memory from /proc/meminfo, or 0
// when it cannot be read.
func MemoryBytes() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// ParseProperty reads a platform property given as NAME=VALUE.
func ParseProperty(s string) (*workerpb.Property, error) {
	name, value, ok := strings.Cut(s, "=")
	if !ok || name == "" || value == "" {
		return nil, fmt.Errorf("invalid property %q: want NAME=VALUE, such as gpu=a100", s)
	}
	if name == platform.OSFamily || name == platform.ISA {
		return nil, fmt.Errorf("invalid property %q: %s comes from the worker's platform; give --platform OS-ARCH instead", s, name)
	}
	if strings.ContainsAny(name, " \t\n") {
		return nil, fmt.Errorf("invalid property %q: the name must not contain spaces", s)
	}
	return &workerpb.Property{Name: name, Value: value}, nil
}

// SelectGPUs turns a --gpus value into the GPUs to offer: "auto" offers the
// discovered ones; a number N offers N of them, padding with GPUs known only
// by index when fewer were discovered.
func SelectGPUs(spec string, discovered []*workerpb.Gpu) ([]*workerpb.Gpu, error) {
	if spec == "auto" {
		return discovered, nil
	}
	n, err := strconv.Atoi(spec)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("invalid --gpus %q: want a non-negative number or auto", spec)
	}
	out := make([]*workerpb.Gpu, 0, n)
	for i := 0; i < n; i++ {
		if i < len(discovered) {
			out = append(out, discovered[i])
		} else {
			out = append(out, &workerpb.Gpu{Index: int32(i)})
		}
	}
	return out, nil
}
