package worker

import (
	"strings"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
)

func TestParseProperty(t *testing.T) {
	tests := []struct {
		in, name, value, err string
	}{
		{"gpu=a100", "gpu", "a100", ""},
		{"pool=a=b", "pool", "a=b", ""},
		{"gpu", "", "", "want NAME=VALUE"},
		{"=x", "", "", "want NAME=VALUE"},
		{"x=", "", "", "want NAME=VALUE"},
		{"a b=c", "", "", "spaces"},
		{"ISA=arm-a64", "", "", "give --platform"},
		{"OSFamily=windows", "", "", "give --platform"},
	}
	for _, tt := range tests {
		p, err := ParseProperty(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseProperty(%q) = %v, %v; want error %q naming the value", tt.in, p, err, tt.err)
			}
			continue
		}
		if err != nil || p.Name != tt.name || p.Value != tt.value {
			t.Errorf("ParseProperty(%q) = %v, %v", tt.in, p, err)
		}
	}
}

func TestSelectGPUs(t *testing.T) {
	found := []*workerpb.Gpu{{Index: 0, Uuid: "GPU-a"}}
	tests := []struct {
		spec string
		n    int
		err  bool
	}{{"auto", 1, false}, {"0", 0, false}, {"2", 2, false}, {"-1", 0, true}, {"many", 0, true}}
	for _, tt := range tests {
		gpus, err := SelectGPUs(tt.spec, found)
		if (err != nil) != tt.err || len(gpus) != tt.n {
			t.Errorf("SelectGPUs(%q) = %v, %v", tt.spec, gpus, err)
		}
	}
	if gpus, _ := SelectGPUs("2", found); gpus[0].Uuid != "GPU-a" || gpus[1].Index != 1 {
		t.Errorf("SelectGPUs(2) = %v", gpus)
	}
}

func TestMemoryBytes(t *testing.T) {
	if MemoryBytes() <= 0 {
		t.Fatal("no memory found in /proc/meminfo")
	}
}
