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
	bin := "rbs-out/bin/pkg/"
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
