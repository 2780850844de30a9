package cli

import (
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/starlark/guard"
)

// StarlarkLimits are the flags that bound the Starlark a command
// evaluates: BUILD and .bzl files, rules, repository rules.
type StarlarkLimits struct {
	StarlarkMaxSteps  uint64     `name:"starlark_max_steps" aliases:"starlark-max-steps" default:"10000000000" help:"Stop a Starlark evaluation (a file, a rule) that runs more steps than this, as a loop that does not end." placeholder:"N"`
	StarlarkMaxDepth  int        `name:"starlark_max_depth" aliases:"starlark-max-depth" default:"5000" help:"Stop a Starlark evaluation whose calls nest deeper than this, as a recursion that does not end." placeholder:"N"`
	StarlarkMaxMemory units.Size `name:"starlark_max_memory" aliases:"starlark-max-memory" default:"8GiB" help:"Stop a Starlark evaluation while rbs's heap is larger than this, as an allocation without bound." placeholder:"SIZE"`
}

// apply makes the flags the limits of the evaluations to come.
func (l StarlarkLimits) apply() {
	guard.SetLimits(guard.Limits{
		Steps: l.StarlarkMaxSteps, Depth: l.StarlarkMaxDepth, Heap: uint64(l.StarlarkMaxMemory),
		StepsFlag: "--starlark_max_steps", DepthFlag: "--starlark_max_depth", HeapFlag: "--starlark_max_memory",
	})
}
