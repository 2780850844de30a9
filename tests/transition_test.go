package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTransitions builds, through the real CLI, a C program whose copts
// and compilation mode a transition sets, and a file made by a tool built
// in the execution configuration: each lands in the output directory of
// its configuration, and the program shows what its configuration gave it.
func TestTransitions(t *testing.T) {
	requireTool(t, "cc")
	w := newWorkspace(t)
	w.write("tr/defs.bzl", `
def _opt_impl(settings, attr):
    return {
        "//command_line_option:compilation_mode": "opt",
        "//command_line_option:copt": ['-DGREETING="from the transition"'],
    }

opt_greeting = transition(
    implementation = _opt_impl,
    inputs = [],
    outputs = ["//command_line_option:compilation_mode", "//command_line_option:copt"],
)

def _ship_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".txt")
    ctx.actions.run(
        outputs = [out],
        inputs = [ctx.executable.program],
        executable = ctx.executable._tool,
        arguments = [ctx.executable.program.path, out.path],
    )
    return [DefaultInfo(files = depset([out, ctx.executable.program]))]

ship = rule(implementation = _ship_impl, attrs = {
    "program": attr.label(cfg = opt_greeting, executable = True),
    "_tool": attr.label(cfg = "exec", executable = True, default = ":runner"),
    "_allowlist_function_transition": attr.label(default = "@bazel_tools//tools/allowlists/function_transition_allowlist"),
})
`)
	w.write("tr/BUILD", `load(":defs.bzl", "ship")
cc_binary(name = "hello", srcs = ["hello.c"])
sh_binary(name = "runner", srcs = ["runner.sh"])
ship(name = "shipped", program = ":hello")
`)
	w.write("tr/hello.c", `#include <stdio.h>
#ifndef GREETING
#define GREETING "plain"
#endif
int main(void) {
#ifdef NDEBUG
  puts(GREETING " (opt)");
#else
  puts(GREETING);
#endif
  return 0;
}
`)
	w.write("tr/runner.sh", "#!/bin/sh\n\"$1\" > \"$2\"\n")
	out := w.mustRbs("build", "//tr:shipped", "//tr:hello")
	if got := w.read("rbs-bin/tr/shipped.txt"); got != "from the transition (opt)\n" {
		t.Errorf("shipped.txt holds %q\n%s", got, out)
	}
	dirs, _ := filepath.Glob(filepath.Join(w.dir, "rbs-out", "*-opt-ST-*", "bin", "tr", "hello"))
	if len(dirs) != 1 {
		t.Errorf("want the transitioned hello in rbs-out/CPU-opt-ST-HASH/bin, found %v", dirs)
	}
	tools, _ := filepath.Glob(filepath.Join(w.dir, "rbs-out", "*-opt-exec-*", "bin", "tr", "runner"))
	if len(tools) != 1 {
		t.Errorf("want the tool in rbs-out/CPU-opt-exec-HASH/bin, found %v", tools)
	}
	// The same program built plainly is another file, with the default.
	plain := w.mustRbs("run", "//tr:hello")
	if !strings.Contains(plain, "plain\n") || strings.Contains(plain, "(opt)") {
		t.Errorf("rbs run //tr:hello: %q", plain)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "rbs-bin", "tr", "hello")); err != nil {
		t.Errorf("the untransitioned hello: %v", err)
	}
	// --copt on the command line reaches the build's own configuration.
	w.mustRbs("build", `--copt=-DGREETING="from the command line"`, "//tr:hello")
	if got := w.mustRbs("run", `--copt=-DGREETING="from the command line"`, "//tr:hello"); !strings.Contains(got, "from the command line\n") {
		t.Errorf("--copt: %q", got)
	}
}
