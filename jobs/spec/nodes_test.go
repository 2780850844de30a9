package spec

import (
	"strings"
	"testing"
)

func TestParseNodes(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi int
		err    string
	}{
		{in: "1", lo: 1, hi: 1},
		{in: " 4 ", lo: 4, hi: 4},
		{in: "2-4", lo: 2, hi: 4},
		{in: "3-3", lo: 3, hi: 3},
		{in: "0", err: "want at least 1"},
		{in: "4-2", err: "the minimum is above the maximum"},
		{in: "two", err: `node count "two": not an integer`},
		{in: "2-", err: "not an integer"},
		{in: "-3", err: "not an integer"},
		{in: "99999999999", err: "too large"},
	} {
		lo, hi, err := ParseNodes(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseNodes(%q) = %d, %d, %v; want an error containing %q", tc.in, lo, hi, err, tc.err)
			}
			continue
		}
		if err != nil || lo != tc.lo || hi != tc.hi {
			t.Errorf("ParseNodes(%q) = %d, %d, %v; want %d, %d", tc.in, lo, hi, err, tc.lo, tc.hi)
		}
	}
}
