package session

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// print() in a .bzl file, a BUILD file and a rule implementation writes
// Bazel's DEBUG lines, a module's once however many packages load it; a
// build answered from its stamp, without loading, prints them again, as
// Bazel replays them. A message's own last newline ends its line.
func TestPrintAsBazel(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{
		"MODULE.bazel": "",
		"pkg/defs.bzl": `print("top", 1, [2])
def _impl(ctx):
    print("analysing", ctx.label)
    return []
r = rule(implementation = _impl)
`,
		"pkg/BUILD.rbs": `load(":defs.bzl", "r")
print("in pkg")
r(name = "a")
r(name = "b")
`,
		"other/BUILD.rbs": `load("//pkg:defs.bzl", "r")
x = 1; print("in other")
print("ends its line\n")
`,
	} {
		if err := write(root, name, text); err != nil {
			t.Fatal(err)
		}
	}
	abs := func(p string) string { return filepath.Join(root, p) }
	want := []string{
		"DEBUG: " + abs("other/BUILD.rbs") + ":2:13: in other",
		"DEBUG: " + abs("other/BUILD.rbs") + ":3:6: ends its line",
		"DEBUG: " + abs("pkg/BUILD.rbs") + ":2:6: in pkg",
		"DEBUG: " + abs("pkg/defs.bzl") + ":1:6: top 1 [2]",
		"DEBUG: " + abs("pkg/defs.bzl") + ":3:10: analysing //pkg:a",
		"DEBUG: " + abs("pkg/defs.bzl") + ":3:10: analysing //pkg:b",
	}
	lines := func(b *bytes.Buffer) []string {
		l := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		slices.Sort(l)
		return l
	}
	cache := t.TempDir()
	patterns := []string{"//..."}

	var built bytes.Buffer
	s, err := Open(Options{Dir: root, CacheDir: cache, Stamp: true, Debug: &built})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := s.Build(t.Context(), patterns, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remember(sum, ""); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := lines(&built); !slices.Equal(got, want) {
		t.Fatalf("the build printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var again bytes.Buffer
	s, err = Open(Options{Dir: root, CacheDir: cache, Stamp: true, Debug: &again})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, ok := s.UpToDate(patterns); !ok {
		t.Fatal("the same build is not up to date")
	}
	if got := lines(&again); !slices.Equal(got, want) {
		t.Fatalf("the build found up to date printed\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
