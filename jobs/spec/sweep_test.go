package spec

import (
	"strings"
	"testing"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		in, name, values, err string
	}{
		{"lr=0.1,0.01", "lr", "0.1 0.01", ""},
		{"BATCH_2=32", "BATCH_2", "32", ""},
		{"lr", "", "", `invalid sweep "lr": want NAME=VALUE`},
		{"=1,2", "", "", `parameter name ""`},
		{"l-r=1", "", "", `parameter name "l-r"`},
		{"lr=", "", "", "an empty value"},
		{"lr=1,,2", "", "", "an empty value"},
		{"lr=1,1", "", "", `value "1" is given twice`},
	} {
		name, values, err := ParseSweep(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSweep(%q) = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || name != tc.name || strings.Join(values, " ") != tc.values {
			t.Errorf("ParseSweep(%q) = %q %q %v", tc.in, name, values, err)
		}
	}
}
