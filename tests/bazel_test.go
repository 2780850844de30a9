package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// bazelWorkspace is a copy of examples/bazel set up for an offline Bazel 4
// with its own output root, so tests never share Bazel state.
type bazelWorkspace struct {
	t    *testing.T
	bin  string
	dir  string
	root string
}

func newBazelWorkspace(t *testing.T) *bazelWorkspace {
	bin := requireTool(t, "bazel")
	tmp := t.TempDir()
	w := &bazelWorkspace{t: t, bin: bin, dir: filepath.Join(tmp, "ws"), root: filepath.Join(tmp, "bazel-root")}
	copyTree(t, "../examples/bazel", w.dir)
	stubs, err := filepath.Abs("testdata/bazel-stubs")
	if err != nil {
		t.Fatal(err)
	}
	rc := fmt.Sprintf(`build --override_repository=remote_coverage_tools=%[1]s/stub_coverage_tools
build --override_repository=rules_cc=%[1]s/stub_rules_cc
build --override_repository=rules_java=%[1]s/stub_rules_java
build --nosandbox_debug
`, stubs)
	if err := os.WriteFile(filepath.Join(w.dir, ".bazelrc"), []byte(rc), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.bazel("shutdown") })
	return w
}

// bazel runs a Bazel command in the workspace.
func (w *bazelWorkspace) bazel(args ...string) (string, error) {
	full := append([]string{"--output_user_root=" + w.root, "--max_idle_secs=300"}, args...)
	return run(w.t, w.dir, nil, w.bin, full...)
}

func (w *bazelWorkspace) mustBazel(args ...string) string {
	w.t.Helper()
	out, err := w.bazel(args...)
	if err != nil {
		w.t.Fatalf("bazel %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

var processesLine = regexp.MustCompile(`INFO: (\d+) process(?:es)?: (.*)\.`)

// processes parses Bazel's "INFO: N processes: 3 remote cache hit, 2 internal."
// line into counts by kind.
func processes(t *testing.T, out string) map[string]int {
	t.Helper()
	m := processesLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no processes summary in Bazel output:\n%s", out)
	}
	kinds := map[string]int{}
	for _, part := range strings.Split(m[2], ", ") {
		n, kind, ok := strings.Cut(part, " ")
		if !ok {
			t.Fatalf("cannot parse %q in %q", part, m[0])
		}
		c, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("cannot parse %q in %q", part, m[0])
		}
		kinds[kind] = c
	}
	return kinds
}

// assertAllCacheHits checks that every non-internal process was a remote
// cache hit.
func assertAllCacheHits(t *testing.T, out string) {
	t.Helper()
	kinds := processes(t, out)
	if kinds["remote cache hit"] == 0 {
		t.Fatalf("no remote cache hits: %v\n%s", kinds, out)
	}
	for kind, n := range kinds {
		if kind != "remote cache hit" && kind != "internal" {
			t.Fatalf("%d processes ran as %q, want only remote cache hits: %v\n%s", n, kind, kinds, out)
		}
	}
}

func TestBazelRemoteCache(t *testing.T) {
	w := newBazelWorkspace(t)
	srv := startServer(t)
	cache := "--remote_cache=grpc://" + srv.Addr

	first := w.mustBazel("test", cache, "//...")
	if kinds := processes(t, first); kinds["remote cache hit"] != 0 {
		t.Fatalf("cold build had cache hits: %v", kinds)
	}
	if !strings.Contains(first, "PASSED") {
		t.Fatalf("test did not pass:\n%s", first)
	}
	w.mustBazel("clean")
	second := w.mustBazel("test", cache, "//...")
	assertAllCacheHits(t, second)

	out, err := os.ReadFile(filepath.Join(w.dir, "bazel-bin", "counted.txt"))
	if err != nil || string(out) != "words:\n3\nALPHA\nBETA\nGAMMA\n" {
		t.Fatalf("counted.txt from the cache = %q, %v", out, err)
	}
}

func TestBazelRemoteCacheWithToken(t *testing.T) {
	w := newBazelWorkspace(t)
	srv := startServer(t, "--token", "t0k3n-for-tests")
	cache := "--remote_cache=grpc://" + srv.Addr

	w.mustBazel("build", cache, "--remote_header=Authorization=Bearer t0k3n-for-tests", "//...")
	w.mustBazel("clean")
	second := w.mustBazel("build", cache, "--remote_header=Authorization=Bearer t0k3n-for-tests", "//...")
	assertAllCacheHits(t, second)

	w.mustBazel("clean")
	out, err := w.bazel("build", cache, "--remote_header=Authorization=Bearer wrong", "//...")
	if err == nil {
		t.Fatalf("build with a wrong token succeeded:\n%s", out)
	}
	if !strings.Contains(out, "UNAUTHENTICATED") {
		t.Fatalf("build with a wrong token did not say UNAUTHENTICATED:\n%s", out)
	}
	if strings.Contains(srv.log.String(), "t0k3n-for-tests") {
		t.Fatal("the server logged its token")
	}
}
