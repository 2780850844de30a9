package units

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in      string
		want    Size
		wantErr string
	}{
		{"0", 0, ""},
		{"100", 100, ""},
		{"100B", 100, ""},
		{"4K", 4096, ""},
		{"512MiB", 512 << 20, ""},
		{"50GiB", 50 << 30, ""},
		{"50gib", 50 << 30, ""},
		{"2G", 2 << 30, ""},
		{"1.5GiB", 3 << 29, ""},
		{"10GB", 10e9, ""},
		{"1TiB", 1 << 40, ""},
		{"", 0, "want a number"},
		{"GiB", 0, "want a number"},
		{"-1GiB", 0, "must not be negative"},
		{"10XB", 0, "unknown unit"},
		{"1.2.3G", 0, "not a number"},
		{"1.5", 0, "whole number"},
		{"99999999999TiB", 0, "too large"},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), tt.in) {
				t.Errorf("ParseSize(%q) = %v, %v; want error containing %q and the value", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for in, want := range map[Size]string{0: "0B", 100: "100B", 4096: "4KiB", 50 << 30: "50GiB", 3 << 29: "1536MiB"} {
		if got := in.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(in), got, want)
		}
	}
}

// A bare number is GiB for GiB (--memory-gb) and MiB for MiB (sbatch's
// --mem); a unit given wins in both.
func TestBareUnits(t *testing.T) {
	tests := []struct {
		in       string
		gib, mib Size
	}{
		{"4", 4 << 30, 4 << 20},
		{"0.5", 1 << 29, 1 << 19},
		{"4G", 4 << 30, 4 << 30},
		{"4Gi", 4 << 30, 4 << 30},
		{"512MiB", 512 << 20, 512 << 20},
		{"2GB", 2e9, 2e9},
		{"100B", 100, 100},
		{"0", 0, 0},
	}
	for _, tt := range tests {
		var g GiB
		var m MiB
		if err := g.UnmarshalText([]byte(tt.in)); err != nil || Size(g) != tt.gib {
			t.Errorf("GiB %q = %d, %v; want %d", tt.in, g, err, tt.gib)
		}
		if err := m.UnmarshalText([]byte(tt.in)); err != nil || Size(m) != tt.mib {
			t.Errorf("MiB %q = %d, %v; want %d", tt.in, m, err, tt.mib)
		}
	}
	var g GiB
	if err := g.UnmarshalText([]byte("4Q")); err == nil || !strings.Contains(err.Error(), `"4Q"`) {
		t.Errorf(`GiB "4Q": %v, want an error naming it`, err)
	}
}
