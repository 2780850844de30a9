package rules

import (
	"slices"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/starlark/label"
)

// TestArgs builds command lines and param files with ctx.actions.args()
// and compares them with what Bazel 4.2.3 makes of the same calls (its
// aquery and the param files it wrote), the output root aside: Bazel's
// bazel-out/k8-fastbuild/bin is rbs's rbs-out/k8-fastbuild/bin.
func TestArgs(t *testing.T) {
	for _, c := range []struct {
		name string
		impl string // the body of the rule's implementation; out is declared
		// argv is the command line after the executable of the action
		// making out; files are the contents of generated files.
		argv  []string
		files map[string]string
	}{
		{
			name: "add, add_all and add_joined with their options",
			impl: `
    f1 = ctx.actions.declare_file("f1.txt")
    ctx.actions.write(f1, "x")
    args = ctx.actions.args()
    args.add("plain")
    args.add("--flag", "v")
    args.add("--fmt", "v", format = "<%s>")
    args.add(f1)
    args.add_all([])
    args.add_all("--empty", [])
    args.add_all("--empty2", [], omit_if_empty = False)
    args.add_all("--list", ["x", "y"], before_each = "-b", format_each = "[%s]")
    args.add_all(depset(["a", "b", "a2"]), map_each = _upper)
    args.add_all(["p", "q", "p"], uniquify = True)
    args.add_all(["n1", "n2"], map_each = _none_or_list)
    args.add_all("--term", ["t"], terminate_with = "--end")
    args.add_joined("--joined", ["j1", "j2"], join_with = ",")
    args.add_joined("--jempty", [], join_with = ",")
    args.add_joined("--jempty2", [], join_with = ",", omit_if_empty = False)
    args.add_joined("--jf", ["a", "b"], join_with = ":", format_each = "(%s)", format_joined = "{%s}")
    args.add_all([f1])
    args.add_all([1, True, ctx.label])
    ctx.actions.run(outputs = [out], inputs = [f1], executable = "/bin/true", arguments = [args])
`,
			argv: []string{"plain", "--flag", "v", "--fmt", "<v>", "rbs-out/k8-fastbuild/bin/f1.txt", "--empty2", "--list", "-b", "[x]", "-b", "[y]",
				"A", "B", "A2", "p", "q", "n2a", "n2b", "--term", "t", "--end", "--joined", "j1,j2", "--jempty2", "", "--jf", "{(a):(b)}",
				"rbs-out/k8-fastbuild/bin/f1.txt", "1", "true", "//:s"},
		},
		{
			name: "a param file always, in the shell format, named after the first output",
			impl: `
    pa = ctx.actions.args()
    pa.add_all(["p1", "p 2", "p'3"])
    pa.use_param_file("@%s", use_always = True)
    pa.set_param_file_format("shell")
    ctx.actions.run(outputs = [out], executable = "/bin/true", arguments = ["first", pa])
`,
			argv:  []string{"first", "@rbs-out/k8-fastbuild/bin/s.out-0.params"},
			files: map[string]string{"rbs-out/k8-fastbuild/bin/s.out-0.params": "p1\n'p 2'\n'p'\\''3'\n"},
		},
		{
			name: "a param file only for a long command line",
			impl: `
    short = ctx.actions.args()
    short.add("x")
    short.use_param_file("--flagfile=%s")
    long = ctx.actions.args()
    long.add_all(["y" * 1000] * 40)
    long.use_param_file("--flagfile=%s")
    long.set_param_file_format("multiline")
    ctx.actions.run(outputs = [out], executable = "/bin/true", arguments = [short, long])
`,
			argv:  []string{"--flagfile=rbs-out/k8-fastbuild/bin/s.out-0.params", "--flagfile=rbs-out/k8-fastbuild/bin/s.out-1.params"},
			files: map[string]string{"rbs-out/k8-fastbuild/bin/s.out-0.params": "x\n", "rbs-out/k8-fastbuild/bin/s.out-1.params": strings.Repeat(strings.Repeat("y", 1000)+"\n", 40)},
		},
		{
			name: "a short command line keeps its args",
			impl: `
    a = ctx.actions.args()
    a.add("x")
    a.use_param_file("--flagfile=%s")
    ctx.actions.run(outputs = [out], executable = "/bin/true", arguments = [a])
`,
			argv: []string{"x"},
		},
		{
			name: "ctx.actions.write of Args in each format",
			impl: `
    for fmt in [None, "shell", "multiline", "flag_per_line"]:
        a = ctx.actions.args()
        a.add_all(["--a", "1", "--b", "x y", "--c", "--d=e", "plain", "p'q"])
        if fmt:
            a.set_param_file_format(fmt)
        ctx.actions.write(ctx.actions.declare_file("w-%s.txt" % fmt), a)
    ctx.actions.write(out, "")
`,
			files: map[string]string{
				"rbs-out/k8-fastbuild/bin/w-None.txt":          "--a\n1\n--b\n'x y'\n--c\n'--d=e'\nplain\n'p'\\''q'\n",
				"rbs-out/k8-fastbuild/bin/w-shell.txt":         "--a\n1\n--b\n'x y'\n--c\n'--d=e'\nplain\n'p'\\''q'\n",
				"rbs-out/k8-fastbuild/bin/w-multiline.txt":     "--a\n1\n--b\nx y\n--c\n--d=e\nplain\np'q\n",
				"rbs-out/k8-fastbuild/bin/w-flag_per_line.txt": "--a=1 --b x y --c --d=e plain p'q\n",
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, "MODULE.bazel", "")
			write(t, dir, "defs.bzl", `def _impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name + ".out")
`+c.impl+`
    return [DefaultInfo(files = depset([out]))]

def _upper(s):
    return s.upper()

def _none_or_list(s):
    if s == "n1":
        return None
    return [s + "a", s + "b"]

show = rule(implementation = _impl)
`)
			write(t, dir, "BUILD", "load(\":defs.bzl\", \"show\")\nshow(name = \"s\")\n")
			ws, err := Open(dir, Config{})
			if err != nil {
				t.Fatal(err)
			}
			an, err := ws.Analyze([]label.Label{{Name: "s"}})
			if err != nil {
				t.Fatal(err)
			}
			if c.argv != nil {
				act := an.Producer["rbs-out/k8-fastbuild/bin/s.out"]
				if act == nil || len(act.Args) == 0 {
					t.Fatalf("no action makes s.out")
				}
				if got := act.Args[1:]; !slices.Equal(got, c.argv) {
					t.Fatalf("command line\n%q\nwant\n%q", got, c.argv)
				}
			}
			for p, want := range c.files {
				act := an.Producer[p]
				if act == nil || !act.Write {
					t.Fatalf("no action writes %s", p)
				}
				if act.Content != want {
					t.Fatalf("%s holds\n%q\nwant\n%q", p, act.Content, want)
				}
				if s := an.Producer["rbs-out/k8-fastbuild/bin/s.out"]; strings.HasSuffix(p, ".params") && !slices.Contains(s.Inputs, act.Outputs[0]) {
					t.Fatalf("the param file %s is not an input of the action", p)
				}
			}
		})
	}
}
