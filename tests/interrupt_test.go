package tests

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SIGINT and SIGTERM stop Starlark that would run for ever, wherever it
// runs: a BUILD file's loop in rbs build, a rule implementation's in
// analysis, a job target's BUILD file in rbs job submit. The command
// says where it was stopped and exits as a shell reports a process the
// signal ended, 128 + its number. Each is signalled once its print() line
// shows the loop has begun.
func TestInterruptStarlark(t *testing.T) {
	w := newWorkspace(t)
	w.write("loop/BUILD", "print(\"looping\")\nx = 0\nwhile True:\n    x += 1\n")
	w.write("rl/defs.bzl", "def _impl(ctx):\n    print(\"looping\")\n    for i in range(1000000000):\n        pass\n    return []\n\nr = rule(implementation = _impl)\n")
	w.write("rl/BUILD", "load(\":defs.bzl\", \"r\")\nr(name = \"r\")\n")
	w.write("jb/BUILD", "print(\"looping\")\nx = 0\nwhile True:\n    x += 1\n")
	for _, c := range []struct {
		args   []string
		signal syscall.Signal
		where  string
	}{
		{[]string{"build", "//loop:all"}, syscall.SIGTERM, "loop/BUILD"},
		{[]string{"build", "//rl:r"}, syscall.SIGINT, "in _impl"},
		{[]string{"job", "submit", "//jb:t"}, syscall.SIGTERM, "jb/BUILD"},
	} {
		cmd := exec.Command(rbsBin, c.args...)
		cmd.Dir = w.dir
		cmd.Env = append(cmd.Environ(), "XDG_CACHE_HOME="+w.cache, "RBS_REMOTE=127.0.0.1:1")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "looping") {
				break
			}
		}
		if err := cmd.Process.Signal(c.signal); err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() {
			for sc.Scan() {
				out.WriteString(sc.Text() + "\n")
			}
			ended <- cmd.Wait()
		}()
		select {
		case err = <-ended:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("rbs %s still ran 2 minutes after %v:\n%s", strings.Join(c.args, " "), c.signal, out.String())
		}
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 128+int(c.signal) {
			t.Errorf("rbs %s after %v: %v, want exit status %d", strings.Join(c.args, " "), c.signal, err, 128+int(c.signal))
		}
		if want := "Starlark computation cancelled: interrupted by " + map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[c.signal]; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), c.where) {
			t.Errorf("rbs %s after %v said:\n%s\nwant %q and %q", strings.Join(c.args, " "), c.signal, out.String(), want, c.where)
		}
	}
}

// Starlark that runs without bound stops at a limit, with an error naming
// the file and line it reached and the flag that raises the limit: a loop
// (steps), a recursion (depth), an allocation (the heap). rbs job submit
// of such a target fails the same way, as a command, not a crash.
func TestStarlarkLimits(t *testing.T) {
	w := newWorkspace(t)
	w.write("loop/BUILD", "x = 0\nwhile True:\n    x += 1\n")
	w.write("rec/BUILD", "def f(n):\n    return f(n + 1)\n\nf(0)\n")
	w.write("mem/BUILD", "l = []\nfor i in range(100000000):\n    l.append(\"x\" * 100000)\n")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"build", "--starlark_max_steps=100000", "//loop:all"}, []string{"loop/BUILD:3:", "more than 100000 steps", "--starlark_max_steps"}},
		{[]string{"build", "//rec:all"}, []string{"rec/BUILD:2:", "calls more", "calls nested more than 5000 deep", "--starlark_max_depth"}},
		{[]string{"build", "--starlark_max_memory=300MiB", "//mem:all"}, []string{"mem/BUILD:", "the heap grew past 300 MiB", "--starlark_max_memory"}},
		{[]string{"job", "submit", "--starlark_max_depth=100", "//rec:t"}, []string{"rec/BUILD:2:", "calls nested more than 100 deep"}},
	} {
		out, err := w.rbsEnv([]string{"RBS_REMOTE=127.0.0.1:1"}, c.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("rbs %s: %v, want exit status 1\n%s", strings.Join(c.args, " "), err, out)
		}
		for _, want := range c.want {
			if !strings.Contains(out, want) {
				t.Errorf("rbs %s: no %q in:\n%s", strings.Join(c.args, " "), want, out)
			}
		}
	}
}
