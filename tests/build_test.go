package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// workspace is a copy of examples/ for the build tool, with its own cache.
type workspace struct {
	t     *testing.T
	dir   string
	cache string
}

func newWorkspace(t *testing.T) *workspace {
	w := &workspace{t: t, dir: filepath.Join(t.TempDir(), "ws"), cache: t.TempDir()}
	copyTree(t, "../examples", w.dir)
	os.RemoveAll(filepath.Join(w.dir, "rbs-out"))
	os.Remove(filepath.Join(w.dir, "rbs-bin"))
	return w
}

// rbs runs the rbs CLI in dir of the workspace.
func (w *workspace) rbs(dir string, args ...string) (string, error) {
	cmd := exec.Command(rbsBin, args...)
	cmd.Dir = filepath.Join(w.dir, dir)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+w.cache, "RBS_REMOTE=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (w *workspace) mustRbs(args ...string) string {
	w.t.Helper()
	out, err := w.rbs("", args...)
	if err != nil {
		w.t.Fatalf("rbs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (w *workspace) write(name, content string) {
	w.t.Helper()
	p := filepath.Join(w.dir, name)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workspace) read(name string) string {
	w.t.Helper()
	b, err := os.ReadFile(filepath.Join(w.dir, name))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

var builtLine = regexp.MustCompile(`Built (\d+) targets?: (\d+) actions?, (\d+) executed (?:locally|remotely), (\d+) cached`)

// executed returns how many actions a build ran and how many it took from
// the cache.
func executed(t *testing.T, out string) (ran, cached int) {
	t.Helper()
	m := builtLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no build summary in:\n%s", out)
	}
	ran, _ = strconv.Atoi(m[3])
	cached, _ = strconv.Atoi(m[4])
	return
}

func TestBuildIncrementally(t *testing.T) {
	w := newWorkspace(t)
	if ran, _ := executed(t, w.mustRbs("build", "//...")); ran != 3 {
		t.Fatalf("a build from scratch ran %d actions, want 3 (two genrules and the custom rule)", ran)
	}
	if got := w.read("rbs-bin/app/stamped.txt"); got != "stamp: rbs\n3\n" {
		t.Fatalf("stamped.txt = %q", got)
	}
	if ran, cached := executed(t, w.mustRbs("build", "//...")); ran != 0 || cached != 3 {
		t.Fatalf("a no-op rebuild ran %d actions (%d cached), want 0", ran, cached)
	}
	// Changing a word changes words.txt but not the count: exactly the two
	// actions whose inputs changed run again.
	w.write("app/words.in", "gamma\nalpha\ndelta\n")
	if ran, cached := executed(t, w.mustRbs("build", "//...")); ran != 2 || cached != 1 {
		t.Fatalf("after changing words.in: %d actions ran, %d cached; want 2 and 1", ran, cached)
	}
	if got := w.read("rbs-bin/app/words.txt"); got != "alpha\ndelta\ngamma\n" {
		t.Fatalf("words.txt = %q", got)
	}
	// Touching a file without changing it reruns nothing.
	os.Chtimes(filepath.Join(w.dir, "app/words.in"), time.Now(), time.Now())
	if ran, _ := executed(t, w.mustRbs("build", "//app:count")); ran != 0 {
		t.Fatalf("touching words.in reran %d actions", ran)
	}
	// Patterns relative to the working directory, and query.
	out, err := w.rbs("app", "build", ":count")
	if err != nil {
		t.Fatalf("relative pattern: %v\n%s", err, out)
	}
	q := w.mustRbs("query", "kind(genrule, //...)")
	if q != "//app:count\n//app:words\n" {
		t.Fatalf("kind query: %q", q)
	}
	if q := w.mustRbs("query", "deps(//app:count)"); !strings.Contains(q, "//app:words.in") {
		t.Fatalf("deps query: %q", q)
	}
	w.mustRbs("clean")
	if _, err := os.Stat(filepath.Join(w.dir, "rbs-out")); !os.IsNotExist(err) {
		t.Fatal("clean left rbs-out")
	}
	// The local action cache outlives clean.
	if ran, _ := executed(t, w.mustRbs("build", "//...")); ran != 0 {
		t.Fatalf("a build after clean ran %d actions instead of using the cache", ran)
	}
}

func TestTestAndRun(t *testing.T) {
	requireTool(t, "python3")
	w := newWorkspace(t)
	out := w.mustRbs("test", "//...")
	if !strings.Contains(out, "2 tests: 2 passed, 0 failed") {
		t.Fatalf("rbs test:\n%s", out)
	}
	if out := w.mustRbs("test", "//..."); strings.Count(out, "(cached) PASSED") != 2 {
		t.Fatalf("second rbs test did not use cached results:\n%s", out)
	}
	w.write("broken/BUILD.rbs", `sh_test(name = "fails", srcs = ["fails.sh"], tags = ["broken"])
sh_test(name = "passes", srcs = ["passes.sh"])
`)
	w.write("broken/fails.sh", "#!/bin/sh\necho 'something is wrong'\nexit 1\n")
	w.write("broken/passes.sh", "#!/bin/sh\nexit 0\n")
	out, err := w.rbs("", "test", "//broken:all")
	if err == nil || !strings.Contains(out, "//broken:fails") || !strings.Contains(out, "FAILED") {
		t.Fatalf("a failing test: %v\n%s", err, out)
	}
	if log := w.read("rbs-out/testlogs/broken/fails/test.log"); log != "something is wrong\n" {
		t.Fatalf("test log %q", log)
	}
	if out := w.mustRbs("test", "--test_tag_filters=-broken", "//broken:all"); !strings.Contains(out, "1 test: 1 passed") {
		t.Fatalf("tag filter:\n%s", out)
	}
	if got := w.mustRbs("run", "//app:greet", "--", "Ada", "Linus"); !strings.HasSuffix(got, "hello, Ada\nhello, Linus\n") {
		t.Fatalf("rbs run with args: %q", got)
	}
	if got := w.mustRbs("run", "//app:greet"); !strings.HasSuffix(got, "hello, alpha\nhello, beta\nhello, gamma\n") {
		t.Fatalf("rbs run reading its runfiles: %q", got)
	}
}

func TestBuildErrors(t *testing.T) {
	w := newWorkspace(t)
	tests := []struct {
		name, build, want string
	}{
		{"missing label", `genrule(name = "g", srcs = [":nope"], outs = ["o"], cmd = "true")`, `//bad:g: attribute srcs: no such target //bad:nope`},
		{"cycle", `filegroup(name = "a", srcs = [":b"])
filegroup(name = "b", srcs = [":a"])`, `dependency cycle: //bad:a -> //bad:b -> //bad:a`},
		{"output declared twice", `genrule(name = "a", outs = ["x"], cmd = "touch $@")
genrule(name = "b", outs = ["x"], cmd = "touch $@")`, `output //bad:x is declared twice: by //bad:a and by //bad:b`},
		{"writes outside its outputs", `genrule(name = "sneaky", outs = ["ok.txt"], cmd = "touch $@ $(RULEDIR)/extra.txt")`, `//bad:sneaky.*extra.txt.*not one of its declared outputs`},
		{"missing output", `genrule(name = "lazy", outs = ["never.txt"], cmd = "true")`, `//bad:lazy.*never.txt`},
		{"failing command", `genrule(name = "f", outs = ["f.txt"], cmd = "echo oops >&2; exit 3")`, `(?s)//bad:f.*exit 3.*oops`},
		{"starlark error", `genrule(name = "g", outs = 3)`, `(?s)bad/BUILD.rbs:1:8.*outs`},
		{"misspelt rule", `cc_libary(name = "l", srcs = ["l.c"])`, `bad/BUILD.rbs:1:1: undefined: cc_libary \(did you mean cc_library\?\)`},
		{"misspelt attribute", `genrule(name = "g", srcss = ["a"], outs = ["o"], cmd = "true")`, `unknown attribute "srcss" \(did you mean srcs\?\) \(attributes: cmd, cmd_bash, .*, srcs, toolchains, tools\)`},
		{"misspelt label", `filegroup(name = "words", srcs = [])
filegroup(name = "g", srcs = [":wrods"])`, `no such target //bad:wrods: .* \(did you mean words\?\)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w.write("bad/BUILD.rbs", tt.build)
			out, err := w.rbs("", "build", "//bad:all")
			if err == nil {
				t.Fatalf("build succeeded:\n%s", out)
			}
			if !regexp.MustCompile(tt.want).MatchString(out) {
				t.Fatalf("error does not match %q:\n%s", tt.want, out)
			}
		})
	}
}

// TestBuildOnCluster builds and tests the examples with --remote: the
// outputs match a local build's, the server counts every action as executed,
// and an action that records its working directory ran in a worker's.
func TestBuildOnCluster(t *testing.T) {
	requireTool(t, "python3")
	local := newWorkspace(t)
	local.mustRbs("build", "//...")

	srv := startServer(t)
	workers := []*worker{startWorker(t, srv, "w1"), startWorker(t, srv, "w2")}
	remote := newWorkspace(t)
	remote.write("where/BUILD.rbs", `genrule(name = "where", outs = ["where.txt"], cmd = "pwd > $@")`+"\n")
	out := remote.mustRbs("build", "--remote", srv.Addr, "//...")
	if ran, _ := executed(t, out); ran != 4 {
		t.Fatalf("remote build ran %d actions, want 4:\n%s", ran, out)
	}
	if n := executedOnCluster(t, srv); n != 4 {
		t.Fatalf("the server counts %d executed actions after a remote build of 4", n)
	}
	// pwd prints the physical directory, so the work directories are
	// compared with their symlinks resolved.
	dir, inWorker := strings.TrimSpace(remote.read("rbs-bin/where/where.txt")), false
	for _, w := range workers {
		wd, err := filepath.EvalSymlinks(w.WorkDir)
		if err != nil {
			t.Fatal(err)
		}
		inWorker = inWorker || strings.HasPrefix(dir, wd+"/")
	}
	if !inWorker {
		t.Fatalf("the remote action ran in %s, in no worker's work directory", dir)
	}
	for _, f := range []string{"app/words.txt", "app/count.txt", "app/stamped.txt", "app/greet"} {
		if l, r := local.read("rbs-bin/"+f), remote.read("rbs-bin/"+f); l != r {
			t.Fatalf("%s differs: local %q, remote %q", f, l, r)
		}
	}
	if out := remote.mustRbs("test", "--remote", srv.Addr, "//..."); !strings.Contains(out, "2 passed") {
		t.Fatalf("tests on the cluster:\n%s", out)
	}
	if n := executedOnCluster(t, srv); n != 6 {
		t.Fatalf("the server counts %d executed actions after 4 built and 2 tests run remotely, want 6", n)
	}
	// A clean build on the cluster is all cache hits.
	other := newWorkspace(t)
	out = other.mustRbs("build", "--remote", srv.Addr, "//...")
	if ran, cached := executed(t, out); ran != 0 || cached != 3 {
		t.Fatalf("second clean build on the cluster: %d ran, %d cached:\n%s", ran, cached, out)
	}
	if n := executedOnCluster(t, srv); n != 6 {
		t.Fatalf("the server counts %d executed actions after a build of cache hits, want still 6", n)
	}
}

// executedOnCluster returns how many actions the server's workers have
// executed, from `rbs remote status --json`.
func executedOnCluster(t *testing.T, srv *server) int {
	t.Helper()
	var st struct {
		Actions struct {
			Completed int `json:"completed"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st.Actions.Completed
}

// --remote_cache runs actions locally and shares their results: a second
// machine (a fresh workspace and local cache) runs nothing.
func TestBuildWithRemoteCache(t *testing.T) {
	srv := startServer(t)
	first := newWorkspace(t)
	if ran, _ := executed(t, first.mustRbs("build", "--remote_cache", srv.Addr, "//...")); ran != 3 {
		t.Fatal("the first build did not run its actions")
	}
	second := newWorkspace(t)
	out := second.mustRbs("build", "--remote_cache", srv.Addr, "//...")
	if ran, cached := executed(t, out); ran != 0 || cached != 3 {
		t.Fatalf("with a warm remote cache: %d ran, %d cached:\n%s", ran, cached, out)
	}
	if got := second.read("rbs-bin/app/stamped.txt"); got != "stamp: rbs\n3\n" {
		t.Fatalf("stamped.txt from the remote cache = %q", got)
	}
}

// writePython adds a package whose py_test imports a sibling module and
// whose genrule runs a py_binary tool that does too: Python writes
// __pycache__ next to each imported module, inside the action's runfiles or
// source directory.
func (w *workspace) writePython() {
	w.write("py/BUILD.rbs", `py_test(name = "helper_test", srcs = ["helper_test.py", "helper.py"])
py_binary(name = "tool", srcs = ["tool.py", "helper.py"])
genrule(name = "gen", outs = ["gen.txt"], cmd = "$(location :tool) > $@", tools = [":tool"])
`)
	w.write("py/helper.py", "def shout(s):\n    return s.upper() + '!'\n")
	w.write("py/helper_test.py", "from helper import shout\nassert shout('hi') == 'HI!', shout('hi')\n")
	w.write("py/tool.py", "from helper import shout\nprint(shout('made'))\n")
}

// Actions may write inside their input tree, as Python does; what they
// write there is dropped. A write anywhere else is still an error.
func TestActionsWriteIntoTheirInputs(t *testing.T) {
	requireTool(t, "python3")
	srv := startServer(t)
	startWorker(t, srv, "w1")
	for _, where := range [][]string{nil, {"--remote", srv.Addr}} {
		w := newWorkspace(t)
		w.writePython()
		if out := w.mustRbs(append([]string{"test"}, append(where, "//py:helper_test")...)...); !strings.Contains(out, "1 test: 1 passed") {
			t.Fatalf("rbs test %v:\n%s", where, out)
		}
		w.mustRbs(append([]string{"build"}, append(where, "//py:gen")...)...)
		if got := w.read("rbs-bin/py/gen.txt"); got != "MADE!\n" {
			t.Fatalf("rbs build %v: gen.txt = %q", where, got)
		}
		for _, dropped := range []string{"rbs-bin/py/__pycache__", "py/__pycache__"} {
			if _, err := os.Stat(filepath.Join(w.dir, dropped)); !os.IsNotExist(err) {
				t.Fatalf("rbs %v left %s in the workspace (%v)", where, dropped, err)
			}
		}
	}
	w := newWorkspace(t)
	w.write("junk/BUILD.rbs", `genrule(name = "j", srcs = ["in.txt"], outs = ["o.txt"], cmd = "cp $< $@ && touch junk.txt")`)
	w.write("junk/in.txt", "in\n")
	out, err := w.rbs("", "build", "//junk:j")
	if err == nil || !strings.Contains(out, "//junk:j wrote junk.txt, which is not one of its declared outputs") {
		t.Fatalf("a write into the exec root: %v\n%s", err, out)
	}
}
