// Package config reads a cluster's configuration from a Starlark file,
// cluster.rbs, which declares the job queues and, optionally, how waiting
// raises a job's priority:
//
//	queue(name = "batch", priority = 0, default = True)
//	queue(name = "gpu", priority = 10, max_time = "2d")
//	queue(name = "debug", priority = 100, max_time = "30m")
//	age_priority(weight = 1, every = "1m", max = 10000)
package config

import (
	"fmt"
	"time"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/spec"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Cluster is what a cluster.rbs file declares.
type Cluster struct {
	Queues []sched.Queue
	// AgeWeight, AgeInterval and AgeCap are zero unless age_priority()
	// sets them (the scheduler's defaults then apply).
	AgeWeight   int64
	AgeInterval time.Duration
	AgeCap      int64
}

// Load reads a cluster.rbs file.
func Load(path string) (*Cluster, error) {
	c := &Cluster{}
	var queues []sched.Queue
	seen := map[string]bool{}
	agePriority := starlark.NewBuiltin("age_priority", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var weight, maxAge int
		var every string
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "weight?", &weight, "every?", &every, "max?", &maxAge); err != nil {
			return nil, err
		}
		if weight < 0 || maxAge < 0 {
			return nil, fmt.Errorf("age_priority: weight and max must not be negative")
		}
		c.AgeWeight, c.AgeCap = int64(weight), int64(maxAge)
		if every != "" {
			d, err := spec.ParseDuration(every)
			if err != nil {
				return nil, fmt.Errorf("age_priority: %v", err)
			}
			c.AgeInterval = d
		}
		return starlark.None, nil
	})
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
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, path, nil, starlark.StringDict{"queue": queue, "age_priority": agePriority}); err != nil {
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
	c.Queues = queues
	return c, nil
}
