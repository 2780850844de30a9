package spec

import (
	"slices"
	"testing"
)

func seq(start, end, step int) []int {
	var s []int
	for i := start; i <= end; i += step {
		s = append(s, i)
	}
	return s
}

func TestParseArray(t *testing.T) {
	for _, tc := range []struct {
		in      string
		indices []int
		limit   int
		str     string
	}{
		{"0-99", seq(0, 99, 1), 0, "0-99"},
		{"1,3,7", []int{1, 3, 7}, 0, "1,3,7"},
		{"7,3,1", []int{1, 3, 7}, 0, "1,3,7"},
		{"0-99%10", seq(0, 99, 1), 10, "0-99%10"},
		{"0-15:4", []int{0, 4, 8, 12}, 0, "0-12:4"},
		{"1-3,7,10-12%2", []int{1, 2, 3, 7, 10, 11, 12}, 2, "1-3,7,10-12%2"},
		{"5", []int{5}, 0, "5"},
		{"5-5", []int{5}, 0, "5"},
		{"4,5", []int{4, 5}, 0, "4-5"},
		{"0,2,3,4", []int{0, 2, 3, 4}, 0, "0,2-4"},
		{"0-1,3-7:2", []int{0, 1, 3, 5, 7}, 0, "0-1,3-7:2"},
		{" 0-3 ", []int{0, 1, 2, 3}, 0, "0-3"},
		{"999999", []int{999999}, 0, "999999"},
		{"0-99999", seq(0, 99999, 1), 0, "0-99999"},
		{"0-199998:2", seq(0, 199998, 2), 0, "0-199998:2"},
		{"1%100000", []int{1}, 100000, "1%100000"},
	} {
		got, err := ParseArray(tc.in)
		if err != nil {
			t.Errorf("ParseArray(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(got.Indices, tc.indices) || got.Limit != tc.limit {
			t.Errorf("ParseArray(%q) = %v, want indices %v limit %d", tc.in, got, tc.indices, tc.limit)
		}
		if s := got.String(); s != tc.str {
			t.Errorf("ParseArray(%q).String() = %q, want %q", tc.in, s, tc.str)
		}
		again, err := ParseArray(got.String())
		if err != nil || !slices.Equal(again.Indices, got.Indices) || again.Limit != got.Limit {
			t.Errorf("ParseArray(%q) does not round-trip: %v, %v", got.String(), again, err)
		}
	}
}

func TestParseArrayRejects(t *testing.T) {
	for _, tc := range []struct{ in, reason string }{
		{"", "empty"},
		{" ", "empty"},
		{"0-99%0", "limit must be at least 1"},
		{"%5", "no indices"},
		{"1%", "missing limit"},
		{"1%x", `limit "x" is not an integer`},
		{"1%100001", "limit 100001 is above the maximum 100000"},
		{"1%2%3", "more than one %"},
		{"5-1", `range "5-1" starts after it ends`},
		{"1,,2", "empty item"},
		{",1", "empty item"},
		{"1,", "empty item"},
		{"0-1e9", `end of range "1e9" is not an integer`},
		{"-1", "must not be negative"},
		{"1,-1", "must not be negative"},
		{"1-", "missing end of range"},
		{"1-2-3", `"2-3" is not an integer`},
		{"a", `index "a" is not an integer`},
		{"1.5", `index "1.5" is not an integer`},
		{"+1", `index "+1" is not an integer`},
		{"0-10:0", "step must be at least 1"},
		{"0-10:", "missing step"},
		{"0-10:x", `step "x" is not an integer`},
		{"5:2", "a step needs a range"},
		{":2", "missing index"},
		{"1,1", "index 1 appears twice"},
		{"0-3,2", "index 2 appears twice"},
		{"2,0-3,2", "index 2 appears 3 times"},
		{"1000000", "index 1000000 is above the maximum 999999"},
		{"0-1000000", "end of range 1000000 is above the maximum 999999"},
		{"0-200000", "too many tasks (200001, at most 100000)"},
		{"0-50000,60000-110000", "too many tasks"},
	} {
		_, err := ParseArray(tc.in)
		checkRejected(t, tc.in, err, tc.reason)
	}
}

func TestArrayStringEmpty(t *testing.T) {
	if s := (Array{}).String(); s != "" {
		t.Errorf("Array{}.String() = %q, want empty", s)
	}
}
