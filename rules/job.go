package rules

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/units"
	"go.starlark.net/starlark"
)

// jobInfo is the name of the provider @rbs//job/rules.rbs's rules return.
const jobInfo = "JobInfo"

// RunfilesFiles returns the files of the target's runfiles.
func (c *Configured) RunfilesFiles() []*File {
	if c.Runfiles == nil {
		return nil
	}
	return c.Runfiles.files.Files()
}

// Job returns the manifest a job target describes, without its input root
// (known once the files are built), or nil for a target that is not a job.
// Every attribute is checked here; an error names the target and the
// attribute.
func (c *Configured) Job() (*manifest.Manifest, error) {
	var info *ProviderInstance
	for p, inst := range c.Providers {
		if p.Name() == jobInfo {
			info = inst
		}
	}
	if info == nil {
		return nil, nil
	}
	bad := func(attr string, err error) error { return fmt.Errorf("%s: %s: %v", c.Label, attr, err) }
	str := func(name string) string {
		s, _ := starlark.AsString(info.fields[name])
		return s
	}
	num := func(name string) (int32, error) {
		n, err := starlark.AsInt32(info.fields[name])
		if err != nil {
			return 0, bad(name, err)
		}
		return int32(n), nil
	}
	binary, ok := info.fields["binary"].(*File)
	if !ok {
		return nil, bad("binary", fmt.Errorf("want an executable target"))
	}
	args, err := stringList(info.fields["args"])
	if err != nil {
		return nil, bad("args", err)
	}
	m := &manifest.Manifest{
		Version: manifest.Version, Label: c.Label.String(), Name: c.Label.Name,
		Command: append([]string{binary.ShortPath}, args...), Env: map[string]string{},
		Queue: str("partition"), CheckpointDir: str("checkpoint_dir"),
	}
	if env, ok := info.fields["env"].(*starlark.Dict); ok {
		for _, kv := range env.Items() {
			k, _ := starlark.AsString(kv[0])
			v, _ := starlark.AsString(kv[1])
			m.Env[k] = v
		}
	}
	cpu, err := strconv.ParseInt(str("cpu"), 10, 32)
	if err != nil || cpu < 1 {
		return nil, bad("cpu", fmt.Errorf("%q is not a whole number of CPUs, 1 or more", str("cpu")))
	}
	m.CPUs = int32(cpu)
	mem, err := units.ParseSize(str("memory"))
	if err != nil {
		return nil, bad("memory", err)
	}
	m.MemoryBytes = int64(mem)
	if m.TimeLimitMs, err = manifest.TimeLimit(str("time_limit")); err != nil {
		return nil, bad("time_limit", err)
	}
	if m.GPUs, err = num("gpus"); err != nil {
		return nil, err
	}
	if m.Nodes, err = num("nodes"); err != nil {
		return nil, err
	}
	if m.MaxRetries, err = num("max_retries"); err != nil {
		return nil, err
	}
	if m.MinNodes, err = num("min_nodes"); err != nil {
		return nil, err
	}
	if m.MaxNodes, err = num("max_nodes"); err != nil {
		return nil, err
	}
	m.Elastic = info.fields["elastic"] == starlark.True
	if m.Outputs, err = stringList(info.fields["outputs"]); err != nil {
		return nil, bad("outputs", err)
	}
	m.Array = str("array")
	m.Container = str("container")
	m.Pack = str("pack")
	m.PackRequired = info.fields["pack_required"] == starlark.True
	if info.fields["cache"] == starlark.True {
		m.Cache = "on"
	}
	m.CacheVersion = str("cache_version")
	if sweep, ok := info.fields["sweep"].(*starlark.Dict); ok {
		for _, kv := range sweep.Items() {
			name, _ := starlark.AsString(kv[0])
			values, err := stringList(kv[1])
			if err != nil {
				return nil, bad("sweep", fmt.Errorf("%s: %v", name, err))
			}
			m.Sweep = append(m.Sweep, manifest.SweepParam{Name: name, Values: values})
		}
	}
	if m.Constraints, err = stringList(info.fields["constraints"]); err != nil {
		return nil, bad("constraints", err)
	}
	if after, ok := info.fields["after"].(*starlark.List); ok {
		for i := 0; i < after.Len(); i++ {
			pair, ok := after.Index(i).(starlark.Tuple)
			if !ok || len(pair) != 2 {
				return nil, bad("after", fmt.Errorf("want (kind, label) pairs"))
			}
			kind, _ := starlark.AsString(pair[0])
			l, _ := starlark.AsString(pair[1])
			m.After = append(m.After, manifest.Dep{Kind: kind, Label: l})
		}
	}
	var fe *manifest.FieldError
	if err := m.Validate(); errors.As(err, &fe) {
		return nil, bad(jobAttr(fe.Field), errors.New(fe.Msg))
	} else if err != nil {
		return nil, err
	}
	return m, nil
}

// jobAttr is the job rules' attribute a manifest field comes from.
func jobAttr(field string) string {
	switch field {
	case "cpus":
		return "cpu"
	case "memory_bytes":
		return "memory"
	case "time_limit_ms":
		return "time_limit"
	case "queue":
		return "partition"
	case "command":
		return "args"
	}
	return field
}

// PipelineJobs returns the labels of the job targets a job_pipeline
// submits, or nil for a target that is not one.
func (c *Configured) PipelineJobs() []string {
	for p, inst := range c.Providers {
		if p.Name() == "JobPipelineInfo" {
			jobs, _ := stringList(inst.fields["jobs"])
			return jobs
		}
	}
	return nil
}
