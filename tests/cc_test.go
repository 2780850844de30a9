package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeCC writes a C++ workspace: a library with a header and a private
// one, a header-only library, a binary and a test, from @rules_cc.
func writeCC(ws *workspace) {
	ws.write("MODULE.bazel", "module(name = \"cc\")\nbazel_dep(name = \"rules_cc\", version = \"0.1.1\")\n")
	ws.write("greet/BUILD.bazel", `load("@rules_cc//cc:defs.bzl", "cc_binary", "cc_library", "cc_test")

cc_library(
    name = "version",
    hdrs = ["include/greet/version.h"],
    strip_include_prefix = "include",
)

cc_library(
    name = "greet",
    srcs = ["greet.cc", "internal.h"],
    hdrs = ["greet.h"],
    copts = ["-Wall"],
    defines = ["GREETING=\\\"hello\\\""],
    deps = [":version"],
)

cc_library(
    name = "shout",
    srcs = ["shout.c"],
    hdrs = ["shout.h"],
    includes = ["."],
)

cc_binary(
    name = "hello",
    srcs = ["main.cc"],
    deps = [":greet", ":shout"],
    data = ["motd.txt"],
)

cc_test(
    name = "greet_test",
    srcs = ["greet_test.cc"],
    deps = [":greet"],
)
`)
	ws.write("greet/include/greet/version.h", "#define GREET_VERSION 3\n")
	ws.write("greet/greet.h", "#include <string>\nstd::string greet(const std::string& who);\n")
	ws.write("greet/internal.h", "inline int exclaim() { return 1; }\n")
	ws.write("greet/greet.cc", `#include "greet/greet.h"
#include "greet/internal.h"
#include <greet/version.h>
std::string greet(const std::string& who) {
  return std::string(GREETING) + ", " + who + (exclaim() ? "!" : "") + " v" + std::to_string(GREET_VERSION);
}
`)
	ws.write("greet/shout.h", "#ifdef __cplusplus\nextern \"C\" {\n#endif\nint shout_level(void);\n#ifdef __cplusplus\n}\n#endif\n")
	ws.write("greet/shout.c", "#include \"shout.h\"\nint shout_level(void) { return 2; }\n")
	ws.write("greet/main.cc", `#include <cstdio>
#include "greet/greet.h"
#include "shout.h"
int main() { std::printf("%s (level %d)\n", greet("world").c_str(), shout_level()); return 0; }
`)
	ws.write("greet/greet_test.cc", `#include "greet/greet.h"
int main() { return greet("x") == "hello, x! v3" ? 0 : 1; }
`)
	ws.write("greet/motd.txt", "motd\n")
}

// C and C++ through the real CLI: rbs build, run and test of cc_binary
// and cc_test; the same outputs when built on a cluster of two workers;
// and a header's change rebuilding only what includes it.
func TestCC(t *testing.T) {
	requireTool(t, "g++")
	ws := newWorkspace(t)
	writeCC(ws)
	out := ws.mustRbs("build", "//greet:all")
	if ran, _ := executed(t, out); ran == 0 {
		t.Fatalf("the C++ build ran nothing:\n%s", out)
	}
	if out := ws.mustRbs("run", "//greet:hello"); !strings.Contains(out, "hello, world! v3 (level 2)\n") {
		t.Fatalf("rbs run //greet:hello printed:\n%s", out)
	}
	if out := ws.mustRbs("test", "//greet:greet_test"); !strings.Contains(out, "1 passed") {
		t.Fatalf("rbs test of the cc_test:\n%s", out)
	}
	ws.write("greet/greet_test.cc", "#include \"greet/greet.h\"\nint main() { return greet(\"x\") == \"no\" ? 0 : 1; }\n")
	if out, err := ws.rbs("", "test", "//greet:greet_test"); err == nil || !strings.Contains(out, "1 failed") {
		t.Fatalf("a failing cc_test: %v\n%s", err, out)
	}
	ws.write("greet/greet_test.cc", "#include \"greet/greet.h\"\nint main() { return greet(\"x\") == \"hello, x! v3\" ? 0 : 1; }\n")

	// A change to a header recompiles only the sources that include it;
	// a change to a comment leaves their objects as they were, so the
	// archives and links after them are cache hits.
	ws.write("greet/shout.h", "#ifdef __cplusplus\nextern \"C\" {\n#endif\nint shout_level(void); /* changed */\n#ifdef __cplusplus\n}\n#endif\n")
	out = ws.mustRbs("build", "//greet:hello")
	if ran, _ := executed(t, out); ran != 2 {
		t.Fatalf("after changing shout.h, %d actions ran, want 2 (the compiles of shout.c and main.cc, which include it):\n%s", ran, out)
	}
	ws.write("greet/internal.h", "inline int exclaim() { return 0; }\n")
	out = ws.mustRbs("build", "//greet:hello")
	if ran, _ := executed(t, out); ran != 3 {
		t.Fatalf("after changing the private header internal.h, %d actions ran, want 3 (greet.cc's compile, the archive and the link):\n%s", ran, out)
	}
	if out := ws.mustRbs("run", "//greet:hello"); !strings.Contains(out, "hello, world v3 (level 2)\n") {
		t.Fatalf("after the change rbs run //greet:hello printed:\n%s", out)
	}
	if out := ws.mustRbs("build", "//greet:hello"); !strings.Contains(out, " 0 executed") {
		t.Fatalf("a no-op rebuild ran actions:\n%s", out)
	}

	// On a cluster of two workers, the same outputs.
	srv := startServer(t)
	startWorker(t, srv, "w1", "--action-slots", "2")
	startWorker(t, srv, "w2", "--action-slots", "2")
	remote := newWorkspace(t)
	writeCC(remote)
	ws.write("greet/shout.h", remote.read("greet/shout.h"))
	ws.write("greet/internal.h", remote.read("greet/internal.h"))
	ws.mustRbs("build", "//greet:all")
	out = remote.mustRbs("build", "--remote", srv.Addr, "//greet:all")
	if ran, _ := executed(t, out); ran == 0 || executedOnCluster(t, srv) != ran {
		t.Fatalf("the remote build ran %d actions, the cluster %d:\n%s", ran, executedOnCluster(t, srv), out)
	}
	for _, f := range []string{"greet/hello", "greet/greet_test", "greet/libgreet.a", "greet/libshout.a"} {
		l, err1 := os.ReadFile(filepath.Join(ws.dir, "rbs-bin", f))
		r, err2 := os.ReadFile(filepath.Join(remote.dir, "rbs-bin", f))
		if err1 != nil || err2 != nil || string(l) != string(r) {
			t.Fatalf("%s differs between the local build and the cluster's (%v, %v)", f, err1, err2)
		}
	}
	if out := remote.mustRbs("test", "--remote", srv.Addr, "//greet:greet_test"); !strings.Contains(out, "1 passed") {
		t.Fatalf("the cc_test on the cluster:\n%s", out)
	}
}
