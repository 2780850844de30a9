package label

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzParse checks Parse's promises: no panic, a rejection that quotes the
// input, and a label whose canonical form parses back to itself and never
// climbs out of the workspace. `go test` runs the seeds; `go test -fuzz
// FuzzParse ./starlark/label` explores further.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"//pkg:name", "//pkg", "//:name", "@rbs//python:rules.rbs", "@repo//a/b", "//", "//a/../b:c", "//a:../x", "@//x", "//a//b:c", "//a:b:c", ":x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := Parse(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("%q: error %q does not quote the input", s, err)
			}
			return
		}
		back, err := Parse(l.String())
		if err != nil || back != l {
			t.Fatalf("%q printed as %q, which reads back as %v, %v", s, l.String(), back, err)
		}
		for _, part := range append(strings.Split(l.Pkg, "/"), strings.Split(l.Name, "/")...) {
			if part == ".." {
				t.Fatalf("%q: accepted a label with a .. segment: %+v", s, l)
			}
		}
		if strings.HasPrefix(l.Name, "/") || strings.HasPrefix(l.Pkg, "/") {
			t.Fatalf("%q: accepted an absolute path: %+v", s, l)
		}
	})
}
