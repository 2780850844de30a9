package executor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
)

const testPath = "/usr/bin:/bin"

// fixture is a source tree with in.txt (declared) and secret.txt next to
// it (not declared), and an output root.
type fixture struct {
	t       *testing.T
	src     string
	outRoot string
}

func newFixture(t *testing.T, content string) *fixture {
	f := &fixture{t: t, src: t.TempDir(), outRoot: t.TempDir()}
	f.write("in.txt", content)
	f.write("secret.txt", "secret")
	return f
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.src, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) input(name string) merkle.File {
	f.t.Helper()
	in, err := merkle.FileFromDisk(name, filepath.Join(f.src, name), false)
	if err != nil {
		f.t.Fatal(err)
	}
	return in
}

// shAction runs script with in.txt as its input.
func (f *fixture) shAction(script string, outputs ...string) *Action {
	return &Action{
		Description: "Genrule //pkg:cat",
		Args:        []string{"sh", "-c", script},
		Env:         map[string]string{"PATH": testPath},
		Inputs:      []merkle.File{f.input("in.txt")},
		Outputs:     outputs,
	}
}

func (f *fixture) read(rel string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.outRoot, rel))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func newLocal(t *testing.T) *Local {
	l, err := NewLocal(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func run(t *testing.T, e Executor, a *Action, outRoot string) *Result {
	t.Helper()
	res, err := e.Run(context.Background(), a, outRoot)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exit code %d, stderr %q", res.ExitCode, res.Stderr)
	}
	return res
}

const catScript = "cat in.txt > out.txt"

func TestLocalRunsAndCaches(t *testing.T) {
	l := newLocal(t)
	f := newFixture(t, "hello\n")
	a := f.shAction(catScript, "out.txt")
	first := run(t, Cached(l.Cache(), l), a, f.outRoot)
	if first.Cached || f.read("out.txt") != "hello\n" {
		t.Fatalf("first run: cached %v, out.txt %q", first.Cached, f.read("out.txt"))
	}

	if err := os.Remove(filepath.Join(f.outRoot, "out.txt")); err != nil {
		t.Fatal(err)
	}
	second := run(t, Cached(l.Cache(), l), f.shAction(catScript, "out.txt"), f.outRoot)
	if !second.Cached || second.Digest != first.Digest || f.read("out.txt") != "hello\n" {
		t.Fatalf("second run: cached %v, digest %s (first %s)", second.Cached, second.Digest, first.Digest)
	}

	// A changed input is another action.
	f.write("in.txt", "changed\n")
	third := run(t, Cached(l.Cache(), l), f.shAction(catScript, "out.txt"), f.outRoot)
	if third.Cached || third.Digest == first.Digest || f.read("out.txt") != "changed\n" {
		t.Fatalf("third run: cached %v, digest %s, out.txt %q", third.Cached, third.Digest, f.read("out.txt"))
	}

	// A cache that is reopened still serves the result.
	l2, err := NewLocal(filepath.Dir(l.tmp), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res := run(t, Cached(l2.Cache(), l2), f.shAction(catScript, "out.txt"), f.outRoot); !res.Cached {
		t.Fatal("not cached after reopening the cache")
	}

	// NoCache neither uses nor fills the cache.
	nc := f.shAction(catScript, "out.txt")
	nc.NoCache = true
	for i := 0; i < 2; i++ {
		if res := run(t, Cached(l.Cache(), l), nc, f.outRoot); res.Cached {
			t.Fatal("NoCache action served from the cache")
		}
	}
}

func TestLocalActions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		script  string
		outputs []string
		dirs    []string
		exit    int
		stdout  string
		stderr  string
		files   map[string]string // in outRoot after the run
		errs    []string          // the error must contain each
	}{
		{name: "cat", script: catScript, outputs: []string{"out.txt"}, files: map[string]string{"out.txt": "input\n"}},
		{name: "nested output", script: "cat in.txt > rbs-out/bin/pkg/out.txt", outputs: []string{"rbs-out/bin/pkg/out.txt"},
			files: map[string]string{"rbs-out/bin/pkg/out.txt": "input\n"}},
		{name: "stdout and stderr", script: "echo out; echo err >&2; cat in.txt > out.txt", outputs: []string{"out.txt"},
			stdout: "out\n", stderr: "err\n"},
		{name: "failure", script: "echo boom >&2; echo x > out.txt; exit 3", outputs: []string{"out.txt"}, exit: 3, stderr: "boom\n",
			files: map[string]string{"out.txt": ""}},
		{name: "missing output", script: "true", outputs: []string{"out.txt"}, errs: []string{"Genrule //pkg:cat", `"out.txt"`}},
		{name: "missing output directory", script: "true", dirs: []string{"d"}, errs: []string{"Genrule //pkg:cat", `"d"`}},
		{name: "output file is a directory", script: "mkdir out.txt", outputs: []string{"out.txt"}, errs: []string{`"out.txt" is a directory`}},
		{name: "undeclared file", script: "cat in.txt > out.txt; echo x > stray.txt", outputs: []string{"out.txt"},
			errs: []string{"Genrule //pkg:cat wrote stray.txt, which is not one of its declared outputs"}},
		{name: "undeclared file next to an output", script: "cat in.txt > sub/out.txt; echo x > sub/stray.txt", outputs: []string{"sub/out.txt"},
			errs: []string{"Genrule //pkg:cat wrote sub/stray.txt, which is not one of its declared outputs"}},
		{name: "undeclared directory", script: "mkdir -p d/e", errs: []string{"Genrule //pkg:cat wrote d, which is not one of its declared outputs"}},
		{name: "undeclared symlink", script: "ln -s in.txt l", errs: []string{"Genrule //pkg:cat wrote l, which is not one of its declared outputs"}},
		{name: "only declared inputs", script: "if [ -e secret.txt ]; then exit 9; fi; ls -A > out.txt", outputs: []string{"out.txt"},
			files: map[string]string{"out.txt": "in.txt\nout.txt\n"}},
		{name: "inputs are read-only", script: "stat -c %a in.txt > out.txt", outputs: []string{"out.txt"},
			files: map[string]string{"out.txt": "444\n"}},
		{name: "output directory", script: "mkdir -p d/sub && echo n > d/sub/n.txt && ln -s sub d/link && echo t > d/t.txt", dirs: []string{"d"},
			files: map[string]string{"d/sub/n.txt": "n\n", "d/t.txt": "t\n", "d/link/n.txt": "n\n"}},
		{name: "symlinked output file", script: "cat in.txt > real.txt && ln -s real.txt out.txt", outputs: []string{"out.txt", "real.txt"},
			files: map[string]string{"out.txt": "input\n", "real.txt": "input\n"}},
		{name: "program not found", script: "", errs: []string{"Genrule //pkg:cat", "no-such-program"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocal(t)
			f := newFixture(t, "input\n")
			a := f.shAction(tc.script, tc.outputs...)
			a.OutputDirs = tc.dirs
			if tc.name == "program not found" {
				a.Args = []string{"no-such-program"}
			}
			if tc.files["out.txt"] == "" && tc.exit != 0 {
				// A failed action must not touch existing outputs.
				if err := os.WriteFile(filepath.Join(f.outRoot, "out.txt"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for i, wantCached := range []bool{false, true} {
				res, err := Cached(l.Cache(), l).Run(context.Background(), a, f.outRoot)
				if len(tc.errs) > 0 {
					if err == nil {
						t.Fatalf("run %d: no error, want one containing %q", i, tc.errs)
					}
					for _, want := range tc.errs {
						if !strings.Contains(err.Error(), want) {
							t.Fatalf("run %d: error %q does not contain %q", i, err, want)
						}
					}
					continue
				}
				if err != nil {
					t.Fatalf("run %d: %v", i, err)
				}
				if res.ExitCode != tc.exit || string(res.Stderr) != tc.stderr && tc.stderr != "" || string(res.Stdout) != tc.stdout && tc.stdout != "" {
					t.Fatalf("run %d: exit %d stdout %q stderr %q", i, res.ExitCode, res.Stdout, res.Stderr)
				}
				if res.Cached != (wantCached && tc.exit == 0) {
					t.Fatalf("run %d: cached = %v", i, res.Cached)
				}
				for p, want := range tc.files {
					if got := f.read(p); got != want {
						t.Fatalf("run %d: %s = %q, want %q", i, p, got, want)
					}
				}
				// Outputs are recreated from the cache.
				for _, o := range append(append([]string(nil), tc.outputs...), tc.dirs...) {
					if tc.exit == 0 {
						if err := os.RemoveAll(filepath.Join(f.outRoot, o)); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			if left, _ := os.ReadDir(l.tmp); len(left) != 0 {
				t.Fatalf("scratch directories left: %v", left)
			}
		})
	}
}

func TestLocalEnvironmentIsExactlyEnv(t *testing.T) {
	l := newLocal(t)
	// "env" has no slash: it is looked up in the action's PATH.
	a := &Action{Description: "env", Args: []string{"env"}, Env: map[string]string{"PATH": testPath, "FOO": "bar baz"}}
	res := run(t, Cached(l.Cache(), l), a, t.TempDir())
	if got, want := string(res.Stdout), "FOO=bar baz\nPATH="+testPath+"\n"; got != want {
		t.Fatalf("environment %q, want %q", got, want)
	}
}

func TestLocalExecutables(t *testing.T) {
	// A relative cache directory works too.
	t.Chdir(t.TempDir())
	l, err := NewLocal("cache", 0)
	if err != nil {
		t.Fatal(err)
	}
	outRoot := t.TempDir()
	script := []byte("#!/bin/sh\necho generated > \"$1\"\ncp \"$0\" copy.sh\n")
	tool := merkle.File{Path: "tools/gen.sh", Digest: digest.FromBytes(script), Data: script, Executable: true}
	// A program with a slash is relative to the exec root.
	a := &Action{
		Description: "Genrule //pkg:tool",
		Args:        []string{"tools/gen.sh", "gen.txt"},
		Env:         map[string]string{"PATH": testPath},
		Inputs:      []merkle.File{tool},
		Outputs:     []string{"gen.txt", "copy.sh"},
	}
	for i := 0; i < 2; i++ {
		res := run(t, Cached(l.Cache(), l), a, outRoot)
		if res.Cached != (i == 1) {
			t.Fatalf("run %d: cached %v", i, res.Cached)
		}
		b, _ := os.ReadFile(filepath.Join(outRoot, "gen.txt"))
		info, err := os.Stat(filepath.Join(outRoot, "copy.sh"))
		if string(b) != "generated\n" || err != nil || info.Mode().Perm()&0o111 == 0 {
			t.Fatalf("run %d: gen.txt %q, copy.sh %v %v", i, b, info, err)
		}
		if info, _ := os.Stat(filepath.Join(outRoot, "gen.txt")); info.Mode().Perm()&0o111 != 0 {
			t.Fatalf("run %d: gen.txt is executable", i)
		}
		os.Remove(filepath.Join(outRoot, "copy.sh"))
	}
}

func TestLocalInputsAreHardLinks(t *testing.T) {
	l := newLocal(t)
	f := newFixture(t, "linked\n")
	a := f.shAction("stat -c %h in.txt > out.txt", "out.txt")
	run(t, Cached(l.Cache(), l), a, f.outRoot)
	if n, _ := strconv.Atoi(strings.TrimSpace(f.read("out.txt"))); n < 2 {
		t.Fatalf("input link count %q, want at least 2", f.read("out.txt"))
	}
}

func TestLocalTimeoutAndCancel(t *testing.T) {
	l := newLocal(t)
	f := newFixture(t, "x")
	// Were it not stopped, the action would print "not stopped" and write
	// its output: the cancelled run would succeed.
	a := f.shAction("echo partial; sleep 30; echo not stopped; : >out.txt", "out.txt")
	a.Timeout = 300 * time.Millisecond
	res, err := Cached(l.Cache(), l).Run(context.Background(), a, f.outRoot)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != -1 || string(res.Stdout) != "partial\n" {
		t.Fatalf("timed out action: exit %d stdout %q", res.ExitCode, res.Stdout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	a.Timeout = 0
	if _, err := Cached(l.Cache(), l).Run(ctx, a, f.outRoot); err == nil || !strings.Contains(err.Error(), "Genrule //pkg:cat") {
		t.Fatalf("cancelled action: %v", err)
	}
}

func TestLocalCacheTooSmall(t *testing.T) {
	l, err := NewLocal(t.TempDir(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, strings.Repeat("big input\n", 100))
	a := f.shAction("cat in.txt in.txt > out.txt", "out.txt")
	for i := 0; i < 2; i++ {
		res := run(t, Cached(l.Cache(), l), a, f.outRoot)
		if res.Cached || f.read("out.txt") != strings.Repeat("big input\n", 200) {
			t.Fatalf("run %d: cached %v, out.txt of %d bytes", i, res.Cached, len(f.read("out.txt")))
		}
	}
}

// What an action may leave outside its declared outputs: anything inside
// its input directories (dropped), nothing elsewhere.
func TestLocalWritesOutsideOutputs(t *testing.T) {
	const out = "rbs-out/bin/gen/out.txt"
	for _, tc := range []struct {
		name, script string
		err          string // "" when the action succeeds
	}{
		{"__pycache__ next to an input", "mkdir pkg/__pycache__ && echo c > pkg/__pycache__/mod.pyc", ""},
		{"a new file in an input directory", "echo x > pkg/new.txt && mkdir -p pkg/sub/deep", ""},
		{"inside a runfiles tree", "touch rbs-out/bin/pkg/tool.runfiles/__main__/x rbs-out/bin/pkg/tool.runfiles/__main__/pkg/__pycache__", ""},
		{"next to a tool", "touch rbs-out/bin/pkg/tool.lock", ""},
		{"in the exec root", "touch junk", "wrote junk, which is not one of its declared outputs"},
		{"a new directory in the exec root", "mkdir -p newdir/sub", "wrote newdir, which"},
		{"next to an output", "touch rbs-out/bin/gen/extra.txt", "wrote rbs-out/bin/gen/extra.txt, which"},
		{"on the way to inputs", "touch rbs-out/bin/stray", "wrote rbs-out/bin/stray, which"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocal(t)
			f := newFixture(t, "input\n")
			a := f.shAction("cat in.txt > "+out+" && "+tc.script, out)
			for _, p := range []string{"pkg/mod.py", "rbs-out/bin/pkg/tool", "rbs-out/bin/pkg/tool.runfiles/__main__/pkg/mod.py"} {
				a.Inputs = append(a.Inputs, merkle.File{Path: p, Digest: digest.FromBytes([]byte(p)), Data: []byte(p)})
			}
			for i := 0; i < 2; i++ {
				res, err := Cached(l.Cache(), l).Run(context.Background(), a, f.outRoot)
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), "Genrule //pkg:cat "+tc.err) {
						t.Fatalf("run %d: %v, want an error containing %q", i, err, tc.err)
					}
					continue
				}
				if err != nil || res.ExitCode != 0 || res.Cached != (i == 1) {
					t.Fatalf("run %d: %v, %+v", i, err, res)
				}
				entries, err := os.ReadDir(f.outRoot)
				if err != nil || len(entries) != 1 || entries[0].Name() != "rbs-out" || f.read(out) != "input\n" {
					t.Fatalf("run %d: the output root holds %v (%v), want only %s", i, entries, err, out)
				}
				if err := os.RemoveAll(filepath.Join(f.outRoot, "rbs-out")); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Inputs are hard links into the local CAS: an action that writes to one
// fails, and the next action that uses the same content still gets it. A
// changed mode alone is put back.
func TestLocalInputWrittenInPlace(t *testing.T) {
	for _, tc := range []struct {
		name, script, err string
	}{
		{"appended to", "chmod u+w in.txt && echo more >> in.txt", "Genrule //pkg:cat: input in.txt was written to while the action ran"},
		{"truncated", "chmod u+w in.txt && : > in.txt", "input in.txt was written to"},
		{"made executable", "chmod 755 in.txt", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocal(t)
			f := newFixture(t, "input\n")
			_, err := Cached(l.Cache(), l).Run(context.Background(), f.shAction(tc.script+" && cat in.txt > out.txt", "out.txt"), f.outRoot)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Run = %v, want an error containing %q", err, tc.err)
			}
			run(t, Cached(l.Cache(), l), f.shAction("cat in.txt > out.txt && stat -c %a in.txt >> out.txt", "out.txt"), f.outRoot)
			if got := f.read("out.txt"); got != "input\n444\n" {
				t.Fatalf("the next action read %q, want the input's content, read-only", got)
			}
		})
	}
}
