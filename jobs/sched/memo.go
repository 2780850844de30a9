package sched

import (
	"slices"
	"strings"

	"github.com/rbs-build/rbs/jobs/memo"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// The job cache remembers, by key (jobs/memo), the jobs that COMPLETED
// with the cache on, as long as they are kept. A job that may be answered
// from it is resolved once it could start (its dependencies satisfied, so
// that the outputs of the jobs it runs after are known): its task key is
// worked out, and where an entry holds that key the job waits
// (ReasonCacheCheck) while the server checks that the CAS still has the
// entry's outputs (CacheChecks, CacheChecked), then ends COMPLETED with
// them, or, when they are gone, runs. A job that may not start before its
// key is worked out (blocked) cannot run unkeyed.

// CacheCheck asks the owner of the Core whether the CAS still holds the
// outputs of Origin, the entry found for Job.
type CacheCheck struct {
	Job, Origin Key
	// OutputRoot is the Directory of Origin's outputs.
	OutputRoot string
}

// caches reports whether j's result is to be remembered and looked up.
func caches(s *jobspb.JobSpec) bool {
	return s.CacheKey != "" && (s.Cache == jobspb.CachePolicy_CACHE_ON || s.Cache == jobspb.CachePolicy_CACHE_REFRESH)
}

// unkeyed reports whether pending j must be resolved before it may start.
func unkeyed(j *job) bool {
	return caches(j.spec) && j.rec.CacheKey == "" && j.rec.CachedFrom == ""
}

// resolveCache resolves the jobs queued for it whose dependencies are
// satisfied; the others are resolved when those end (unpark).
func (c *Core) resolveCache() {
	queued := c.resolving
	c.resolving = nil
	// The tasks of an array share their spec, so their dependencies and
	// the outputs those left.
	roots, waits := map[*jobspb.JobSpec][]string{}, map[*jobspb.JobSpec]bool{}
	for _, j := range queued {
		if j.state() != Pending || !unkeyed(j) || j.checking {
			continue
		}
		wait, ok := waits[j.spec]
		if !ok {
			wait = c.depsState(j) != ""
			waits[j.spec] = wait
		}
		if wait {
			continue
		}
		up, ok := roots[j.spec]
		if !ok {
			up = upstreamRoots(c.upstream(j))
			roots[j.spec] = up
		}
		key := memo.Task(j.spec.CacheKey, j.key.Index, sweepValues(j.spec, j.key.Index), up)
		j.rec.CacheKey = key
		c.touch(j)
		if o := c.entry(key); o != nil && j.spec.Cache != jobspb.CachePolicy_CACHE_REFRESH {
			if o.rec.OutputRoot == "" {
				c.answer(j, o) // nothing the CAS could have lost
				continue
			}
			j.checking = true
			c.park(j, ReasonCacheCheck)
			c.checks = append(c.checks, CacheCheck{Job: j.key, Origin: o.key, OutputRoot: o.rec.OutputRoot})
			continue
		}
		c.unpark(j)
	}
}

// entry returns the job whose result the cache holds for key, or nil.
func (c *Core) entry(key string) *job {
	k, ok := c.cache[key]
	if !ok {
		return nil
	}
	if o := c.jobs[k]; o != nil && o.state() == Completed && o.rec.CacheKey == key {
		return o
	}
	delete(c.cache, key)
	return nil
}

// remember makes j, which has just completed, the cache's entry for its key.
func (c *Core) remember(j *job) {
	if caches(j.spec) && j.rec.CacheKey != "" && j.rec.CachedFrom == "" {
		c.cache[j.rec.CacheKey] = j.key
	}
}

// forgetEntry drops the cache's entry that j, about to be forgotten, is.
func (c *Core) forgetEntry(j *job) {
	if k, ok := c.cache[j.rec.CacheKey]; ok && k == j.key {
		delete(c.cache, j.rec.CacheKey)
	}
}

// CacheChecks returns, and forgets, the checks the Core asks for: its
// owner answers each with CacheChecked once the round that asked is
// committed.
func (c *Core) CacheChecks() []CacheCheck {
	checks := c.checks
	c.checks = nil
	return checks
}

// CacheChecked answers a CacheCheck: with the outputs present, the job ends
// COMPLETED with its origin's result; without, the entry is dropped and the
// job runs.
func (c *Core) CacheChecked(chk CacheCheck, present bool) {
	j := c.jobs[chk.Job]
	if j == nil || !j.checking || j.state() != Pending {
		return
	}
	j.checking = false
	if o := c.jobs[chk.Origin]; present && o != nil && o.state() == Completed && o.rec.CacheKey == j.rec.CacheKey {
		c.answer(j, o)
		return
	}
	if k, ok := c.cache[j.rec.CacheKey]; ok && k == chk.Origin {
		delete(c.cache, j.rec.CacheKey)
	}
	c.setReason(j, "")
	c.touch(j)
	c.unpark(j)
	c.reschedule = true
}

// answer ends pending j COMPLETED with the result of o, from the cache.
func (c *Core) answer(j, o *job) {
	now := c.cfg.Now().UnixMilli()
	j.checking = false
	j.rec.CachedFrom = o.key.String()
	j.rec.OutputRoot, j.rec.Outputs = o.rec.OutputRoot, o.rec.Outputs
	j.rec.ExitCode, j.rec.StartUnixMs = 0, now
	j.rec.Message = "cached from job " + o.key.String()
	c.end(j, Completed, now)
}

// upstream returns the outputs of the jobs j runs after once they
// completed (afterok), in the order of its dependencies, an array's tasks
// by index.
func (c *Core) upstream(j *job) []*workerpb.UpstreamOutput {
	var out []*workerpb.UpstreamOutput
	for _, d := range j.spec.Deps {
		if d.Kind != "afterok" {
			continue
		}
		ts := c.depTargets(Key{d.JobId, d.Index})
		if len(ts) > 1 {
			ts = slices.Clone(ts)
			slices.SortFunc(ts, func(a, b *job) int { return a.key.Compare(b.key) })
		}
		for _, t := range ts {
			if t.rec.OutputRoot != "" {
				out = append(out, &workerpb.UpstreamOutput{JobId: t.key.String(), OutputRoot: t.rec.OutputRoot})
			}
		}
	}
	return out
}

func upstreamRoots(us []*workerpb.UpstreamOutput) []string {
	roots := make([]string, len(us))
	for i, u := range us {
		roots[i] = u.OutputRoot
	}
	return roots
}

// Settling reports whether any task of the jobs ids may yet be answered
// from the cache without running: it waits to be resolved or on a cache
// check, or on jobs that do.
func (c *Core) Settling(ids []int64) bool {
	seen := map[Key]bool{}
	var settling func(j *job) bool
	settling = func(j *job) bool {
		if j.state() != Pending {
			return false
		}
		if j.checking || j.rec.PendingReason == ReasonCacheCheck {
			return true
		}
		if !unkeyed(j) || seen[j.key] {
			return false
		}
		seen[j.key] = true
		if c.depsState(j) == "" {
			return true // the next round resolves it
		}
		for _, d := range j.spec.Deps {
			for _, t := range c.depTargets(Key{d.JobId, d.Index}) {
				if settling(t) {
					return true
				}
			}
		}
		return false
	}
	for _, id := range ids {
		for _, j := range c.depTargets(Key{id, -1}) {
			if settling(j) {
				return true
			}
		}
	}
	return false
}

// CachedTasks returns how many tasks of job id were answered from the
// cache, and for a plain job the id it was answered from.
func (c *Core) CachedTasks(id int64) (int32, string) {
	var n int32
	from := ""
	for _, j := range c.depTargets(Key{id, -1}) {
		if j.rec.CachedFrom != "" {
			n++
			from = j.rec.CachedFrom
		}
	}
	if j := c.jobs[Key{id, -1}]; j == nil {
		from = ""
	}
	return n, from
}

// sweepValues returns the values, NAME=VALUE, that task index of a sweep
// takes: the index counts through the cartesian product of the parameters'
// values, the last parameter varying fastest. Nil when s is no sweep.
func sweepValues(s *jobspb.JobSpec, index int32) []string {
	if len(s.Sweep) == 0 || index < 0 {
		return nil
	}
	out := make([]string, len(s.Sweep))
	i := int(index)
	for p := len(s.Sweep) - 1; p >= 0; p-- {
		vs := s.Sweep[p].Values
		out[p] = s.Sweep[p].Name + "=" + vs[i%len(vs)]
		i /= len(vs)
	}
	return out
}

// sweepEnv sets a sweep task's values in env as RBS_SWEEP_NAME and returns
// the command with each {name} replaced by its value.
func sweepEnv(s *jobspb.JobSpec, index int32, env map[string]string) []string {
	values := sweepValues(s, index)
	if values == nil {
		return s.Command
	}
	pairs := make([]string, 0, 2*len(values))
	for _, v := range values {
		name, value, _ := strings.Cut(v, "=")
		env["RBS_SWEEP_"+strings.ToUpper(name)] = value
		pairs = append(pairs, "{"+name+"}", value)
	}
	r := strings.NewReplacer(pairs...)
	cmd := make([]string, len(s.Command))
	for i, a := range s.Command {
		cmd[i] = r.Replace(a)
	}
	return cmd
}

// Cached reports whether any of the jobs ids uses the job cache.
func (c *Core) Cached(ids []int64) bool {
	for _, id := range ids {
		if ts := c.depTargets(Key{id, -1}); len(ts) > 0 && caches(ts[0].spec) {
			return true
		}
	}
	return false
}

// OutputOf returns the job whose output k shows: the one k was answered
// with from the cache, else k.
func (c *Core) OutputOf(k Key) Key {
	j := c.jobs[k]
	if j == nil || j.rec.CachedFrom == "" {
		return k
	}
	id, err := spec.ParseJobID(j.rec.CachedFrom)
	if err != nil {
		return k
	}
	return Key{id.ID, int32(id.Index)}
}
