// Package config reads a cluster's configuration from a Starlark file,
// cluster.rbs, which declares the job queues:
//
//	queue(name = "batch", priority = 0, default = True)
//	queue(name = "gpu", priority = 10, max_time = "2d")
//	queue(name = "debug", priority = 100, max_time = "30m")
package config

import (
	"fmt"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/spec"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Load reads the queues a cluster.rbs file declares.
func Load(path string) ([]sched.Queue, error) {
	var queues []sched.Queue
	seen := map[string]bool{}
	queue := starlark.NewBuiltin("queue", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, maxTime string
		var priority int
		var isDefault bool
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "priority?", &priority, "max_time?", &maxTime, "default?", &isDefault); err != nil {
			return nil, err
		}
		if name == "" {
			return nil, fmt.Errorf("queue: name must not be empty")
		}
		if seen[name] {
			return nil, fmt.Errorf("queue %q is declared twice", name)
		}
		seen[name] = true
		q := sched.Queue{Name: name, Priority: int32(priority), Default: isDefault}
		if maxTime != "" {
			d, err := spec.ParseDuration(maxTime)
			if err != nil {
				return nil, fmt.Errorf("queue %q: %v", name, err)
			}
			q.MaxTime = d
		}
		queues = append(queues, q)
		return starlark.None, nil
	})
	thread := &starlark.Thread{Name: path}
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, path, nil, starlark.StringDict{"queue": queue}); err != nil {
		if evalErr, ok := err.(*starlark.EvalError); ok {
			return nil, fmt.Errorf("%s", evalErr.Backtrace())
		}
		return nil, err
	}
	if len(queues) == 0 {
		return nil, fmt.Errorf("%s declares no queue", path)
	}
	defaults := 0
	for _, q := range queues {
		if q.Default {
			defaults++
		}
	}
	if defaults > 1 {
		return nil, fmt.Errorf("%s marks %d queues as default; mark one", path, defaults)
	}
	if defaults == 0 {
		queues[0].Default = true
	}
	return queues, nil
}
