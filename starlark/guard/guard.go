// Package guard stops Starlark evaluations that must not go on: all of a
// process's at once when SIGINT or SIGTERM asks (Cancel), and any one that
// runs more steps than a limit, recurses deeper than one, or grows the
// heap past one (SetLimits). Every thread that runs a file or a rule is
// tracked while it runs (Track); a stopped evaluation fails with an error
// that its backtrace places at the file and line it had reached.
package guard

import (
	"fmt"
	"runtime/metrics"
	"sync"

	"go.starlark.net/starlark"
)

// Limits bound one thread's evaluation; zero is no bound.
type Limits struct {
	Steps uint64 // computation steps
	Depth int    // nested calls
	Heap  uint64 // bytes of the process's heap
	// Names are the flags that raise each limit, for the error: "--starlark_max_steps".
	StepsFlag, DepthFlag, HeapFlag string
}

// DefaultLimits are the limits without flags: far past what real
// BUILD files and rules need, short of a machine's end.
var DefaultLimits = Limits{Steps: 10_000_000_000, Depth: 5_000, Heap: 8 << 30}

var (
	mu     sync.Mutex
	live   = map[*starlark.Thread]struct{}{}
	reason string // the Cancel reason; "" until then
	limits = DefaultLimits
)

// checkEvery is how many steps a thread takes between looks at its limits.
const checkEvery = 1 << 14

// SetLimits sets the limits of the threads tracked from now on.
func SetLimits(l Limits) {
	mu.Lock()
	defer mu.Unlock()
	limits = l
}

// Track notes that t runs until release is called, and bounds it by the
// limits. After Cancel, t is cancelled at once.
func Track(t *starlark.Thread) (release func()) {
	mu.Lock()
	defer mu.Unlock()
	if reason != "" {
		t.Cancel(reason)
	}
	live[t] = struct{}{}
	l := limits
	if l != (Limits{}) {
		t.SetMaxExecutionSteps(t.Steps + checkEvery)
		t.OnMaxSteps = func(t *starlark.Thread) { check(t, l) }
	}
	return func() {
		mu.Lock()
		delete(live, t)
		mu.Unlock()
	}
}

// check cancels t if it is past a limit of l, and else lets it take
// checkEvery more steps.
func check(t *starlark.Thread, l Limits) {
	switch {
	case l.Steps > 0 && t.Steps >= l.Steps:
		t.Cancel(fmt.Sprintf("more than %d steps: a loop that does not end? (raise the limit with %s)", l.Steps, l.StepsFlag))
	case l.Depth > 0 && t.CallStackDepth() > l.Depth:
		t.Cancel(fmt.Sprintf("calls nested more than %d deep: a recursion that does not end? (raise the limit with %s)", l.Depth, l.DepthFlag))
	case l.Heap > 0 && heap() > l.Heap:
		t.Cancel(fmt.Sprintf("the heap grew past %d MiB: an allocation without bound? (raise the limit with %s)", l.Heap>>20, l.HeapFlag))
	default:
		t.SetMaxExecutionSteps(t.Steps + checkEvery)
	}
}

// heap is the bytes of the process's heap objects.
func heap() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Cancel cancels every tracked thread, and any tracked later, with why as
// the reason their evaluation fails.
func Cancel(why string) {
	mu.Lock()
	defer mu.Unlock()
	reason = why
	for t := range live {
		t.Cancel(why)
	}
}
