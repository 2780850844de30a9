package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// @bazel_skylib's rules through the real CLI: write_file, copy_file and
// expand_template build files with the content and executable bit asked
// for, a rule of the workspace's own calls ctx.actions.expand_template, and
// a string_flag flipped by --//pkg:flag=value (and a config_setting_group
// ORing it with a --define) picks the substitutions.
func TestSkylibRules(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("MODULE.bazel", `module(name = "demo")
bazel_dep(name = "bazel_skylib", version = "1.7.1")
`)
	ws.write("pkg/defs.bzl", `def _impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".sh")
    ctx.actions.expand_template(
        template = ctx.file.template,
        output = out,
        substitutions = ctx.attr.substitutions,
        is_executable = True,
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

executable_template = rule(
    implementation = _impl,
    executable = True,
    attrs = {
        "template": attr.label(allow_single_file = True, mandatory = True),
        "substitutions": attr.string_dict(),
    },
)
`)
	ws.write("pkg/BUILD.bazel", `load("@bazel_skylib//lib:selects.bzl", "selects")
load("@bazel_skylib//rules:common_settings.bzl", "string_flag")
load("@bazel_skylib//rules:copy_file.bzl", "copy_file")
load("@bazel_skylib//rules:expand_template.bzl", "expand_template")
load("@bazel_skylib//rules:write_file.bzl", "write_file")
load(":defs.bzl", "executable_template")

string_flag(name = "greeting", build_setting_default = "hello", values = ["hello", "bonjour"])
config_setting(name = "bonjour", flag_values = {":greeting": "bonjour"})
config_setting(name = "prod", define_values = {"mode": "prod"})
selects.config_setting_group(name = "fancy", match_any = [":bonjour", ":prod"])

write_file(name = "tmpl", out = "greeting.tmpl", content = ["{GREETING}, {WHO}!", "mode: {MODE}", ""])
expand_template(
    name = "greet",
    template = ":tmpl",
    out = "greeting.txt",
    substitutions = {"{WHO}": "world"} | select({
        ":bonjour": {"{GREETING}": "Bonjour"},
        "//conditions:default": {"{GREETING}": "Hello"},
    }) | select({
        ":fancy": {"{MODE}": "fancy"},
        "//conditions:default": {"{MODE}": "plain"},
    }),
)
copy_file(name = "copy", src = ":greet", out = "copy/greeting.txt")
copy_file(name = "say_copy", src = "say.sh", out = "say_copy.sh", is_executable = True)
write_file(name = "gen", out = "gen.sh", content = ["#!/bin/sh", "echo generated script"], is_executable = True)
executable_template(
    name = "hello",
    template = "hello.sh.in",
    substitutions = selects.with_or({
        (":bonjour", ":prod"): {"@WORD@": "salut"},
        "//conditions:default": {"@WORD@": "hi"},
    }),
)
`)
	ws.write("pkg/say.sh", "#!/bin/sh\necho say\n")
	ws.write("pkg/hello.sh.in", "#!/bin/sh\necho @WORD@ from the template\n")
	for _, f := range []string{"pkg/say.sh", "pkg/hello.sh.in"} {
		if err := os.Chmod(filepath.Join(ws.dir, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := "rbs-bin/pkg/"
	check := func(name, want string, executable bool) {
		t.Helper()
		if got := ws.read(bin + name); got != want {
			t.Errorf("%s is %q, want %q", name, got, want)
		}
		info, err := os.Stat(filepath.Join(ws.dir, bin+name))
		if err != nil {
			t.Fatal(err)
		}
		if got := info.Mode()&0o111 != 0; got != executable {
			t.Errorf("%s: executable %v (mode %v), want %v", name, got, info.Mode(), executable)
		}
	}

	ws.mustRbs("build", "//pkg:all")
	check("greeting.tmpl", "{GREETING}, {WHO}!\nmode: {MODE}\n", false)
	check("greeting.txt", "Hello, world!\nmode: plain\n", false)
	check("copy/greeting.txt", "Hello, world!\nmode: plain\n", false)
	check("say_copy.sh", "#!/bin/sh\necho say\n", true)
	check("gen.sh", "#!/bin/sh\necho generated script", true)
	check("hello.sh", "#!/bin/sh\necho hi from the template\n", true)
	if out := ws.mustRbs("run", "//pkg:hello"); !strings.Contains(out, "hi from the template") {
		t.Errorf("rbs run //pkg:hello printed:\n%s", out)
	}
	if out := ws.mustRbs("run", "//pkg:gen"); !strings.Contains(out, "generated script") {
		t.Errorf("rbs run //pkg:gen printed:\n%s", out)
	}

	// The flag, set on the command line, flips the select()s.
	ws.mustRbs("build", "--//pkg:greeting=bonjour", "//pkg:all")
	check("greeting.txt", "Bonjour, world!\nmode: fancy\n", false)
	check("copy/greeting.txt", "Bonjour, world!\nmode: fancy\n", false)
	check("hello.sh", "#!/bin/sh\necho salut from the template\n", true)

	// The other member of the group, with the flag back at its default.
	ws.mustRbs("build", "--define", "mode=prod", "//pkg:greet", "//pkg:hello")
	check("greeting.txt", "Hello, world!\nmode: fancy\n", false)
	check("hello.sh", "#!/bin/sh\necho salut from the template\n", true)

	// The template is an input, read when the action runs.
	ws.write("pkg/hello.sh.in", "#!/bin/sh\necho @WORD@ from the new template\n")
	ws.mustRbs("build", "//pkg:hello")
	check("hello.sh", "#!/bin/sh\necho hi from the new template\n", true)

	// A value outside the flag's values fails, naming the flag, even
	// though only a select() reads it.
	out, err := ws.rbs("", "build", "--//pkg:greeting=hola", "//pkg:greet")
	if err == nil || !strings.Contains(out, "Error setting //pkg:greeting: invalid value 'hola'. Allowed values are [\"hello\", \"bonjour\"]") {
		t.Fatalf("--//pkg:greeting=hola: %v\n%s", err, out)
	}
}

// A rule repository tests itself with @bazel_skylib//lib:unittest.bzl
// through rbs test: unit tests of Starlark code, analysis tests of a
// rule's providers and actions (in a configuration of their own, through
// config_settings), a failure test, loading tests, and test suites. A
// failing assertion fails its test with skylib's message.
func TestSkylibUnittest(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("MODULE.bazel", `module(name = "demo")
bazel_dep(name = "bazel_skylib", version = "1.7.1")
`)
	ws.write("greet/defs.bzl", `GreetingInfo = provider(fields = ["text"])

def _greeting_impl(ctx):
    if ctx.attr.who == "nobody":
        fail("nobody to greet")
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    text = "%s, %s (%s)" % (ctx.attr.salutation, ctx.attr.who, ctx.var["COMPILATION_MODE"])
    ctx.actions.write(out, text)
    ctx.actions.run_shell(outputs = [ctx.actions.declare_file(ctx.label.name + ".len")], command = "echo ok > $1", arguments = [ctx.label.name], mnemonic = "Measure")
    return [GreetingInfo(text = text), DefaultInfo(files = depset([out]))]

greeting = rule(implementation = _greeting_impl, attrs = {"who": attr.string(), "salutation": attr.string(default = "hello")})

def shout(s):
    return s.upper() + "!"
`)
	ws.write("greet/tests.bzl", `load("@bazel_skylib//lib:unittest.bzl", "analysistest", "asserts", "loadingtest", "unittest")
load("@bazel_skylib//lib:new_sets.bzl", "sets")
load(":defs.bzl", "GreetingInfo", "greeting", "shout")

def _shout_test_impl(ctx):
    env = unittest.begin(ctx)
    asserts.equals(env, "HI!", shout("hi"))
    asserts.true(env, shout("") == "!")
    asserts.set_equals(env, sets.make([1, 2]), sets.make([2, 1]))
    return unittest.end(env)

shout_test = unittest.make(_shout_test_impl)

def _wrong_test_impl(ctx):
    env = unittest.begin(ctx)
    asserts.equals(env, "HI", shout("hi"), "shouting adds a mark")
    return unittest.end(env)

wrong_test = unittest.make(_wrong_test_impl)

def _provider_test_impl(ctx):
    env = analysistest.begin(ctx)
    target = analysistest.target_under_test(env)
    asserts.equals(env, "hello, world (fastbuild)", target[GreetingInfo].text)
    mnemonics = [a.mnemonic for a in analysistest.target_actions(env)]
    asserts.equals(env, ["FileWrite", "Measure"], mnemonics)
    return analysistest.end(env)

provider_test = analysistest.make(_provider_test_impl)

def _opt_test_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.equals(env, "hello, world (opt)", analysistest.target_under_test(env)[GreetingInfo].text)
    asserts.true(env, "-opt-" in analysistest.target_bin_dir_path(env))
    return analysistest.end(env)

opt_test = analysistest.make(_opt_test_impl, config_settings = {"//command_line_option:compilation_mode": "opt"})

def _fails_test_impl(ctx):
    env = analysistest.begin(ctx)
    asserts.expect_failure(env, "nobody to greet")
    return analysistest.end(env)

fails_test = analysistest.make(_fails_test_impl, expect_failure = True)

def greet_test_suite(name):
    greeting(name = "world", who = "world", tags = ["manual"])
    greeting(name = "nobody", who = "nobody", tags = ["manual"])
    provider_test(name = "provider_test", target_under_test = ":world")
    opt_test(name = "opt_test", target_under_test = ":world")
    fails_test(name = "fails_test", target_under_test = ":nobody")
    unittest.suite(name + "_units", shout_test)
    native.test_suite(name = name, tests = [":provider_test", ":opt_test", ":fails_test", ":" + name + "_units"])
    env = loadingtest.make("loading")
    loadingtest.equals(env, "pkg", "greet", native.package_name())
`)
	ws.write("greet/BUILD", `load(":tests.bzl", "greet_test_suite", "wrong_test")
greet_test_suite(name = "greet_tests")
wrong_test(name = "wrong_test", tags = ["manual"])
`)
	out := ws.mustRbs("test", "//greet:greet_tests", "//greet:loading_tests")
	if !strings.Contains(out, "5 tests: 5 passed") {
		t.Fatalf("rbs test of the suites:\n%s", out)
	}
	out, err := ws.rbs("", "test", "//greet:wrong_test")
	if err == nil || !strings.Contains(out, "1 failed") {
		t.Fatalf("a failing assertion passed:\n%s", out)
	}
	want := `In test _wrong_test_impl: shouting adds a mark (Expected "HI", but got "HI!")`
	if log := ws.read("rbs-out/testlogs/greet/wrong_test/test.log"); !strings.Contains(log, want) {
		t.Fatalf("the failing test's log, want %q:\n%s", want, log)
	}
}
