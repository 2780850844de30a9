package tests

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// rbsEnv is rbs with env added to the workspace's environment.
func (w *workspace) rbsEnv(env []string, args ...string) (string, error) {
	cmd := exec.Command(rbsBin, args...)
	cmd.Dir = w.dir
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+w.cache, "RBS_REMOTE="), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestBuildSummary: a build says where it executes before it starts,
// counts its actions so that they add up, in words, and lists the outputs
// of the targets built.
func TestBuildSummary(t *testing.T) {
	w := newWorkspace(t)
	out := w.mustRbs("build", "-j", "2", "//app:count")
	for _, want := range []string{
		"executing locally\n",
		"Built 1 target: 2 actions, 2 executed locally, 0 cached.\n",
		"Target //app:count up-to-date:\n  rbs-bin/app/count.txt\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("build //app:count: no %q in:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, "executing locally\n") {
		t.Errorf("the executor is not said first:\n%s", out)
	}
	// py_binary's launcher is a file rbs writes itself: the rest of the
	// count.
	out = w.mustRbs("build", "//app:greet", "//app:words")
	m := regexp.MustCompile(`Built 2 targets: (\d+) actions, (\d+) executed locally, (\d+) cached, (\d+) internal`).FindStringSubmatch(out)
	if m == nil || atoi(t, m[1]) != atoi(t, m[2])+atoi(t, m[3])+atoi(t, m[4]) || atoi(t, m[4]) == 0 {
		t.Errorf("build of two targets: counts that do not add up, or no internal action:\n%s", out)
	}
	if out := w.mustRbs("build", "--nobuild", "//app:count"); strings.Contains(out, "executing") {
		t.Errorf("--nobuild says where it executes:\n%s", out)
	}
	if out := w.mustRbs("version"); strings.TrimSpace(out) != strings.TrimSpace(w.mustRbs("--version")) {
		t.Errorf("rbs version %q, rbs --version %q", out, w.mustRbs("--version"))
	}
}

// TestBuildRemoteFromEnv: $RBS_REMOTE sends a build to the cluster, and
// the build says so, and counts what ran there.
func TestBuildRemoteFromEnv(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1")
	w := newWorkspace(t)
	out, err := w.rbsEnv([]string{"RBS_REMOTE=" + srv.Addr}, "build", "//app:count")
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	for _, want := range []string{"executing on " + srv.Addr + " (remote, from $RBS_REMOTE)\n", "2 actions, 2 executed remotely, 0 cached."} {
		if !strings.Contains(out, want) {
			t.Errorf("build with $RBS_REMOTE: no %q in:\n%s", want, out)
		}
	}
	// The hyphenated spelling of --remote_cache.
	other := newWorkspace(t)
	out = other.mustRbs("build", "--remote-cache", srv.Addr, "--compilation-mode", "fastbuild", "//app:count")
	for _, want := range []string{"executing locally, caching on " + srv.Addr + " (remote cache)\n", "2 actions, 0 executed locally, 2 cached."} {
		if !strings.Contains(out, want) {
			t.Errorf("build --remote-cache: no %q in:\n%s", want, out)
		}
	}
}

// TestKeepGoing: -k builds and tests everything that does not depend on a
// failed action; --test_output=errors prints the failed tests' logs.
func TestKeepGoing(t *testing.T) {
	w := newWorkspace(t)
	w.write("broken/BUILD.rbs", `genrule(name = "bad", outs = ["bad.txt"], cmd = "echo no >&2; exit 3")
genrule(name = "after_bad", srcs = [":bad"], outs = ["after_bad.txt"], cmd = "cp $< $@")
genrule(name = "good", outs = ["good.txt"], cmd = "echo good > $@")
sh_test(name = "needs_bad", srcs = ["passes.sh"], data = [":bad"])
sh_test(name = "fails", srcs = ["fails.sh"])
sh_test(name = "passes", srcs = ["passes.sh"], data = [":good"])
`)
	w.write("broken/fails.sh", "#!/bin/sh\necho 'something is wrong'\nexit 1\n")
	w.write("broken/passes.sh", "#!/bin/sh\nexit 0\n")
	out, err := w.rbs("", "build", "--keep_going", "//broken:bad", "//broken:after_bad", "//broken:good")
	if err == nil || !strings.Contains(out, "failed actions: 1; not run, as they depend on them: 1") {
		t.Fatalf("build -k: %v\n%s", err, out)
	}
	if got := w.read("rbs-bin/broken/good.txt"); got != "good\n" {
		t.Fatalf("build -k did not build what does not depend on the failure: %q", got)
	}
	out, err = w.rbs("", "test", "-k", "--test_output=errors", "//broken:all")
	if err == nil {
		t.Fatalf("test -k of a broken package passed:\n%s", out)
	}
	for _, want := range []string{"//broken:needs_bad  FAILED TO BUILD", "//broken:fails     FAILED", "//broken:passes     PASSED",
		"==> rbs-out/testlogs/broken/fails/test.log (//broken:fails) <==\nsomething is wrong\n", "3 tests: 1 passed, 2 failed."} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("test -k --test_output=errors: no %q in:\n%s", want, out)
		}
	}
	if out := w.mustRbs("test", "--test-output", "all", "//broken:passes"); !strings.Contains(out, "==> rbs-out/testlogs/broken/passes/test.log") {
		t.Errorf("--test_output=all printed no log of a passing test:\n%s", out)
	}
	if out, err := w.rbs("", "test", "--test_output=some", "//broken:passes"); err == nil || !strings.Contains(out, "--test_output") {
		t.Errorf("--test_output=some: %v\n%s", err, out)
	}
}

// TestRunAsBazelRuns: rbs run sets BUILD_WORKSPACE_DIRECTORY and
// BUILD_WORKING_DIRECTORY, and sends a job target to rbs job submit.
func TestRunAsBazelRuns(t *testing.T) {
	w := newWorkspace(t)
	w.write("tools/where.sh", "#!/bin/sh\necho \"$BUILD_WORKSPACE_DIRECTORY\"\necho \"$BUILD_WORKING_DIRECTORY\"\n")
	w.write("tools/BUILD.rbs", w.read("tools/BUILD.rbs")+"\nsh_binary(name = \"where\", srcs = [\"where.sh\"])\n")
	out, err := w.rbs("app", "run", "//tools:where")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	real := func(p string) string {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if len(lines) < 2 || real(lines[len(lines)-2]) != real(w.dir) || real(lines[len(lines)-1]) != real(filepath.Join(w.dir, "app")) {
		t.Fatalf("run from app/: %q, want the workspace and app/", out)
	}
	if out, err := w.rbs("", "run", "//app:train"); err == nil || !strings.Contains(out, "rbs job submit //app:train") {
		t.Fatalf("run of a job target: %v\n%s", err, out)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPatternsAsBazelTakesThem: pkg:target from the workspace root, and
// negative patterns after --.
func TestPatternsAsBazelTakesThem(t *testing.T) {
	w := newWorkspace(t)
	if out := w.mustRbs("build", "app:count"); !strings.Contains(out, "Target //app:count up-to-date") {
		t.Fatalf("build app:count:\n%s", out)
	}
	out := w.mustRbs("build", "--", "//app:count", "//app:words", "-//app:words")
	if !strings.Contains(out, "Built 1 target:") || strings.Contains(out, "Target //app:words") {
		t.Fatalf("build -- //app:count //app:words -//app:words:\n%s", out)
	}
	all := strings.Count(w.mustRbs("query", "//app:all"), "\n")
	if got := strings.Count(w.mustRbs("query", "//app:all -//app:count -//app:words"), "\n"); got != all-2 {
		t.Fatalf("query with two negative patterns: %d targets of %d", got, all)
	}
}

// TestQueryLanguage: rbs query takes Bazel's rdeps(), somepath(),
// allpaths(), tests(), attr(), operators and --output, and points at the
// column of a syntax error.
func TestQueryLanguage(t *testing.T) {
	w := newWorkspace(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rdeps(//app:all, //app:words, 1)"}, "//app:count\n//app:greet\n//app:greet_test\n//app:words\n"},
		{[]string{"tests(//app:all)"}, "//app:count_test\n//app:greet_test\n"},
		{[]string{`attr(cmd, "wc -l", //app:all)`}, "//app:count\n"},
		{[]string{"kind(genrule, //app:all) - //app:words"}, "//app:count\n"},
		{[]string{"kind(genrule, //app:all) ^ deps(//app:count_test, 1)"}, "//app:count\n"},
		{[]string{"--output", "label_kind", "deps(//app:words, 1)"}, "genrule rule //app:words\nsource file //app:words.in\n"},
		{[]string{"somepath(//app:count_test, //app:words)"}, "//app:count\n//app:count_test\n//app:words\n"},
		{[]string{"allpaths(//app:all, //app:words)"}, "//app:count\n//app:count_test\n//app:greet\n//app:greet_test\n//app:stamped\n//app:words\n"},
		{[]string{"--output=build", "//app:count"}, `genrule(
    name = "count",
    cmd = "wc -l < $(location :words) | tr -d ' ' > $@",
    outs = ["count.txt"],
    srcs = [":words"],
)
`},
	} {
		if out := w.mustRbs(append([]string{"query"}, tc.args...)...); !strings.HasSuffix(out, tc.want) {
			t.Errorf("query %q:\n%s\nwant\n%s", tc.args, out, tc.want)
		}
	}
	if out := w.mustRbs("query", "somepath(//app:words, //app:count)"); out != "" {
		t.Errorf("somepath against the dependencies: %q, want nothing", out)
	}
	// --noimplicit_deps leaves out what private attributes depend on.
	w.write("q/defs.bzl", "r = rule(implementation = lambda ctx: [], attrs = {\"_tool\": attr.label(default = \":tool.sh\", allow_files = True), \"src\": attr.label(allow_files = True)})\n")
	w.write("q/BUILD", "load(\":defs.bzl\", \"r\")\nr(name = \"r\", src = \"in.txt\")\n")
	if out, want := w.mustRbs("query", "deps(//q:r)"), "//q:in.txt\n//q:r\n//q:tool.sh\n"; out != want {
		t.Errorf("deps with the implicit: %q, want %q", out, want)
	}
	if out, want := w.mustRbs("query", "--noimplicit_deps", "deps(//q:r)"), "//q:in.txt\n//q:r\n"; out != want {
		t.Errorf("--noimplicit_deps: %q, want %q", out, want)
	}
	q := "deps(//app:count) + kind(genrule //app:all)"
	col := strings.Index(q, "//app:all")
	out, err := w.rbs("", "query", q)
	lines := strings.Split(out, "\n")
	caretUnder := func() bool {
		for i, l := range lines[:len(lines)-1] {
			if at := strings.Index(l, q); at >= 0 {
				return strings.Index(lines[i+1], "^") == at+col
			}
		}
		return false
	}
	if err == nil || !strings.Contains(out, "column "+strconv.Itoa(col+1)+": want , then") || !caretUnder() {
		t.Errorf("a missing comma: %v\n%s", err, out)
	}
}

// TestNoSuchTargetSuggests: a misspelt target on the command line gets a
// suggestion and the package's targets as words.
func TestNoSuchTargetSuggests(t *testing.T) {
	w := newWorkspace(t)
	out, err := w.rbs("", "build", "//app:cuont")
	if err == nil || !strings.Contains(out, `no such target //app:cuont in package "app" (did you mean count?) (targets: count, count_test, `) {
		t.Fatalf("build //app:cuont: %v\n%s", err, out)
	}
}

// TestBazelrc: a build takes the flags of the workspace's .bazelrc, of the
// files it imports and of ~/.bazelrc, and --config's; a flag rbs does not
// take is one warning naming its file and line when a file gives it, and
// an error when the command line does.
func TestBazelrc(t *testing.T) {
	w := newWorkspace(t)
	home := t.TempDir()
	w.write("rc/BUILD.bazel", `genrule(name = "g", outs = ["g.txt"], cmd = "echo $(GREETING) $(FROM_HOME) $(EXTRA) > $@")
`)
	w.write(".bazelrc", `# the workspace's
build --define=GREETING=hello
build --incompatible_strict_action_env
build:loud --define=GREETING=LOUD
import %workspace%/tools/extra.rc
`)
	w.write("tools/extra.rc", "build --define=EXTRA=imported\n")
	if err := os.WriteFile(filepath.Join(home, ".bazelrc"), []byte("build --define=FROM_HOME=home\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home}
	warning := "WARNING: " + filepath.Join(w.dir, ".bazelrc") + ":3: rbs build does not take --incompatible_strict_action_env; ignored\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "//rc:g"}, "hello home imported\n"},
		{[]string{"build", "--config=loud", "//rc:g"}, "LOUD home imported\n"},
		{[]string{"build", "--define=GREETING=given", "//rc:g"}, "given home imported\n"},
	} {
		out, err := w.rbsEnv(env, c.args...)
		if err != nil {
			t.Fatalf("rbs %s: %v\n%s", strings.Join(c.args, " "), err, out)
		}
		if strings.Count(out, warning) != 1 {
			t.Errorf("rbs %s: want the warning %q once in:\n%s", strings.Join(c.args, " "), warning, out)
		}
		if got := w.read("rbs-bin/rc/g.txt"); got != c.want {
			t.Errorf("rbs %s: g.txt holds %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
	out, err := w.rbsEnv(env, "build", "--incompatible_strict_action_env", "//rc:g")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(out, "unknown flag --incompatible_strict_action_env") {
		t.Fatalf("the flag on the command line: %v\n%s", err, out)
	}
	out, err = w.rbsEnv(env, "build", "--config=nope", "//rc:g")
	if err == nil || !strings.Contains(out, "--config=nope: no rc file has a line for it") {
		t.Fatalf("an undefined --config: %v\n%s", err, out)
	}

	// Bazel's startup options before the command: --bazelrc reads a file
	// after the standard ones, --nohome_rc leaves ~/.bazelrc out; and
	// --enable_platform_specific_config and --announce_rc, as Bazel's
	// flags-parsing tutorial uses them.
	w.write("tools/my.rc", `build --enable_platform_specific_config
build:linux --define=EXTRA=linux --cpu=armeabi-v7a
build:foo --define=GREETING=foo
`)
	w.write("rc/defs.bzl", `def _impl(ctx):
    print("vars: %s %s %s %s" % (ctx.var["GREETING"], ctx.var.get("FROM_HOME", "-"), ctx.var["EXTRA"], ctx.var["TARGET_CPU"]))
    return []

show = rule(implementation = _impl)
`)
	w.write("rc/BUILD.bazel", "load(\":defs.bzl\", \"show\")\nshow(name = \"vars\")\n")
	out, err = w.rbsEnv(env, "--bazelrc=tools/my.rc", "--nohome_rc", "build", "--config=foo", "--announce_rc", "//rc:vars")
	if err != nil {
		t.Fatalf("rbs --bazelrc=tools/my.rc --nohome_rc build: %v\n%s", err, out)
	}
	rcPath := filepath.Join(w.dir, "tools/my.rc")
	for _, want := range []string{
		"vars: foo - linux armeabi-v7a\n",
		"INFO: Reading rc options for 'build' from " + rcPath + ":\n  'build' options: --enable_platform_specific_config\n",
		"INFO: Found applicable config definition build:foo in file " + rcPath + ": --define=GREETING=foo\n",
		"INFO: Found applicable config definition build:linux in file " + rcPath + ": --define=EXTRA=linux --cpu=armeabi-v7a\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--announce_rc: no %q in:\n%s", want, out)
		}
	}
}
