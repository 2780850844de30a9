// Package config reads a cluster's configuration from a Starlark file,
// cluster.rbs, which declares the job queues and, optionally, how waiting
// raises a job's priority, fair-share accounts, and queue quotas:
//
//	queue(name = "batch", priority = 0, default = True)
//	queue(name = "gpu", priority = 10, max_time = "2d", usage_factor = 2.0,
//	      quota = {"gpus": 8}, cohort = "ml", borrowing_limit = {"gpus": 8})
//	queue(name = "debug", priority = 100, max_time = "30m")
//	queue(name = "pipelines", cache = True)   # jobs remembered unless they say
//	age_priority(weight = 1, every = "1m", max = 10000)
//	backfill(lookback = 10000)
//	account(name = "vision", shares = 3, users = ["alice", "bob"])
//	account(name = "nlp", shares = 1, users = {"carol": 2, "dave": 1})
//	fair_share(weight = 1000, half_life = "7d")
package config

import (
	"fmt"
	"time"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/units"
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
	// FairShare is set when account() or fair_share() is called.
	FairShare *sched.FairShare
	// Lookback is zero unless backfill() sets it (see sched.Config).
	Lookback int
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
	backfill := starlark.NewBuiltin("backfill", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var lookback int
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "lookback?", &lookback); err != nil {
			return nil, err
		}
		if lookback < 1 {
			return nil, fmt.Errorf("backfill: lookback %d: want 1 or more", lookback)
		}
		c.Lookback = lookback
		return starlark.None, nil
	})
	queue := starlark.NewBuiltin("queue", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, maxTime, cohort string
		var priority int
		var isDefault, cache bool
		var usageFactor starlark.Value = starlark.None
		var quota, borrowing *starlark.Dict
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "priority?", &priority, "max_time?", &maxTime, "default?", &isDefault,
			"usage_factor?", &usageFactor, "quota?", &quota, "cohort?", &cohort, "borrowing_limit?", &borrowing, "cache?", &cache); err != nil {
			return nil, err
		}
		if name == "" {
			return nil, fmt.Errorf("queue: name must not be empty")
		}
		if seen[name] {
			return nil, fmt.Errorf("queue %q is declared twice", name)
		}
		seen[name] = true
		q := sched.Queue{Name: name, Priority: int32(priority), Default: isDefault, Cohort: cohort, Cache: cache}
		if maxTime != "" {
			d, err := spec.ParseDuration(maxTime)
			if err != nil {
				return nil, fmt.Errorf("queue %q: %v", name, err)
			}
			q.MaxTime = d
		}
		if usageFactor != starlark.None {
			f, ok := starlark.AsFloat(usageFactor)
			if !ok || f < 0 {
				return nil, fmt.Errorf("queue %q: usage_factor %s: want a number, 0 or more", name, usageFactor)
			}
			q.UsageFactor = f
		}
		var err error
		if quota != nil {
			if q.Quota, err = resources(quota); err != nil {
				return nil, fmt.Errorf("queue %q: quota: %v", name, err)
			}
		}
		if borrowing != nil {
			if q.BorrowingLimit, err = resources(borrowing); err != nil {
				return nil, fmt.Errorf("queue %q: borrowing_limit: %v", name, err)
			}
		}
		switch {
		case cohort != "" && q.Quota == nil:
			return nil, fmt.Errorf("queue %q: cohort %q: a queue in a cohort lends and borrows quota, and needs a quota", name, cohort)
		case q.BorrowingLimit != nil && cohort == "":
			return nil, fmt.Errorf("queue %q: borrowing_limit: a queue borrows from its cohort, and needs one", name)
		}
		queues = append(queues, q)
		return starlark.None, nil
	})
	var fairShare *sched.FairShare
	fair := func() *sched.FairShare {
		if fairShare == nil {
			fairShare = sched.DefaultFairShare()
		}
		return fairShare
	}
	memberOf := map[string]string{}
	account := starlark.NewBuiltin("account", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name string
		shares := 1
		var users starlark.Value = starlark.NewList(nil)
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "shares?", &shares, "users?", &users); err != nil {
			return nil, err
		}
		if name == "" {
			return nil, fmt.Errorf("account: name must not be empty")
		}
		if shares < 1 {
			return nil, fmt.Errorf("account %q: shares %d: want 1 or more", name, shares)
		}
		fs := fair()
		for _, a := range fs.Accounts {
			if a.Name == name {
				return nil, fmt.Errorf("account %q is declared twice", name)
			}
		}
		a := sched.Account{Name: name, Shares: int64(shares), Users: map[string]int64{}}
		add := func(user starlark.Value, n starlark.Value) error {
			u, ok := starlark.AsString(user)
			if !ok || u == "" {
				return fmt.Errorf("account %q: user %s: want a user's name", name, user)
			}
			k, err := starlark.AsInt32(n)
			if err != nil || k < 1 {
				return fmt.Errorf("account %q: user %q: shares %s: want 1 or more", name, u, n)
			}
			if other, dup := memberOf[u]; dup {
				return fmt.Errorf("account %q: user %q is already in account %q", name, u, other)
			}
			memberOf[u] = name
			a.Users[u] = int64(k)
			return nil
		}
		switch us := users.(type) {
		case *starlark.List:
			for i := range us.Len() {
				if err := add(us.Index(i), starlark.MakeInt(1)); err != nil {
					return nil, err
				}
			}
		case *starlark.Dict:
			for _, kv := range us.Items() {
				if err := add(kv[0], kv[1]); err != nil {
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("account %q: users: want a list of names or a dict of names to shares, got %s", name, users.Type())
		}
		fs.Accounts = append(fs.Accounts, a)
		return starlark.None, nil
	})
	fairShareFn := starlark.NewBuiltin("fair_share", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		weight := -1
		var halfLife string
		var cpu, mem, gpu starlark.Value = starlark.None, starlark.None, starlark.None
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "weight?", &weight, "half_life?", &halfLife, "cpu?", &cpu, "memory_gib?", &mem, "gpu?", &gpu); err != nil {
			return nil, err
		}
		fs := fair()
		if weight != -1 {
			if weight < 0 {
				return nil, fmt.Errorf("fair_share: weight %d: want 0 or more", weight)
			}
			fs.Weight = int64(weight)
		}
		if halfLife != "" {
			d, err := spec.ParseDuration(halfLife)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("fair_share: half_life %q: want a duration such as 7d", halfLife)
			}
			fs.HalfLife = d
		}
		billing := fs.Billing
		for i, v := range []starlark.Value{cpu, mem, gpu} {
			if v == starlark.None {
				continue
			}
			f, ok := starlark.AsFloat(v)
			if !ok || f < 0 {
				return nil, fmt.Errorf("fair_share: %s %s: want a number, 0 or more", []string{"cpu", "memory_gib", "gpu"}[i], v)
			}
			billing[i] = f
		}
		fs.Billing = billing
		return starlark.None, nil
	})
	thread := &starlark.Thread{Name: path}
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, path, nil, starlark.StringDict{"queue": queue, "age_priority": agePriority, "backfill": backfill, "account": account, "fair_share": fairShareFn}); err != nil {
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
	c.Queues, c.FairShare = queues, fairShare
	return c, nil
}

// resources reads a quota or a borrowing limit: a dict of "cpus", "gpus"
// (counts) and "memory" (a size, such as "512G"); what it leaves out is
// not bounded.
func resources(d *starlark.Dict) (*sched.Resources, error) {
	r := sched.Unbounded
	for _, kv := range d.Items() {
		key, _ := starlark.AsString(kv[0])
		switch key {
		case "cpus", "gpus":
			n, err := starlark.AsInt32(kv[1])
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%s %s: want a count, 0 or more", key, kv[1])
			}
			if key == "cpus" {
				r.CPUs = int64(n)
			} else {
				r.GPUs = int64(n)
			}
		case "memory":
			text, ok := starlark.AsString(kv[1])
			if !ok {
				return nil, fmt.Errorf("memory %s: want a size such as \"512G\"", kv[1])
			}
			size, err := units.ParseSize(text)
			if err != nil {
				return nil, fmt.Errorf("memory: %v", err)
			}
			r.MemoryBytes = int64(size)
		default:
			return nil, fmt.Errorf("%s: want cpus, memory or gpus", kv[0])
		}
	}
	return &r, nil
}
