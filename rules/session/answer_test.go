package session

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A query's answer is kept until a file or directory it read changes: a
// BUILD file, a loaded .bzl file, a directory's entries (a new package, a
// new file a glob would match); editing a source file keeps it.
func TestAnswerKeptUntilWhatItReadChanges(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(root string) error
		kept   bool
	}{
		{"nothing changed", func(string) error { return nil }, true},
		{"a source edited", func(root string) error { return write(root, "pkg/data/a.txt", "edited\n") }, true},
		{"a BUILD file edited", func(root string) error {
			return write(root, "pkg/BUILD.rbs", `load(":defs.bzl", "two")
filegroup(name = "g", srcs = glob(["data/*.txt"]))
filegroup(name = "h")
`)
		}, false},
		{"a loaded .bzl edited", func(root string) error { return write(root, "pkg/defs.bzl", "two = 3\n") }, false},
		{"a file a glob matches added", func(root string) error { return write(root, "pkg/data/b.txt", "b\n") }, false},
		{"a package added", func(root string) error { return write(root, "other/BUILD.rbs", `filegroup(name = "o")`+"\n") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, text := range map[string]string{
				"MODULE.bazel": "",
				"pkg/BUILD.rbs": `load(":defs.bzl", "two")
filegroup(name = "g", srcs = glob(["data/*.txt"]))
`,
				"pkg/defs.bzl":     "two = 2\n",
				"pkg/data/a.txt":   "a\n",
				"pkg/data/x.other": "x\n",
			} {
				if err := write(root, name, text); err != nil {
					t.Fatal(err)
				}
			}
			// Recorded files are older than the answer, as they are but
			// for a file changed as the answer is worked out.
			past := time.Now().Add(-time.Minute)
			filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error { return os.Chtimes(p, past, past) })
			cache := t.TempDir()
			ask := func() (string, bool) {
				s, err := Open(Options{Dir: root, CacheDir: cache})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				args := []string{"query", "//..."}
				if out, ok := s.Answered(args...); ok {
					return out, true
				}
				out, err := s.Answer(args, func() (string, error) {
					ls, err := s.Query("//...", true)
					if err != nil {
						return "", err
					}
					_, err = s.Build(t.Context(), []string{"//pkg:g"}, true)
					return fmt.Sprint(ls), err
				})
				if err != nil {
					t.Fatal(err)
				}
				return out, false
			}
			first, answered := ask()
			if answered {
				t.Fatal("answered before it was ever asked")
			}
			if _, answered := ask(); !answered {
				t.Fatal("not answered again with nothing changed")
			}
			if err := tc.change(root); err != nil {
				t.Fatal(err)
			}
			if out, answered := ask(); answered != tc.kept || answered && out != first {
				t.Fatalf("answered %v (%q), want %v", answered, out, tc.kept)
			}
		})
	}
}

func write(root, name, text string) error {
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(text), 0o644)
}
