package tests

import (
	"strings"
	"testing"
)

// TestToolchains builds a rule that asks for a toolchain type through the
// real CLI: resolution follows the target platform, --extra_toolchains
// and MODULE.bazel (whose edit makes the build run again), and the shell
// toolchain gives the bash a script runs with.
func TestToolchains(t *testing.T) {
	w := newWorkspace(t)
	w.write("MODULE.bazel", `module(name = "tc_demo")
register_toolchains("//tc:all")
`)
	w.write("tc/defs.bzl", `
def _greeter_impl(ctx):
    return [platform_common.ToolchainInfo(greeting = ctx.attr.greeting)]

greeter = rule(implementation = _greeter_impl, attrs = {"greeting": attr.string()})

def _greet_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.write(out, ctx.toolchains["//tc:greeter_type"].greeting + "\n")
    script = ctx.actions.declare_file(ctx.label.name + ".sh")
    sh = ctx.toolchains["@bazel_tools//tools/sh:toolchain_type"].path
    ctx.actions.write(script, "#!%s\necho ran by $BASH_VERSION\n" % sh, is_executable = True)
    return [DefaultInfo(files = depset([out]), executable = script)]

greet = rule(
    implementation = _greet_impl,
    executable = True,
    toolchains = ["//tc:greeter_type", "@bazel_tools//tools/sh:toolchain_type"],
)
`)
	w.write("tc/BUILD", `load(":defs.bzl", "greet", "greeter")
toolchain_type(name = "greeter_type")
greeter(name = "mac_greeter", greeting = "hello from macOS")
greeter(name = "linux_greeter", greeting = "hello from Linux")
greeter(name = "special_greeter", greeting = "hello, special")
toolchain(name = "mac", toolchain = ":mac_greeter", toolchain_type = ":greeter_type", target_compatible_with = ["@platforms//os:macos"])
toolchain(name = "linux", toolchain = ":linux_greeter", toolchain_type = ":greeter_type", target_compatible_with = ["@platforms//os:linux"])
toolchain(name = "special", toolchain = ":special_greeter", toolchain_type = ":greeter_type", tags = ["manual"])
greet(name = "hi")
`)
	for _, c := range []struct {
		args []string
		out  string
		want string
	}{
		{[]string{"build", "--platform=linux-x86_64", "//tc:hi"}, "rbs-bin/tc/hi.txt", "hello from Linux\n"},
		{[]string{"build", "--platform=darwin-arm64", "//tc:hi"}, "rbs-bin/tc/hi.txt", "hello from macOS\n"},
		{[]string{"build", "--platform=linux-x86_64", "--extra_toolchains=//tc:special", "//tc:hi"}, "rbs-bin/tc/hi.txt", "hello, special\n"},
	} {
		w.mustRbs(c.args...)
		if got := w.read(c.out); got != c.want {
			t.Errorf("rbs %s: %s holds %q, want %q", strings.Join(c.args, " "), c.out, got, c.want)
		}
	}
	w.mustRbs("build", "--platform=linux-x86_64", "//tc:hi")
	if got := w.read("rbs-bin/tc/hi.txt"); got != "hello from Linux\n" {
		t.Errorf("without --extra_toolchains again: %q", got)
	}
	// The registration is part of what the build read: editing it makes
	// the same command build again.
	w.write("MODULE.bazel", `module(name = "tc_demo")
register_toolchains("//tc:special", "//tc:all")
`)
	w.mustRbs("build", "--platform=linux-x86_64", "//tc:hi")
	if got := w.read("rbs-bin/tc/hi.txt"); got != "hello, special\n" {
		t.Errorf("after MODULE.bazel registered //tc:special first: %q", got)
	}
	out := w.mustRbs("run", "--platform=linux-x86_64", "//tc:hi")
	if !strings.Contains(out, "ran by ") || strings.Contains(out, "ran by \n") {
		t.Errorf("the script with the shell toolchain's bash did not run under bash:\n%s", out)
	}

	out, err := w.rbs("", "build", "--extra_toolchains=tc:special", "//tc:hi")
	if err == nil || !strings.Contains(out, `--extra_toolchains "tc:special": want an absolute label or pattern`) {
		t.Errorf("a relative --extra_toolchains: %v\n%s", err, out)
	}
	w.write("MODULE.bazel", `module(name = "tc_demo")
`)
	out, err = w.rbs("", "build", "--platform=linux-x86_64", "//tc:hi")
	if err == nil || !strings.Contains(out, "while resolving toolchains for target //tc:hi: no matching toolchains found for types //tc:greeter_type") {
		t.Errorf("with no toolchain registered: %v\n%s", err, out)
	}
}
