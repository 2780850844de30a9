package spec

import "testing"

func TestParseJobID(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   JobID
		isTask bool
		str    string
	}{
		{"42", JobID{ID: 42, Index: -1}, false, "42"},
		{"42_7", JobID{ID: 42, Index: 7}, true, "42_7"},
		{"42_0", JobID{ID: 42, Index: 0}, true, "42_0"},
		{"1", JobID{ID: 1, Index: -1}, false, "1"},
		{" 9_3 ", JobID{ID: 9, Index: 3}, true, "9_3"},
		{"9223372036854775807", JobID{ID: 9223372036854775807, Index: -1}, false, "9223372036854775807"},
		{"5_999999", JobID{ID: 5, Index: 999999}, true, "5_999999"},
	} {
		got, err := ParseJobID(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseJobID(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		if got.IsTask() != tc.isTask {
			t.Errorf("ParseJobID(%q).IsTask() = %v, want %v", tc.in, got.IsTask(), tc.isTask)
		}
		if s := got.String(); s != tc.str {
			t.Errorf("ParseJobID(%q).String() = %q, want %q", tc.in, s, tc.str)
		}
	}
}

func TestParseJobIDRejects(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{"", "empty"},
		{"  ", "empty"},
		{"0", "job ids start at 1"},
		{"-3", "must not be negative"},
		{"42_", "missing array index"},
		{"_7", "missing job number"},
		{"42_-1", "array index must not be negative"},
		{"42_7_8", "more than one _"},
		{"42__8", "more than one _"},
		{"x", `"x" is not a job number`},
		{"42x", `"42x" is not a job number`},
		{"42_x", `"x" is not an array index`},
		{"9223372036854775808", "too large"},
		{"42_1000000", "array index 1000000 is above the maximum 999999"},
	} {
		_, err := ParseJobID(tc.in)
		checkRejected(t, tc.in, err, tc.reason)
	}
}
