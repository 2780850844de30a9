package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rules"
)

// Tools with runfiles, as Bazel's rule examples write them: an action
// runs a tool built for the execution platform with its runfiles tree
// beside it (TOOL.runfiles/, a root symlink too); a tool that merges
// another tool's default_runfiles finds it there, as an executable is in
// its own runfiles; and a test whose script the rule wrote without
// is_executable runs, as Bazel makes outputs executable.
func TestToolRunfiles(t *testing.T) {
	requireTool(t, "bash")
	ws := newWorkspace(t)
	ws.write("rftools/defs.bzl", `RLOCATION = """`+bazelRunfilesInit+`"""

def _tool_impl(ctx):
    data = ctx.files._data[0]
    ctx.actions.write(
        output = ctx.outputs.executable,
        content = "#!/bin/bash\ncat $0.runfiles/%s/%s $0.runfiles/data_dep > $1\n" % (ctx.workspace_name, data.short_path),
    )
    return [DefaultInfo(runfiles = ctx.runfiles(files = [data], root_symlinks = {"data_dep": data}))]

tool = rule(implementation = _tool_impl, executable = True, attrs = {"_data": attr.label(allow_files = True, default = ":data.txt")})

def _sub_impl(ctx):
    ctx.actions.write(output = ctx.outputs.executable, content = RLOCATION + "cat $(rlocation _main/rftools/data.txt) > $1\n", is_executable = True)
    return [DefaultInfo(runfiles = ctx.runfiles(files = ctx.files._data))]

sub_tool = rule(implementation = _sub_impl, executable = True, attrs = {"_data": attr.label(allow_files = True, default = ":data.txt")})

def _complex_impl(ctx):
    rf = ctx.runfiles(files = ctx.files._more)
    rf = rf.merge(ctx.attr._sub[DefaultInfo].default_runfiles).merge(ctx.attr._lib[DefaultInfo].default_runfiles)
    sub = ctx.workspace_name + "/" + ctx.attr._sub[DefaultInfo].files_to_run.executable.short_path
    ctx.actions.write(
        output = ctx.outputs.executable,
        content = "#!/bin/bash\n" + RLOCATION + "$(rlocation %s) $1 && cat $(rlocation _main/rftools/more.txt) >> $1\n" % sub,
        is_executable = True,
    )
    return [DefaultInfo(runfiles = rf)]

complex_tool = rule(implementation = _complex_impl, executable = True, attrs = {
    "_sub": attr.label(default = ":sub"),
    "_more": attr.label(allow_files = True, default = ":more.txt"),
    "_lib": attr.label(default = "@bazel_tools//tools/bash/runfiles"),
})

def _user_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".out")
    ctx.actions.run(outputs = [out], executable = ctx.executable.tool, arguments = [out.path])
    return [DefaultInfo(files = depset([out]))]

tool_user = rule(implementation = _user_impl, attrs = {"tool": attr.label(mandatory = True, executable = True, cfg = "exec")})

def _resolved_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".out")
    inputs, manifests = ctx.resolve_tools(tools = [ctx.attr.tool])
    ctx.actions.run_shell(outputs = [out], inputs = depset([ctx.info_file], transitive = [inputs]), input_manifests = manifests, command = "%s %s && cat %s >> %s" % (ctx.executable.tool.path, out.path, ctx.info_file.path, out.path))
    return [DefaultInfo(files = depset([out]))]

resolved_user = rule(implementation = _resolved_impl, attrs = {"tool": attr.label(mandatory = True, executable = True, cfg = "exec")})

def _check_impl(ctx):
    ctx.actions.write(output = ctx.outputs.executable, content = "grep -q data " + ctx.file.src.short_path + "\n")
    return [DefaultInfo(runfiles = ctx.runfiles(files = [ctx.file.src]))]

check_test = rule(implementation = _check_impl, test = True, attrs = {"src": attr.label(allow_single_file = True)})
`)
	ws.write("rftools/BUILD", `load(":defs.bzl", "check_test", "complex_tool", "resolved_user", "sub_tool", "tool", "tool_user")
resolved_user(name = "resolved", tool = ":tool")
tool(name = "tool")
tool_user(name = "simple", tool = ":tool")
sub_tool(name = "sub")
complex_tool(name = "complex")
tool_user(name = "nested", tool = ":complex")
check_test(name = "check", src = "data.txt")
`)
	ws.write("rftools/data.txt", "data\n")
	ws.write("rftools/more.txt", "more\n")
	ws.mustRbs("build", "//rftools:simple", "//rftools:nested")
	if got := ws.read("rbs-bin/rftools/simple.out"); got != "data\ndata\n" {
		t.Errorf("the tool with runfiles wrote %q, want its data through the tree and the root symlink", got)
	}
	if got := ws.read("rbs-bin/rftools/nested.out"); got != "data\nmore\n" {
		t.Errorf("the tool of a tool wrote %q", got)
	}
	// ctx.resolve_tools gives the tree as an input manifest, and
	// ctx.info_file is the stable workspace status.
	ws.mustRbs("build", "//rftools:resolved")
	host, _ := os.Hostname()
	if got := ws.read("rbs-bin/rftools/resolved.out"); !strings.HasPrefix(got, "data\ndata\nBUILD_EMBED_LABEL \nBUILD_HOST "+host+"\nBUILD_USER ") {
		t.Errorf("the tool run through resolve_tools, and the stable status, wrote %q", got)
	}
	// As with Bazel's runfiles links, a program built runs from rbs-bin.
	ws.mustRbs("build", "//rftools:complex")
	out := filepath.Join(t.TempDir(), "direct.out")
	if b, err := exec.Command(filepath.Join(ws.dir, "rbs-bin/rftools/complex"), out).CombinedOutput(); err != nil {
		t.Errorf("rbs-bin/rftools/complex after rbs build: %v\n%s", err, b)
	} else if got, _ := os.ReadFile(out); string(got) != "data\nmore\n" {
		t.Errorf("rbs-bin/rftools/complex after rbs build wrote %q", got)
	}
	if out := ws.mustRbs("test", "//rftools:check"); !strings.Contains(out, "1 test: 1 passed") {
		t.Errorf("the test written without is_executable:\n%s", out)
	}
}

// genrule's make variables as Bazel's make-variables example shows them:
// a toolchains target's TemplateVariableInfo (a rule's, and
// @bazel_tools//tools/cpp:current_cc_toolchain's $(CC)), $(execpath) of
// the genrule's own outputs, and the predefined ones, under the output
// directory Bazel names.
func TestGenruleMakeVariables(t *testing.T) {
	ws := newWorkspace(t)
	ws.write("mv/defs.bzl", `def _impl(ctx):
    return [platform_common.TemplateVariableInfo({"FOO": ctx.attr.value})]

var_providing_rule = rule(implementation = _impl, attrs = {"value": attr.string()})
`)
	ws.write("mv/BUILD", `load(":defs.bzl", "var_providing_rule")
var_providing_rule(name = "set_foo", value = "bar")
genrule(
    name = "vars",
    outs = ["sub/a.out", "sub/b.out"],
    cmd = "echo FOO=$(FOO) RULEDIR=$(RULEDIR) CPU=$(TARGET_CPU) MODE=$(COMPILATION_MODE) > $(execpath sub/a.out); echo $(location sub/b.out) > $(execpath sub/b.out)",
    toolchains = [":set_foo"],
)
genrule(
    name = "cc",
    outs = ["cc.txt"],
    cmd = "echo $(CC) > $@",
    toolchains = ["@bazel_tools//tools/cpp:current_cc_toolchain"],
)
`)
	ws.mustRbs("build", "-c", "opt", "//mv:vars")
	bin := rules.BinDir(platform.Host(), "opt")
	cpu := strings.TrimSuffix(strings.TrimPrefix(bin, "rbs-out/"), "-opt/bin")
	if got, want := ws.read("rbs-bin/mv/sub/a.out"), "FOO=bar RULEDIR="+bin+"/mv CPU="+cpu+" MODE=opt\n"; got != want {
		t.Errorf("make variables: %q, want %q", got, want)
	}
	if got, want := ws.read("rbs-bin/mv/sub/b.out"), bin+"/mv/sub/b.out\n"; got != want {
		t.Errorf("$(location) of its own output: %q, want %q", got, want)
	}
	// @bazel_tools//tools/cpp:current_cc_toolchain gives the chosen C
	// compiler as $(CC).
	ws.mustRbs("build", "-c", "opt", "//mv:cc")
	if got := strings.TrimSpace(ws.read("rbs-bin/mv/cc.txt")); got == "" || strings.Contains(got, "$") {
		t.Errorf("$(CC) from current_cc_toolchain: %q", got)
	}
}

// --platforms, from a workspace's .bazelrc as real workspaces set it:
// the platform target's constraint values choose select() branches, and
// the command line's --platforms wins over the rc file's.
func TestPlatformsFlag(t *testing.T) {
	ws := newWorkspace(t)
	ws.write(".bazelrc", "build --platforms=//plat:gpu_box\n")
	ws.write("plat/BUILD", `constraint_setting(name = "gpu", default_constraint_value = ":no_gpu")
constraint_value(name = "has_gpu", constraint_setting = ":gpu")
constraint_value(name = "no_gpu", constraint_setting = ":gpu")
platform(name = "gpu_box", constraint_values = [":has_gpu", "@platforms//os:linux"])
platform(name = "plain_box", constraint_values = ["@platforms//os:linux"])
genrule(
    name = "which",
    outs = ["which.txt"],
    cmd = "echo " + select({":has_gpu": "gpu", "//conditions:default": "no gpu"}) + " > $@",
)
`)
	out := ws.mustRbs("build", "//plat:which")
	if strings.Contains(out, "WARNING") {
		t.Errorf("--platforms in .bazelrc warned:\n%s", out)
	}
	if got := ws.read("rbs-bin/plat/which.txt"); got != "gpu\n" {
		t.Errorf("with the rc file's --platforms: %q", got)
	}
	ws.mustRbs("build", "--platforms=//plat:plain_box", "//plat:which")
	if got := ws.read("rbs-bin/plat/which.txt"); got != "no gpu\n" {
		t.Errorf("with --platforms=//plat:plain_box: %q", got)
	}
	if out, err := ws.rbs("", "build", "--platforms=//plat:which", "//plat:which"); err == nil || !strings.Contains(out, "--platforms //plat:which: //plat:which is a genrule, not a platform") {
		t.Errorf("--platforms of a genrule: %v\n%s", err, out)
	}
}

// Java as Bazel's java-tutorial and query-quickstart build it: a library
// and a binary (its main class found from its source's path), resources
// on the class path, a main-only test, and the deploy jar, which runs on
// its own.
func TestJavaRules(t *testing.T) {
	requireTool(t, "javac")
	requireTool(t, "jar")
	ws := newWorkspace(t)
	ws.write("jv/BUILD", `load("@rules_java//java:defs.bzl", "java_binary", "java_library", "java_test")
java_library(name = "greeter", srcs = ["src/main/java/com/example/Greeting.java"], resources = ["src/main/resources/greeting.txt"])
java_binary(name = "ProjectRunner", srcs = ["src/main/java/com/example/ProjectRunner.java"], deps = [":greeter"])
java_test(name = "greeting_test", srcs = ["src/test/java/com/example/GreetingTest.java"], deps = [":greeter"], use_testrunner = False, main_class = "com.example.GreetingTest")
`)
	ws.write("jv/src/main/java/com/example/Greeting.java", `package com.example;

public class Greeting {
    public static String text() throws java.io.IOException {
        try (java.io.InputStream in = Greeting.class.getResourceAsStream("/greeting.txt")) {
            return new String(in.readAllBytes()).trim();
        }
    }
}
`)
	ws.write("jv/src/main/resources/greeting.txt", "Hi from a resource!\n")
	ws.write("jv/src/main/java/com/example/ProjectRunner.java", `package com.example;

public class ProjectRunner {
    public static void main(String[] args) throws Exception {
        System.out.println(Greeting.text() + " " + String.join(",", args));
    }
}
`)
	ws.write("jv/src/test/java/com/example/GreetingTest.java", `package com.example;

public class GreetingTest {
    public static void main(String[] args) throws Exception {
        if (!Greeting.text().startsWith("Hi")) {
            System.exit(1);
        }
    }
}
`)
	out := ws.mustRbs("build", "//jv:ProjectRunner")
	if !strings.Contains(out, "rbs-bin/jv/ProjectRunner.jar\n  rbs-bin/jv/ProjectRunner\n") {
		t.Errorf("the binary's outputs:\n%s", out)
	}
	if got := ws.mustRbs("run", "//jv:ProjectRunner", "--", "a", "b"); !strings.Contains(got, "Hi from a resource! a,b\n") {
		t.Errorf("rbs run //jv:ProjectRunner: %q", got)
	}
	ws.mustRbs("build", "//jv:ProjectRunner_deploy.jar")
	if b, err := exec.Command("java", "-jar", filepath.Join(ws.dir, "rbs-bin/jv/ProjectRunner_deploy.jar"), "c").CombinedOutput(); err != nil || string(b) != "Hi from a resource! c\n" {
		t.Errorf("java -jar the deploy jar: %v %q", err, b)
	}
	if got := ws.mustRbs("test", "//jv:greeting_test"); !strings.Contains(got, "1 test: 1 passed") {
		t.Errorf("rbs test //jv:greeting_test:\n%s", got)
	}
	ws.write("jv/src/main/resources/greeting.txt", "Bye\n")
	if out, err := ws.rbs("", "test", "//jv:greeting_test"); err == nil || !strings.Contains(out, "FAILED") {
		t.Errorf("the test after the resource changed: %v\n%s", err, out)
	}
}
