package spec

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fuzz targets check what every parser here promises: no panic, a
// rejection that quotes the input, and accepted values that print back to
// text the parser reads as the same value. `go test` runs their seeds;
// `go test -fuzz FuzzParseArray ./jobs/spec` explores further.

func quotes(t *testing.T, s string, err error) {
	t.Helper()
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
		t.Fatalf("%q: error %q does not quote the input", s, err)
	}
}

func FuzzParseArray(f *testing.F) {
	for _, s := range []string{"0-99", "1,3,7", "0-99%10", "0-15:4", "1-3,7,10-12%2", "0-99%0", "5-1", "1,,2", "0-1e9", "999999", "0-999999:9", " 3 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseArray(s)
		if err != nil {
			quotes(t, s, err)
			return
		}
		if len(a.Indices) == 0 || len(a.Indices) > MaxArrayTasks || a.Limit < 0 {
			t.Fatalf("%q: %d indices, limit %d", s, len(a.Indices), a.Limit)
		}
		if !slices.IsSorted(a.Indices) || len(slices.Compact(slices.Clone(a.Indices))) != len(a.Indices) ||
			a.Indices[0] < 0 || a.Indices[len(a.Indices)-1] > MaxArrayIndex {
			t.Fatalf("%q: indices not ascending, unique and in range", s)
		}
		b, err := ParseArray(a.String())
		if err != nil || !slices.Equal(a.Indices, b.Indices) || a.Limit != b.Limit {
			t.Fatalf("%q printed as %q, which reads back as %v, %v", s, a.String(), b, err)
		}
	})
}

func FuzzParseDeps(f *testing.F) {
	for _, s := range []string{"afterok:12", "afterany:13:14,afternotok:15_3", "before:1", "afterok:", "afterok:1,afterok:1", "afterok:1_-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		deps, err := ParseDeps(s)
		if err != nil {
			quotes(t, s, err)
			return
		}
		var parts []string
		for _, d := range deps {
			parts = append(parts, d.String())
		}
		back, err := ParseDeps(strings.Join(parts, ","))
		if err != nil || !slices.Equal(deps, back) {
			t.Fatalf("%q printed as %q, which reads back as %v, %v", s, parts, back, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"90s", "30m", "2h", "1d2h", "01:02:03", "1-00:00:00", "5", "soon", "-1m", "0", "1h30", "9000:00:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			quotes(t, s, err)
			return
		}
		if d <= 0 || d%time.Second != 0 {
			t.Fatalf("%q: %v is not a positive whole number of seconds", s, d)
		}
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Fatalf("%q printed as %q, which reads back as %v, %v", s, FormatDuration(d), back, err)
		}
	})
}

func FuzzParseJobID(f *testing.F) {
	for _, s := range []string{"42", "42_7", "0", "-1", "42_", "_7", "42_7_1", "4 2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		j, err := ParseJobID(s)
		if err != nil {
			quotes(t, s, err)
			return
		}
		back, err := ParseJobID(j.String())
		if err != nil || back != j {
			t.Fatalf("%q printed as %q, which reads back as %v, %v", s, j.String(), back, err)
		}
	})
}

func FuzzParseExport(f *testing.F) {
	for _, s := range []string{"ALL", "NONE", "A,B=1", "ALL,B=1", "NONE,A", "A,ALL", "9A", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseExport(s)
		if err != nil {
			quotes(t, s, err)
			return
		}
		for _, k := range e.Names {
			if checkEnvName(k) != nil {
				t.Fatalf("%q: accepted name %q", s, k)
			}
		}
		for k := range e.Set {
			if checkEnvName(k) != nil {
				t.Fatalf("%q: accepted name %q", s, k)
			}
		}
	})
}
