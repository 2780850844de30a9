package execroot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/process"
)

// Run stages, runs, checks the inputs and collects the outputs: strictly
// (after exit 0 only, each as declared) or leniently (absent ones left
// out, after any exit), with a working directory below the root.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		wd      string
		outs    []Declared
		strict  bool
		exit    int
		changed string
		err     string
		got     string // the outputs collected: files, then directories, by path
	}{
		{name: "strict", script: "cat a.txt > out && mkdir -p o && echo x > o/x", outs: []Declared{{"out", File}, {"o", Dir}}, strict: true, got: "files [out] dirs [o]"},
		{name: "strict, missing", script: "true", outs: []Declared{{"out", File}}, strict: true, err: `did not create its declared output "out"`},
		{name: "strict, a directory declared a file", script: "mkdir out", outs: []Declared{{"out", File}}, strict: true, err: `"out" is a directory`},
		{name: "strict, a failure collects nothing", script: "echo x > out; exit 3", outs: []Declared{{"out", File}}, strict: true, exit: 3, got: "none"},
		{name: "lenient, missing left out", script: "echo x > out", outs: []Declared{{"out", File}, {"gone", File}}, got: "files [out] dirs []"},
		{name: "lenient, a failure still collects", script: "echo x > out; exit 3", outs: []Declared{{"out", Any}}, exit: 3, got: "files [out] dirs []"},
		{name: "lenient, in a working directory", script: "echo x > out", wd: "d", outs: []Declared{{"out", File}}, got: "files [out] dirs []"},
		{name: "an input written in place", script: "echo changed >> a.txt", outs: nil, strict: true, changed: "a.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt, tree := sampleTree(t)
			src := newMemSource()
			for _, f := range mt.Files {
				src.add(f.Data)
			}
			dir := t.TempDir()
			ran, err := openCache(t, 0).Run(context.Background(), Spec{
				Source: src, Tree: tree, Root: filepath.Join(dir, "root"), WorkingDir: tc.wd, Outputs: tc.outs, Strict: tc.strict,
				Process: process.Spec{Args: []string{"/bin/sh", "-c", tc.script}, Env: []string{"PATH=/usr/bin:/bin"}, Stdout: os.Stderr, Stderr: os.Stderr},
			})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ran.StartErr != nil || ran.Process.ExitCode != tc.exit || ran.Changed != tc.changed {
				t.Fatalf("start error %v, exit %d, changed %q; want exit %d, changed %q", ran.StartErr, ran.Process.ExitCode, ran.Changed, tc.exit, tc.changed)
			}
			if tc.changed != "" {
				return
			}
			got := "none"
			if o := ran.Outputs; o != nil {
				var files, dirs []string
				for _, f := range o.ActionResult.OutputFiles {
					files = append(files, f.Path)
				}
				for _, d := range o.ActionResult.OutputDirectories {
					dirs = append(dirs, d.Path)
				}
				got = fmt.Sprintf("files %v dirs %v", files, dirs)
				if int(o.ActionResult.ExitCode) != tc.exit {
					t.Fatalf("the result's exit code is %d", o.ActionResult.ExitCode)
				}
			}
			if got != tc.got {
				t.Fatalf("collected %s, want %s", got, tc.got)
			}
		})
	}
}
