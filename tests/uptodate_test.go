package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildUpToDate: a build asked again when not a file it read or wrote
// has changed says it is up to date without loading anything; when only
// sources its actions read have changed, it runs what they feed without
// loading anything; any other change to what it depends on (a BUILD or .bzl
// file, a new package, an output, the flags, the environment) makes it load
// and build again. Each builds right.
func TestBuildUpToDate(t *testing.T) {
	w := newWorkspace(t)
	w.write("fresh/defs.bzl", "def twice(name, src):\n    native.genrule(name = name, srcs = [src], outs = [name + \".txt\"], cmd = \"cat $< $< > $@\")\n")
	w.write("fresh/in.txt", "one\n")
	w.write("fresh/BUILD.rbs", `load(":defs.bzl", "twice")
twice(name = "a", src = "in.txt")
genrule(name = "b", srcs = [":a"] + glob(["*.extra"]), outs = ["b.txt"], cmd = "cat $(SRCS) > $@")
`)
	const upToDate = "(up to date: no file it read or wrote has changed since)"
	const onlySources = "(only sources changed: nothing loaded or analysed)"
	build := func(args ...string) string {
		t.Helper()
		return w.mustRbs(append([]string{"build"}, args...)...)
	}
	if out := build("//fresh/..."); strings.Contains(out, upToDate) {
		t.Fatalf("the first build was up to date:\n%s", out)
	}
	out := build("//fresh/...")
	if !strings.Contains(out, upToDate) || !strings.Contains(out, "Target //fresh:b up-to-date:\n  rbs-bin/fresh/b.txt\n") {
		t.Fatalf("the same build again was not up to date, or did not list the outputs:\n%s", out)
	}
	if ran, cached := executed(t, out); ran != 0 || cached != 2 {
		t.Errorf("up to date: %d executed, %d cached; want 0 and 2", ran, cached)
	}

	for _, step := range []struct {
		name   string
		change func()
		args   []string
		want   string // fresh/b.txt after the build
		// onlySources: the build runs what the changed sources feed,
		// loading nothing.
		onlySources bool
	}{
		{"a source edited", func() { w.write("fresh/in.txt", "two\n") }, nil, "two\ntwo\n", true},
		{"a .bzl file edited", func() {
			w.write("fresh/defs.bzl", "def twice(name, src):\n    native.genrule(name = name, srcs = [src], outs = [name + \".txt\"], cmd = \"cat $< $< $< > $@\")\n")
		}, nil, "two\ntwo\ntwo\n", false},
		{"a file a glob matches added", func() { w.write("fresh/z.extra", "extra\n") }, nil, "two\ntwo\ntwo\nextra\n", false},
		{"a source edited again", func() { w.write("fresh/z.extra", "more\n") }, nil, "two\ntwo\ntwo\nmore\n", true},
		{"an output edited", func() { w.write("rbs-bin/fresh/b.txt", "tampered\n") }, nil, "two\ntwo\ntwo\nmore\n", false},
		{"an output removed", func() { os.Remove(filepath.Join(w.dir, "rbs-bin/fresh/b.txt")) }, nil, "two\ntwo\ntwo\nmore\n", false},
		{"other flags", func() {}, []string{"--define", "x=1"}, "two\ntwo\ntwo\nmore\n", false},
	} {
		step.change()
		out := build(append(step.args, "//fresh/...")...)
		if strings.Contains(out, upToDate) {
			t.Errorf("%s: the build said it was up to date:\n%s", step.name, out)
		}
		if got := strings.Contains(out, onlySources); got != step.onlySources {
			t.Errorf("%s: the build ran only what changed sources feed: %v, want %v:\n%s", step.name, got, step.onlySources, out)
		}
		if got := w.read("rbs-bin/fresh/b.txt"); got != step.want {
			t.Errorf("%s: b.txt is %q, want %q", step.name, got, step.want)
		}
		if out := build(append(step.args, "//fresh/...")...); !strings.Contains(out, upToDate) {
			t.Errorf("%s: the build after it was not up to date:\n%s", step.name, out)
		}
	}

	// A package added under the pattern is built.
	w.write("fresh/sub/BUILD", `genrule(name = "c", outs = ["c.txt"], cmd = "echo c > $@")`+"\n")
	if out := build("//fresh/..."); strings.Contains(out, upToDate) || w.read("rbs-bin/fresh/sub/c.txt") != "c\n" {
		t.Errorf("a new package: the build did not build it:\n%s", out)
	}
	// And the environment is part of what was asked.
	if out, err := w.rbsEnv([]string{"RBS_UPTODATE_TEST=1"}, "build", "//fresh/..."); err != nil || strings.Contains(out, upToDate) {
		t.Errorf("another environment: %v, the build said it was up to date:\n%s", err, out)
	}
}

// TestBuildAfterScannedSourceEdited: a C source whose #include lines
// analysis read is not a source like the others: editing it makes the
// build load and analyse again, since what it includes decides what its
// compile reads.
func TestBuildAfterScannedSourceEdited(t *testing.T) {
	requireTool(t, "gcc")
	w := newWorkspace(t)
	w.write("scanned/BUILD.rbs", `cc_binary(name = "hello", srcs = ["main.c", "a.h", "b.h"])`+"\n")
	w.write("scanned/main.c", "#include \"scanned/a.h\"\nint main(void) { return VALUE; }\n")
	w.write("scanned/a.h", "#define VALUE 0\n")
	w.write("scanned/b.h", "#define OTHER 0\n")
	w.mustRbs("build", "//scanned:hello")
	if out := w.mustRbs("build", "//scanned:hello"); !strings.Contains(out, "(up to date") {
		t.Fatalf("the same build again was not up to date:\n%s", out)
	}
	w.write("scanned/a.h", "#include \"scanned/b.h\"\n#define VALUE OTHER\n")
	out := w.mustRbs("build", "//scanned:hello")
	if strings.Contains(out, "(up to date") || strings.Contains(out, "(only sources changed") {
		t.Errorf("after a scanned header was edited, the build did not analyse again:\n%s", out)
	}
	if ran, _ := executed(t, out); ran == 0 {
		t.Errorf("after a scanned header was edited, nothing ran:\n%s", out)
	}
}
