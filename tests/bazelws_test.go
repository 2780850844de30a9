package tests

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rules"
)

// A workspace written for Bazel: rules loaded from @rules_shell and
// @bazel_skylib, and a select() on config_setting targets flipped from the
// command line by --define and by a build setting.
func TestBazelStyleWorkspace(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("MODULE.bazel", `module(name = "demo")
bazel_dep(name = "rules_shell", version = "0.4.1")
bazel_dep(name = "bazel_skylib", version = "1.7.1")
`)
	ws.write("cfg/defs.bzl", `BuildSettingInfo = provider(fields = ["value"])

def _impl(ctx):
    return [BuildSettingInfo(value = ctx.build_setting_value)]

string_flag = rule(implementation = _impl, build_setting = config.string(flag = True))
`)
	ws.write("cfg/BUILD.bazel", `load(":defs.bzl", "string_flag")
package(default_visibility = ["//visibility:public"])
string_flag(name = "greeting", build_setting_default = "hello")
config_setting(name = "prod", define_values = {"mode": "prod"})
config_setting(name = "bonjour", flag_values = {":greeting": "bonjour"})
`)
	ws.write("hello/BUILD.bazel", `load("@rules_shell//shell:sh_binary.bzl", "sh_binary")
load("@bazel_skylib//lib:paths.bzl", "paths")

genrule(
    name = "mode",
    outs = [paths.join("gen", "mode.txt")],
    cmd = "echo " + select({"//cfg:prod": "production", "//conditions:default": "development"}) + " > $@",
)
genrule(
    name = "word",
    outs = ["word.txt"],
    cmd = select({"//cfg:bonjour": "echo bonjour > $@", "//conditions:default": "echo hello > $@"}),
)
sh_binary(name = "say", srcs = ["say.sh"], data = [":mode", ":word"])
genrule(name = "vars", outs = ["vars.txt"], cmd = "echo $(WHO) $(COMPILATION_MODE) > $@; $(CC) --version | head -c 1 >> $@")
`)
	ws.write("hello/say.sh", "#!/bin/sh\ncat hello/gen/mode.txt hello/word.txt\n")

	ws.mustRbs("build", "//hello:mode", "//hello:word")
	if got := ws.read("rbs-bin/hello/gen/mode.txt") + ws.read("rbs-bin/hello/word.txt"); got != "development\nhello\n" {
		t.Fatalf("default configuration built %q", got)
	}
	ws.mustRbs("build", "--define", "mode=prod", "--//cfg:greeting=bonjour", "//hello:mode", "//hello:word")
	if got := ws.read("rbs-bin/hello/gen/mode.txt") + ws.read("rbs-bin/hello/word.txt"); got != "production\nbonjour\n" {
		t.Fatalf("--define mode=prod --//cfg:greeting=bonjour built %q", got)
	}
	ws.mustRbs("build", "--define", "WHO=me", "-c", "opt", "//hello:vars")
	if got := ws.read("rbs-bin/hello/vars.txt"); !strings.HasPrefix(got, "me opt\n") || len(got) != len("me opt\n")+1 {
		t.Fatalf("a genrule's make variables gave %q", got)
	}
	if out := ws.mustRbs("run", "--define", "mode=prod", "//hello:say"); !strings.Contains(out, "production\nhello\n") {
		t.Fatalf("rbs run of the sh_binary from @rules_shell printed:\n%s", out)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"build", "--define", "novalue", "//hello:mode"}, `--define "novalue": want NAME=VALUE`},
		{[]string{"build", "--//cfg:nosuch=1", "//hello:mode"}, "//cfg:nosuch"},
		{[]string{"build", "--compilation_mode", "fast", "//hello:mode"}, `--compilation_mode "fast": want one of fastbuild, dbg, opt`},
	} {
		out, err := ws.rbs("", bad.args...)
		if err == nil || !strings.Contains(out, bad.want) {
			t.Errorf("rbs %s: %v, want an error with %q:\n%s", strings.Join(bad.args, " "), err, bad.want, out)
		}
	}
	ws.write("other/BUILD.bazel", `load("@rules_go//go:def.bzl", "go_binary")`+"\n")
	out, err := ws.rbs("", "build", "//other:all")
	if err == nil || !strings.Contains(out, "unknown repository @rules_go: no local_repository, repository rule, bazel_dep with a local_path_override or --registry declares it; the repositories are @bazel_skylib, @bazel_tools, @platforms, @rbs, @rules_cc, @rules_java, @rules_python, @rules_shell") {
		t.Fatalf("an unknown repository: %v\n%s", err, out)
	}
}

// An aspect's actions are built when a rule's outputs include what they
// produce, and a symbolic macro's targets build like any other.
func TestAspectAndMacroBuild(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("asp/defs.bzl", `NamesInfo = provider(fields = ["files"])

def _names_impl(target, ctx):
    out = ctx.actions.declare_file(target.label.name + ".names")
    srcs = ctx.rule.files.srcs
    ctx.actions.run_shell(outputs = [out], inputs = srcs, command = "cat %s > %s" % (" ".join([f.path for f in srcs]) or "/dev/null", out.path))
    return [NamesInfo(files = depset([out], transitive = [d[NamesInfo].files for d in ctx.rule.attr.deps]))]

names = aspect(implementation = _names_impl, attr_aspects = ["deps"])

def _lib_impl(ctx):
    return []

lib = rule(implementation = _lib_impl, attrs = {"srcs": attr.label_list(allow_files = True), "deps": attr.label_list()})

def _all_impl(ctx):
    return [DefaultInfo(files = depset(transitive = [d[NamesInfo].files for d in ctx.attr.deps]))]

all_names = rule(implementation = _all_impl, attrs = {"deps": attr.label_list(aspects = [names])})

def _pair_impl(name, visibility, word):
    native.genrule(name = name + "_one", outs = [name + "_one.txt"], cmd = "echo " + word + " > $@")
    native.genrule(name = name, srcs = [":" + name + "_one"], outs = [name + ".txt"], cmd = "cat $< $< > $@", visibility = visibility)

pair = macro(implementation = _pair_impl, attrs = {"word": attr.string(mandatory = True)})
`)
	ws.write("asp/BUILD", `load(":defs.bzl", "all_names", "lib", "pair")
lib(name = "a", srcs = ["a.txt"])
lib(name = "b", srcs = ["b.txt"], deps = [":a"])
all_names(name = "all", deps = [":b"])
pair(name = "twice", word = "again")
`)
	ws.write("asp/a.txt", "alpha\n")
	ws.write("asp/b.txt", "beta\n")
	ws.mustRbs("build", "//asp:all", "//asp:twice")
	if a, b := ws.read("rbs-bin/asp/a.names"), ws.read("rbs-bin/asp/b.names"); a != "alpha\n" || b != "beta\n" {
		t.Fatalf("the aspect's outputs: %q, %q", a, b)
	}
	if got := ws.read("rbs-bin/asp/twice.txt"); got != "again\nagain\n" {
		t.Fatalf("the macro's target built %q", got)
	}
}

// bazelRunfilesInit is the initialisation that Bash scripts written for
// Bazel carry (Bazel's runfiles.bash, v3), unchanged.
const bazelRunfilesInit = `# --- begin runfiles.bash initialization v3 ---
set -uo pipefail; set +e; f=bazel_tools/tools/bash/runfiles/runfiles.bash
source "${RUNFILES_DIR:-/dev/null}/$f" 2>/dev/null || \
  source "$(grep -sm1 "^$f " "${RUNFILES_MANIFEST_FILE:-/dev/null}" | cut -f2- -d' ')" 2>/dev/null || \
  source "$0.runfiles/$f" 2>/dev/null || \
  source "$(grep -sm1 "^$f " "$0.runfiles_manifest" | cut -f2- -d' ')" 2>/dev/null || \
  source "$(grep -sm1 "^$f " "$0.exe.runfiles_manifest" | cut -f2- -d' ')" 2>/dev/null || \
  { echo>&2 "ERROR: cannot find $f"; exit 1; }; f=; set -e
# --- end runfiles.bash initialization v3 ---
`

// Args expand the directories among their values when the action runs, as
// Bazel's expand_directories does: format_each, add_joined, map_each with
// the directory expander, a param file and ctx.actions.write of an Args.
// The expected lines are what Bazel 4.2.3 wrote for the same workspace,
// bazel-out read as rbs-out. After the directory's contents change, the
// next build expands it again.
func TestExpandDirectories(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("d/defs.bzl", `def _expand(f, dir_expander):
    return [g.basename + "!" for g in dir_expander.expand(f)]

def _impl(ctx):
    d = ctx.actions.declare_directory(ctx.label.name + "_tree")
    ctx.actions.run_shell(outputs = [d], inputs = [ctx.file.names], command = "mkdir -p %s/sub && for n in $(cat %s); do echo $n > %s/$n; done" % (d.path, ctx.file.names.path, d.path))
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    args = ctx.actions.args()
    args.add(out)
    args.add_all([d], format_each = "--f=%s")
    args.add_all("--no", [d], expand_directories = False)
    args.add_joined("--j", [d, ctx.file.names], join_with = ",")
    args.add_all([d], map_each = _expand)
    pf = ctx.actions.args()
    pf.use_param_file("@%s", use_always = True)
    pf.set_param_file_format("multiline")
    pf.add_all([d])
    ctx.actions.run_shell(outputs = [out], inputs = [d], arguments = [args, pf],
        command = 'o=$1; shift; for a in "$@"; do echo "$a"; done > $o; p=$(echo "$@" | tr " " "\\n" | grep "^@" | cut -c2-); cat $p >> $o')
    w = ctx.actions.declare_file(ctx.label.name + ".written")
    wa = ctx.actions.args()
    wa.add_all([d])
    ctx.actions.write(w, wa)
    return [DefaultInfo(files = depset([out, w]))]

expand = rule(implementation = _impl, attrs = {"names": attr.label(allow_single_file = True)})
`)
	ws.write("d/BUILD", `load(":defs.bzl", "expand")
expand(name = "e", names = "names.txt")
`)
	ws.write("d/names.txt", "a.txt c.txt sub/b.txt\n")
	ws.mustRbs("build", "//d:e")
	bin := rules.BinDir(platform.Host(), "")
	tree := bin + "/d/e_tree/"
	want := "--f=" + tree + "a.txt\n--f=" + tree + "c.txt\n--f=" + tree + "sub/b.txt\n--no\n" + strings.TrimSuffix(tree, "/") + "\n" +
		"--j\n" + tree + "a.txt," + tree + "c.txt," + tree + "sub/b.txt,d/names.txt\n" +
		"a.txt!\nc.txt!\nb.txt!\n@" + bin + "/d/e.txt-0.params\n" +
		tree + "a.txt\n" + tree + "c.txt\n" + tree + "sub/b.txt\n"
	if got := ws.read("rbs-bin/d/e.txt"); got != want {
		t.Errorf("the command line with directories expanded:\n%s\nwant:\n%s", got, want)
	}
	if got, want := ws.read("rbs-bin/d/e.written"), tree+"a.txt\n"+tree+"c.txt\n"+tree+"sub/b.txt\n"; got != want {
		t.Errorf("ctx.actions.write of an Args: %q, want %q", got, want)
	}
	ws.write("d/names.txt", "z.txt\n")
	ws.mustRbs("build", "//d:e")
	if got, want := ws.read("rbs-bin/d/e.written"), tree+"z.txt\n"; got != want {
		t.Errorf("after the directory changed, ctx.actions.write of an Args: %q, want %q", got, want)
	}
}

// symlinks and root symlinks.
// A shell test and binary written for Bazel find their data through
// @bazel_tools//tools/bash/runfiles, under rbs test (locally and on a
// cluster) and rbs run: under the main repository's name (_main, in a
// workspace with a MODULE.bazel) and its module's, through the tree or its
// manifest, with the data of their data, and at the paths of a rule's
func TestBashRunfilesLibrary(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("rf/links.bzl", `
def _impl(ctx):
    f = ctx.file.src
    return [DefaultInfo(runfiles = ctx.runfiles(symlinks = {"renamed/d.txt": f}, root_symlinks = {"top/d.txt": f}))]

linked = rule(implementation = _impl, attrs = {"src": attr.label(allow_single_file = True)})
`)
	ws.write("rf/BUILD.bazel", `load("@rules_shell//shell:sh_test.bzl", "sh_test")
load("@rules_shell//shell:sh_binary.bzl", "sh_binary")
load(":links.bzl", "linked")
filegroup(name = "group", srcs = ["data.txt"], data = ["more.txt"])
linked(name = "links", src = "data.txt")
sh_test(name = "find_test", srcs = ["find.sh"], data = [":group", ":links"], deps = ["@bazel_tools//tools/bash/runfiles"])
sh_binary(name = "find", srcs = ["find.sh"], data = [":group", ":links"], deps = ["@bazel_tools//tools/bash/runfiles"])
`)
	ws.write("rf/find.sh", "#!/usr/bin/env bash\n"+bazelRunfilesInit+`for p in _main/rf/data.txt rbs_example/rf/data.txt _main/rf/more.txt _main/renamed/d.txt top/d.txt; do
  f=$(rlocation $p) || { echo "no $p in $RUNFILES_DIR"; exit 1; }
  echo "$p: $(cat "$f")"
done
grep -q "^_main/rf/more.txt " "$RUNFILES_MANIFEST_FILE" || { echo "no manifest at $RUNFILES_MANIFEST_FILE"; exit 1; }
f=$(RUNFILES_DIR= rlocation rbs_example/rf/more.txt) || { echo "not found through the manifest"; exit 1; }
echo "through the manifest: $(cat "$f")"
if rlocation _main/rf/nosuch.txt; then echo "found a file that is not there"; exit 1; fi
`)
	ws.write("rf/more.txt", "more data\n")
	ws.write("rf/data.txt", "found the data\n")
	if out := ws.mustRbs("test", "//rf:find_test"); !strings.Contains(out, "1 passed") {
		t.Fatalf("rbs test of a script using Bazel's runfiles library:\n%s", out)
	}
	want := []string{"_main/rf/data.txt: found the data\n", "rbs_example/rf/data.txt: found the data\n", "_main/rf/more.txt: more data\n",
		"_main/renamed/d.txt: found the data\n", "top/d.txt: found the data\n", "through the manifest: more data\n"}
	out := ws.mustRbs("run", "//rf:find")
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("rbs run of a script using Bazel's runfiles library: no %q in:\n%s", w, out)
		}
	}
	if log := ws.read("rbs-out/testlogs/rf/find_test/test.log"); !strings.Contains(log, strings.Join(want, "")) {
		t.Fatalf("the test's log:\n%s", log)
	}
	srv := startServer(t)
	startWorker(t, srv, "w1", "--action-slots", "2")
	if out := ws.mustRbs("test", "--remote", srv.Addr, "//rf:find_test"); !strings.Contains(out, "1 passed") {
		t.Fatalf("the same test on a cluster:\n%s", out)
	}
}

// A Python test and binary written for Bazel find their data through the
// runfiles library of @rules_python (or @bazel_tools), under both names of
// the main repository, through the tree or its manifest; data of data
// comes with them.
func TestPythonRunfilesLibrary(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("pyrf/BUILD.bazel", `load("@rules_python//python:defs.bzl", "py_binary", "py_library", "py_test")
py_library(name = "lib", srcs = ["lib.py"], data = ["lib_data.txt"])
py_test(name = "find_test", srcs = ["find.py"], main = "find.py", data = ["data.txt"], deps = [":lib", "@rules_python//python/runfiles"])
py_binary(name = "find", srcs = ["find.py"], data = ["data.txt"], deps = [":lib", "@rules_python//python/runfiles"])
`)
	ws.write("pyrf/lib.py", "NAME = 'lib'\n")
	ws.write("pyrf/lib_data.txt", "the library's data\n")
	ws.write("pyrf/data.txt", "found the data\n")
	ws.write("pyrf/find.py", `import os
from python.runfiles import runfiles
from bazel_tools.tools.python.runfiles import runfiles as tools_runfiles
from pyrf import lib

r = runfiles.Create()
for p in ["_main/pyrf/data.txt", "rbs_example/pyrf/data.txt", "_main/pyrf/lib_data.txt"]:
    f = r.Rlocation(p)
    if f is None:
        raise SystemExit("no %s" % p)
    print("%s: %s" % (p, open(f).read().strip()))
m = tools_runfiles.CreateManifestBased(os.environ["RUNFILES_MANIFEST_FILE"])
print("through the manifest: %s" % open(m.Rlocation("rbs_example/pyrf/lib_data.txt")).read().strip())
if r.Rlocation("_main/pyrf/nosuch.txt") is not None:
    raise SystemExit("found a file that is not there")
print("env", sorted(r.EnvVars()), lib.NAME)
`)
	want := "_main/pyrf/data.txt: found the data\nrbs_example/pyrf/data.txt: found the data\n_main/pyrf/lib_data.txt: the library's data\n" +
		"through the manifest: the library's data\nenv ['RUNFILES_DIR'] lib\n"
	if out := ws.mustRbs("test", "//pyrf:find_test"); !strings.Contains(out, "1 passed") {
		t.Fatalf("rbs test of a Python test using the runfiles library:\n%s", out)
	}
	if log := ws.read("rbs-out/testlogs/pyrf/find_test/test.log"); !strings.Contains(log, want) {
		t.Fatalf("the test's log, want %q:\n%s", want, log)
	}
	if out := ws.mustRbs("run", "//pyrf:find"); !strings.Contains(out, want) {
		t.Fatalf("rbs run, want %q:\n%s", want, out)
	}
}

// Repositories in directories of this machine, through the real CLI: a
// bazel_dep with local_path_override whose rule a BUILD file uses, a
// new_local_repository whose file a genrule reads and a test reads at run
// time, and an edit in the repository that the next build sees.
func TestLocalRepositories(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("MODULE.bazel", `module(name = "demo")
bazel_dep(name = "greeter", version = "0.1")
local_path_override(module_name = "greeter", path = "../greeter")
`)
	ws.write("WORKSPACE", `new_local_repository(name = "words", path = "../words", build_file_content = """
exports_files(["word.txt"])
""")
`)
	ws.write("../greeter/MODULE.bazel", `module(name = "greeter", version = "0.1")`)
	ws.write("../greeter/BUILD.bazel", "")
	ws.write("../greeter/defs.bzl", `load("//private:prefix.bzl", "PREFIX")

def _greet_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.run_shell(
        inputs = [ctx.file.src],
        outputs = [out],
        command = "printf '%s' \"$(cat $1)\" > $2" % PREFIX,
        arguments = [ctx.file.src.path, out.path],
    )
    return [DefaultInfo(files = depset([out]))]

greet = rule(implementation = _greet_impl, attrs = {"src": attr.label(allow_single_file = True)})
`)
	ws.write("../greeter/private/BUILD.bazel", "")
	ws.write("../greeter/private/prefix.bzl", `PREFIX = "hello, %s"`)
	ws.write("../words/word.txt", "world")
	ws.write("lr/BUILD.bazel", `load("@greeter//:defs.bzl", "greet")
load("@rules_shell//shell:sh_test.bzl", "sh_test")
greet(name = "hi", src = "@words//:word.txt")
sh_test(name = "word_test", srcs = ["word_test.sh"], data = ["@words//:word.txt"])
`)
	ws.write("lr/word_test.sh", "#!/bin/sh\ngrep -q world \"$RUNFILES_DIR/words/word.txt\"\n")
	ws.mustRbs("build", "//lr:hi")
	if got := ws.read("rbs-bin/lr/hi.txt"); got != "hello, world" {
		t.Fatalf("hi.txt holds %q", got)
	}
	if out := ws.mustRbs("test", "//lr:word_test"); !strings.Contains(out, "1 passed") {
		t.Fatalf("a test reading a local repository's file:\n%s", out)
	}
	ws.write("../words/word.txt", "there")
	ws.write("../greeter/private/prefix.bzl", `PREFIX = "hi, %s"`)
	ws.mustRbs("build", "//lr:hi")
	if got := ws.read("rbs-bin/lr/hi.txt"); got != "hi, there" {
		t.Fatalf("after editing the repositories, hi.txt holds %q", got)
	}
}

// Repositories made by repository rules and module extensions, through
// the real CLI: fetched when first used, reused by the next build, fetched
// again when their definition changes, and dropped by rbs clean
// --expunge.
func TestRepositoryRules(t *testing.T) {
	ws := newWorkspace(t)
	counter := filepath.Join(t.TempDir(), "fetches")
	module := func(greeting string) string {
		return fmt.Sprintf(`module(name = "demo")
gen = use_extension("//rr:ext.bzl", "gen")
gen.greeting(text = %q, counter = %q)
use_repo(gen, generated = "gen_repo")
`, greeting, counter)
	}
	ws.write("MODULE.bazel", module("hello"))
	ws.write("rr/BUILD.bazel", `genrule(name = "g", srcs = ["@generated//:greeting.txt"], outs = ["g.txt"], cmd = "cp $< $@")
`)
	ws.write("rr/ext.bzl", `def _gen_repo_impl(rctx):
    rctx.execute(["sh", "-c", "echo fetched >> " + rctx.attr.counter])
    rctx.file("greeting.txt", rctx.attr.text + "\n")
    rctx.file("BUILD.bazel", 'exports_files(["greeting.txt"])\n')

gen_repo = repository_rule(implementation = _gen_repo_impl, attrs = {"text": attr.string(), "counter": attr.string()})

def _gen_impl(mctx):
    for tag in mctx.modules[0].tags.greeting:
        gen_repo(name = "gen_repo", text = tag.text, counter = tag.counter)

gen = module_extension(
    implementation = _gen_impl,
    tag_classes = {"greeting": tag_class(attrs = {"text": attr.string(), "counter": attr.string()})},
)
`)
	fetches := func() int {
		b, _ := os.ReadFile(counter)
		return strings.Count(string(b), "fetched")
	}
	for i, c := range []struct {
		before func()
		want   string
		n      int
	}{
		{func() {}, "hello\n", 1},
		{func() { ws.write("rr/BUILD.bazel", "# edited\n"+ws.read("rr/BUILD.bazel")) }, "hello\n", 1},
		{func() { ws.write("MODULE.bazel", module("bonjour")) }, "bonjour\n", 2},
		{func() { ws.mustRbs("clean", "--expunge") }, "bonjour\n", 3},
	} {
		c.before()
		ws.mustRbs("build", "//rr:g")
		if got := ws.read("rbs-bin/rr/g.txt"); got != c.want || fetches() != c.n {
			t.Fatalf("step %d: g.txt holds %q after %d fetches; want %q after %d", i, got, fetches(), c.want, c.n)
		}
	}
}

// http_archive and http_file against a local HTTP server, through the real
// CLI: the archive checked against its sha256 (a wrong one is an error
// naming both), strip_prefix and patches applied, a second build and a
// build after rbs clean --expunge downloading nothing, and an integrity
// checked file.
func TestHTTPArchive(t *testing.T) {
	var archive bytes.Buffer
	gz := gzip.NewWriter(&archive)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"lib-1.0/BUILD.bazel":  "exports_files([\"greeting.txt\"])\n",
		"lib-1.0/defs.bzl":     "GREETING = \"hello\"\n",
		"lib-1.0/greeting.txt": "hello from the archive\n",
	} {
		tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	tool := []byte("#!/bin/sh\necho tool\n")
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/lib-1.0.tar.gz":
			w.Write(archive.Bytes())
		case "/tool.sh":
			w.Write(tool)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	sum := sha256.Sum256(archive.Bytes())
	toolSum := sha256.Sum256(tool)
	ws := newWorkspace(t)
	module := func(sha string) string {
		return fmt.Sprintf(`module(name = "demo")
http_archive = use_repo_rule("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")
http_archive(
    name = "lib",
    urls = ["%[1]s/missing.tar.gz", "%[1]s/lib-1.0.tar.gz"],
    sha256 = %[2]q,
    strip_prefix = "lib-1.0",
    patches = ["//third_party:lib.patch"],
    patch_args = ["-p1"],
)
`, srv.URL, sha)
	}
	ws.write("MODULE.bazel", module(hex.EncodeToString(sum[:])))
	ws.write("WORKSPACE", fmt.Sprintf(`load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_file")
http_file(name = "tool", url = "%s/tool.sh", integrity = "sha256-%s", executable = True)
`, srv.URL, base64.StdEncoding.EncodeToString(toolSum[:])))
	ws.write("third_party/BUILD.bazel", "")
	ws.write("third_party/lib.patch", `--- a/greeting.txt
+++ b/greeting.txt
@@ -1 +1 @@
-hello from the archive
+hello from the patched archive
`)
	ws.write("ha/BUILD.bazel", `load("@lib//:defs.bzl", "GREETING")
genrule(name = "g", srcs = ["@lib//:greeting.txt"], outs = ["g.txt"], cmd = "cp $< $@; echo " + GREETING + " >> $@")
genrule(name = "t", srcs = ["@tool//file"], outs = ["t.txt"], cmd = "$(location @tool//file) > $@")
`)
	want := "hello from the patched archive\nhello\n"
	ws.mustRbs("build", "//ha:g", "//ha:t")
	if got := ws.read("rbs-bin/ha/g.txt"); got != want {
		t.Fatalf("g.txt holds %q, want %q", got, want)
	}
	if got := ws.read("rbs-bin/ha/t.txt"); got != "tool\n" {
		t.Fatalf("t.txt holds %q", got)
	}
	fetched := requests.Load()
	ws.mustRbs("clean", "--expunge")
	ws.mustRbs("build", "//ha:g", "//ha:t")
	if got := ws.read("rbs-bin/ha/g.txt"); got != want || requests.Load() != fetched {
		t.Fatalf("after rbs clean --expunge: g.txt %q, %d requests more (want none: the repository cache has both)", got, requests.Load()-fetched)
	}
	wrong := strings.Repeat("0", 64)
	ws.write("MODULE.bazel", module(wrong))
	out, err := ws.rbs("", "build", "//ha:g")
	if err == nil || !strings.Contains(out, "checksum mismatch: want sha256") || !strings.Contains(out, "@lib") {
		t.Fatalf("a wrong sha256: %v\n%s", err, out)
	}
}

// bazel_deps resolved from a registry in the Bazel Central Registry's
// layout (a file:// URL the test writes), through the real CLI: the module
// graph's dependencies looked up too, minimal version selection keeping
// the highest version asked for, a registry patch checked and applied,
// single_version_override pinning a version and archive_override
// replacing a module's source.
func TestRegistry(t *testing.T) {
	reg := t.TempDir()
	archive := func(name string, files map[string]string) (string, string) {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for n, body := range files {
			tw.WriteHeader(&tar.Header{Name: name + "/" + n, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
			tw.Write([]byte(body))
		}
		tw.Close()
		gz.Close()
		p := filepath.Join(reg, "archives", name+".tar.gz")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, buf.Bytes(), 0o644)
		sum := sha256.Sum256(buf.Bytes())
		return "file://" + p, "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
	}
	module := func(name, version, moduleFile string, files map[string]string, patches map[string]string) {
		url, integrity := archive(name+"-"+version, files)
		dir := filepath.Join(reg, "modules", name, version)
		os.MkdirAll(filepath.Join(dir, "patches"), 0o755)
		os.WriteFile(filepath.Join(dir, "MODULE.bazel"), []byte(moduleFile), 0o644)
		src := map[string]any{"url": url, "integrity": integrity, "strip_prefix": name + "-" + version}
		if patches != nil {
			sums := map[string]string{}
			for n, body := range patches {
				os.WriteFile(filepath.Join(dir, "patches", n), []byte(body), 0o644)
				sum := sha256.Sum256([]byte(body))
				sums[n] = "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
			}
			src["patches"], src["patch_strip"] = sums, 1
		}
		b, _ := json.Marshal(src)
		os.WriteFile(filepath.Join(dir, "source.json"), b, 0o644)
	}
	build := "exports_files([\"msg.txt\"])\n"
	module("greet", "1.0", `module(name = "greet", version = "1.0")`, map[string]string{"BUILD.bazel": build, "msg.txt": "greet 1.0\n"}, nil)
	module("greet", "1.1", `module(name = "greet", version = "1.1")`, map[string]string{"BUILD.bazel": build, "msg.txt": "greet 1.1\n"}, nil)
	module("words", "2.0", `module(name = "words", version = "2.0")
bazel_dep(name = "greet", version = "1.1")
`, map[string]string{"BUILD.bazel": build, "msg.txt": "words\n"}, map[string]string{"fix.patch": `--- a/msg.txt
+++ b/msg.txt
@@ -1 +1 @@
-words
+patched words
`})
	ws := newWorkspace(t)
	root := `module(name = "demo")
bazel_dep(name = "greet", version = "1.0")
bazel_dep(name = "words", version = "2.0")
`
	ws.write("MODULE.bazel", root)
	ws.write(".bazelrc", "common --registry=file://"+reg+"\n")
	ws.write("rg/BUILD.bazel", `genrule(name = "g", srcs = ["@greet//:msg.txt", "@words//:msg.txt"], outs = ["g.txt"], cmd = "cat $(SRCS) > $@")
`)
	ws.mustRbs("build", "//rg:g")
	if got := ws.read("rbs-bin/rg/g.txt"); got != "greet 1.1\npatched words\n" {
		t.Fatalf("g.txt holds %q: want greet 1.1, which words asks for, over the root's 1.0", got)
	}
	ws.write("MODULE.bazel", root+`single_version_override(module_name = "greet", version = "1.0")
`)
	ws.mustRbs("build", "//rg:g")
	if got := ws.read("rbs-bin/rg/g.txt"); got != "greet 1.0\npatched words\n" {
		t.Fatalf("after single_version_override, g.txt holds %q", got)
	}
	url, integrity := archive("greet-fork", map[string]string{"BUILD.bazel": build, "msg.txt": "greet from an archive\n"})
	ws.write("MODULE.bazel", root+fmt.Sprintf(`archive_override(module_name = "greet", urls = [%q], integrity = %q, strip_prefix = "greet-fork")
`, url, integrity))
	ws.mustRbs("build", "//rg:g")
	if got := ws.read("rbs-bin/rg/g.txt"); got != "greet from an archive\npatched words\n" {
		t.Fatalf("after archive_override, g.txt holds %q", got)
	}
	ws.write("MODULE.bazel", root+`bazel_dep(name = "absent", version = "9.9")
`)
	out, err := ws.rbs("", "build", "//rg:g")
	if err == nil || !strings.Contains(out, "bazel_dep absent 9.9: no registry has absent 9.9") {
		t.Fatalf("a module no registry has: %v\n%s", err, out)
	}
}
