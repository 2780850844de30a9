package guard

import (
	"strings"
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// run evaluates src on a tracked thread, returning its error.
func run(src string) error {
	t := &starlark.Thread{Name: "test"}
	defer Track(t)()
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{While: true, Recursion: true, TopLevelControl: true, GlobalReassign: true}, t, "test.star", src, nil)
	return err
}

// Each limit stops the evaluation that passes it, with an error naming
// the flag that raises it; an evaluation within them is left alone.
func TestLimits(t *testing.T) {
	SetLimits(Limits{Steps: 1_000_000, Depth: 200, Heap: heap() + 256<<20, StepsFlag: "--steps", DepthFlag: "--depth", HeapFlag: "--heap"})
	defer SetLimits(DefaultLimits)
	for _, c := range []struct{ name, src, want string }{
		{"within the limits", "x = 0\nfor i in range(1000):\n    x += i\n", ""},
		{"a loop", "x = 0\nwhile True:\n    x += 1\n", "more than 1000000 steps: a loop that does not end? (raise the limit with --steps)"},
		{"a recursion", "def f(n):\n    return f(n + 1)\nf(0)\n", "calls nested more than 200 deep: a recursion that does not end? (raise the limit with --depth)"},
		{"an allocation", "l = []\nwhile True:\n    l.append(\"x\" * 100000)\n", "(raise the limit with --heap)"},
	} {
		err := run(c.src)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// A thread in a loop that never ends stops when Cancel is called, and one
// tracked after Cancel does not start its work. (It runs last: Cancel is
// for good.)
func TestZCancel(t *testing.T) {
	SetLimits(Limits{})
	done := make(chan error, 1)
	thread := &starlark.Thread{Name: "loop"}
	release := Track(thread)
	go func() {
		defer release()
		_, err := starlark.ExecFileOptions(&syntax.FileOptions{While: true}, thread, "loop.star", "def f():\n    while True:\n        pass\nf()\n", nil)
		done <- err
	}()
	Cancel("interrupted by SIGTERM")
	if err := <-done; err == nil || !strings.Contains(err.Error(), "interrupted by SIGTERM") {
		t.Fatalf("the loop ended with %v, want the cancel reason", err)
	}
	if err := run("x = 1\n"); err == nil || !strings.Contains(err.Error(), "interrupted by SIGTERM") {
		t.Fatalf("a thread tracked after Cancel ran: %v", err)
	}
}
