package rules

import "testing"

func TestCompareVersions(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.0", "1.0", 0},
		{"1.0", "1.1", -1},
		{"1.10", "1.9", 1},
		{"1.2.3", "1.2", 1},
		{"2.0-rc1", "2.0", -1},
		{"2.0", "2.0-rc1", 1},
		{"2.0-rc1", "2.0-rc2", -1},
		{"1.0.bcr.1", "1.0", 1},
		{"1.0.bcr.1", "1.0.1", 1}, // a word after a number, as Bazel orders identifiers
		{"0.0.9", "0.1.0", -1},
		{"1.0+build", "1.0", 0},
	} {
		got := compareVersions(tc.a, tc.b)
		if got < 0 {
			got = -1
		} else if got > 0 {
			got = 1
		}
		if got != tc.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
