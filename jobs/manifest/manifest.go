// Package manifest provides Manifest, the one request a job reaches the
// scheduler as: a versioned JSON description of the job (the command, the
// digest of the staged input root, resources, retries, checkpoints,
// dependencies) that a build of a job target writes and that rbs job submit
// sends, for a target and for a command typed after -- alike.
//
// Decode reads one and Validate checks every field, naming the job and the
// value at fault; Job turns a valid one into the typed values the scheduler
// core takes. The server does both at its API edge, so the core parses no
// user text.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rbs-build/rbs/jobs/memo"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rbe/platform"
)

// Version is the manifest format this rbs writes and reads.
const Version = 1

// MaxRetries bounds max_retries.
const MaxRetries = 100

// MaxNodes bounds the nodes of one job.
const MaxNodes = 1024

// Manifest is a job as a job target or a submission describes it.
type Manifest struct {
	Version int `json:"version"`
	// Label is the job target built into this manifest; "" for a command.
	Label string `json:"label,omitempty"`
	Name  string `json:"name"`
	// Command is the argv, run in the job's directory, where the input
	// root is staged. With Script set, the script is run instead, with
	// Command as its arguments.
	Command []string          `json:"command,omitempty"`
	Script  string            `json:"script,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// InputRoot is the digest, "HASH/SIZE", of the Directory staged into
	// the job's directory: the binary, its runfiles and the data.
	InputRoot   string `json:"input_root,omitempty"`
	CPUs        int32  `json:"cpus"`
	MemoryBytes int64  `json:"memory_bytes"`
	GPUs        int32  `json:"gpus"`
	// Queue is the queue (a job target's partition); "" for the default.
	Queue       string `json:"queue,omitempty"`
	Priority    int32  `json:"priority,omitempty"`
	TimeLimitMs int64  `json:"time_limit_ms,omitempty"`
	Nodes       int32  `json:"nodes"`
	// Elastic jobs start once MinNodes workers fit (1 when 0), on as many
	// as fit up to MaxNodes (Nodes when 0).
	Elastic    bool  `json:"elastic,omitempty"`
	MinNodes   int32 `json:"min_nodes,omitempty"`
	MaxNodes   int32 `json:"max_nodes,omitempty"`
	MaxRetries int32 `json:"max_retries"`
	// NoRequeue ends the job as NODE_FAIL when its worker is lost,
	// instead of requeueing it.
	NoRequeue     bool     `json:"no_requeue,omitempty"`
	CheckpointDir string   `json:"checkpoint_dir,omitempty"`
	Outputs       []string `json:"outputs,omitempty"`
	// Array is a job array spec, such as "0-99%10".
	Array string `json:"array,omitempty"`
	// After are what the job runs after.
	After []Dep `json:"after,omitempty"`
	// Platform, OS-ARCH, is the platform the job's binary and input root
	// were built for: the job runs only on workers of that platform.
	Platform string `json:"platform,omitempty"`
	// Interactive jobs read the stdin of the client attached to them.
	Interactive bool `json:"interactive,omitempty"`
	// Container is an OCI image to run the command in, with the worker's
	// podman or docker.
	Container string `json:"container,omitempty"`
	// Preemptible jobs may be stopped, and requeued, to make room for a job
	// of higher priority.
	Preemptible bool `json:"preemptible,omitempty"`
	// Constraints are platform properties, NAME=VALUE, a worker must offer
	// to run the job.
	Constraints []string `json:"constraints,omitempty"`
	// Hold submits the job held: it stays pending until released, and is
	// accepted even when no registered worker could ever run it.
	Hold bool `json:"hold,omitempty"`
	// Pack, for a job of several nodes, is a topology label (a worker
	// property's name, such as rack) whose domains it is placed in as few
	// of as it can; with PackRequired, in one, or it waits.
	Pack         string `json:"pack,omitempty"`
	PackRequired bool   `json:"pack_required,omitempty"`
	// Cache is "on" to answer the job from the job cache when it can and
	// remember its result, "off" for neither, "refresh" to run it and
	// replace the entry; "" leaves it to the queue.
	Cache string `json:"cache,omitempty"`
	// CacheVersion is part of the job's key: changing it makes the job
	// miss the entries of earlier versions.
	CacheVersion string `json:"cache_version,omitempty"`
	// Sweep makes the job an array over the cartesian product of the
	// parameters' values (Array may then only cap it, as "%4").
	Sweep []SweepParam `json:"sweep,omitempty"`
}

// SweepParam is one parameter of a sweep.
type SweepParam struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}

// MaxCacheVersion bounds cache_version.
const MaxCacheVersion = 128

// Dep is what a job runs after, and how: afterok, afterany or afternotok.
// A built manifest names a job target (Label); a submitted one names a job
// (Job, "12" or "12_3" for an array task) or an earlier entry of the same
// submission (Entry, counted from 1), with the Label it was built from.
type Dep struct {
	Kind  string `json:"kind"`
	Label string `json:"label,omitempty"`
	Job   string `json:"job,omitempty"`
	Entry int    `json:"entry,omitempty"`
}

// Decode reads a manifest, refusing unknown fields and other versions, and
// validates it.
func Decode(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	m := &Manifest{}
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("reading a job manifest: %w", err)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("job manifest of %s has version %d; this rbs reads version %d: build it again", m.who(), m.Version, Version)
	}
	return m, m.Validate()
}

// Encode writes m as indented JSON.
func (m *Manifest) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// who names the job in errors: its target, else its name.
func (m *Manifest) who() string {
	if m.Label != "" {
		return m.Label
	}
	if m.Name != "" {
		return "job " + m.Name
	}
	return "the job"
}

// FieldError is a manifest field with a bad value.
type FieldError struct {
	Job   string // the job's label or name
	Field string // the manifest's name of the field, e.g. "max_retries"
	Msg   string // what is wrong, with the value
}

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s: %s", e.Job, e.Field, e.Msg) }

// Validate checks every field, naming the job, the field and the value at
// fault (a *FieldError).
func (m *Manifest) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Job: m.who(), Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if len(m.Command) == 0 && m.Script == "" {
		return bad("command", "nothing to run: give a command after -- or --script FILE")
	}
	for _, a := range m.Command {
		if strings.ContainsRune(a, 0) {
			return bad("command", "argument %q contains a NUL byte, which no program can be given", a)
		}
	}
	for k, v := range m.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return bad("env", "%q=%q: want a name without '=' or NUL and a value without NUL", k, v)
		}
	}
	switch {
	case m.CPUs < 1:
		return bad("cpus", "%d: want at least 1", m.CPUs)
	case m.MemoryBytes < 0:
		return bad("memory_bytes", "%d: must not be negative", m.MemoryBytes)
	case m.GPUs < 0:
		return bad("gpus", "%d: want 0 or more", m.GPUs)
	case m.Nodes < 1:
		return bad("nodes", "%d: want at least 1", m.Nodes)
	case m.MaxRetries < 0 || m.MaxRetries > MaxRetries:
		return bad("max_retries", "%d: want 0 to %d", m.MaxRetries, MaxRetries)
	case m.TimeLimitMs < 0:
		return bad("time_limit_ms", "%d: must not be negative", m.TimeLimitMs)
	case m.Interactive && m.Array != "":
		return bad("interactive", "an array cannot be interactive: its stdin goes to one process")
	case m.Nodes > MaxNodes:
		return bad("nodes", "%d: want at most %d", m.Nodes, MaxNodes)
	case m.MinNodes < 0 || m.MaxNodes < 0:
		return bad("min_nodes", "min_nodes %d and max_nodes %d must not be negative", m.MinNodes, m.MaxNodes)
	case m.MaxNodes > 0 && m.MinNodes > m.MaxNodes:
		return bad("min_nodes", "min_nodes %d is above max_nodes %d", m.MinNodes, m.MaxNodes)
	case m.MaxNodes > MaxNodes:
		return bad("max_nodes", "%d: want at most %d", m.MaxNodes, MaxNodes)
	case !m.Elastic && (m.MinNodes > 0 || m.MaxNodes > 0):
		return bad("min_nodes", "min_nodes and max_nodes are for elastic jobs: set elastic too, or give nodes alone")
	}
	if m.InputRoot != "" {
		if _, err := digest.Parse(m.InputRoot); err != nil {
			return bad("input_root", "%v", err)
		}
	}
	for _, p := range m.Constraints {
		name, value, ok := strings.Cut(p, "=")
		if !ok || name == "" || value == "" || strings.ContainsAny(name, " \t\n\x00") {
			return bad("constraints", "%q: want NAME=VALUE, such as gpu=a100", p)
		}
	}
	if m.Pack != "" && (strings.ContainsAny(m.Pack, "= \t\n\x00") || len(m.Pack) > 64) {
		return bad("pack", "%q: want a topology label's name, such as rack", m.Pack)
	}
	if m.PackRequired && m.Pack == "" {
		return bad("pack_required", "a required pack needs the label to pack by (pack)")
	}
	if m.Container != "" && (strings.ContainsAny(m.Container, " \t\n\x00") || strings.HasPrefix(m.Container, "-")) {
		return bad("container", "image %q: want an image name such as localhost/train:1 or docker.io/library/python:3.11", m.Container)
	}
	if m.Platform != "" {
		if _, err := platform.Parse(m.Platform); err != nil {
			return bad("platform", "%v", err)
		}
	}
	if m.CheckpointDir != "" {
		if err := merkle.CheckPath(m.CheckpointDir); err != nil {
			return bad("checkpoint_dir", "%v; give a path inside the job's directory", err)
		}
	}
	for _, o := range m.Outputs {
		if err := merkle.CheckPath(o); err != nil {
			return bad("outputs", "%v; give a path inside the job's directory", err)
		}
	}
	if m.Array != "" && len(m.Sweep) == 0 {
		if _, err := spec.ParseArray(m.Array); err != nil {
			return bad("array", "%v", err)
		}
	}
	switch m.Cache {
	case "", "on", "off", "refresh":
	default:
		return bad("cache", "%q: want on, off or refresh", m.Cache)
	}
	if m.Interactive && (m.Cache == "on" || m.Cache == "refresh") {
		return bad("cache", "an interactive job reads its stdin, which no cache key holds: it cannot be cached")
	}
	if len(m.CacheVersion) > MaxCacheVersion || strings.ContainsRune(m.CacheVersion, 0) {
		return bad("cache_version", "%q: want at most %d bytes and no NUL", m.CacheVersion, MaxCacheVersion)
	}
	if len(m.Sweep) > 0 {
		if _, _, err := m.sweepArray(); err != nil {
			return bad("sweep", "%v", err)
		}
	}
	for _, d := range m.After {
		switch spec.DepKind(d.Kind) {
		case spec.AfterOK, spec.AfterAny, spec.AfterNotOK:
		default:
			return bad("after", "%s: unknown kind %q (kinds: afterok, afterany, afternotok)", d.name(), d.Kind)
		}
		if d.Job != "" {
			if _, err := spec.ParseJobID(d.Job); err != nil {
				return bad("after", "%v", err)
			}
		}
		if d.Entry < 0 || d.Job != "" && d.Entry != 0 {
			return bad("after", "%s: entry %d: give a job or an earlier entry, not both", d.name(), d.Entry)
		}
	}
	return nil
}

// sweepArray checks the sweep and returns its size and the cap Array sets
// on it (0 for none).
func (m *Manifest) sweepArray() (tasks, limit int, err error) {
	if m.Interactive {
		return 0, 0, fmt.Errorf("an interactive job cannot be a sweep: its stdin goes to one process")
	}
	if m.Array != "" {
		n, ok := strings.CutPrefix(m.Array, "%")
		if limit, err = strconv.Atoi(n); !ok || err != nil || limit < 1 {
			return 0, 0, fmt.Errorf("array %q with a sweep: the sweep makes the array; give only a cap, such as %%4", m.Array)
		}
	}
	tasks = 1
	seen := map[string]bool{}
	for _, p := range m.Sweep {
		if err := spec.CheckSweepName(p.Name); err != nil {
			return 0, 0, err
		}
		if seen[strings.ToUpper(p.Name)] {
			return 0, 0, fmt.Errorf("parameter %q is given twice (names are the same in RBS_SWEEP_ whatever their case)", p.Name)
		}
		seen[strings.ToUpper(p.Name)] = true
		if err := spec.CheckSweepValues(p.Values); err != nil {
			return 0, 0, fmt.Errorf("parameter %s: %v", p.Name, err)
		}
		if tasks *= len(p.Values); tasks > spec.MaxArrayTasks {
			return 0, 0, fmt.Errorf("more than %d combinations: at most %d tasks", spec.MaxArrayTasks, spec.MaxArrayTasks)
		}
	}
	return tasks, limit, nil
}

// name names a dependency's target in errors.
func (d Dep) name() string {
	switch {
	case d.Label != "":
		return d.Label
	case d.Job != "":
		return d.Job
	}
	return fmt.Sprintf("entry %d", d.Entry)
}

// Job is a valid manifest in the typed form the scheduler core takes: the
// spec it stores, with the array's text in its canonical form and the
// platform canonical, and the array's task indices.
type Job struct {
	Spec *jobspb.JobSpec
	// Indices are the array's task indices; nil when the job is not an
	// array.
	Indices []int
}

// Job validates m as entry number entry (from 1) of a submission, whose
// dependencies may name only jobs and earlier entries, and returns its
// typed form.
func (m *Manifest) Job(entry int) (*Job, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	env := map[string]string{}
	for k, v := range m.Env {
		env[k] = v
	}
	s := &jobspb.JobSpec{
		Name: m.Name, Queue: m.Queue, Priority: m.Priority, Command: m.Command, Script: m.Script, Env: env,
		Cpus: m.CPUs, MemoryBytes: m.MemoryBytes, Gpus: m.GPUs, TimeLimitMs: m.TimeLimitMs, NoRequeue: m.NoRequeue,
		InputRoot: m.InputRoot, Outputs: m.Outputs, MaxRetries: m.MaxRetries, CheckpointDir: m.CheckpointDir,
		Interactive: m.Interactive, Nodes: m.Nodes, Container: m.Container, Preemptible: m.Preemptible,
		Constraints: m.Constraints, Hold: m.Hold, Pack: m.Pack, PackRequired: m.PackRequired,
	}
	if m.Elastic {
		lo, hi := max(m.MinNodes, 1), m.MaxNodes
		if hi == 0 {
			hi = max(m.Nodes, lo)
		}
		s.Elastic, s.MinNodes, s.Nodes = true, lo, hi
	}
	if m.Platform != "" {
		p, _ := platform.Parse(m.Platform)
		s.Platform = p.String()
	}
	j := &Job{Spec: s}
	switch {
	case len(m.Sweep) > 0:
		tasks, limit, _ := m.sweepArray()
		for _, p := range m.Sweep {
			s.Sweep = append(s.Sweep, &jobspb.SweepParam{Name: p.Name, Values: p.Values})
		}
		text := fmt.Sprintf("0-%d", tasks-1)
		if limit > 0 {
			text += "%" + strconv.Itoa(limit)
		}
		s.Array = &jobspb.ArraySpec{Limit: int32(limit), Text: text}
		for i := range tasks {
			j.Indices = append(j.Indices, i)
		}
	case m.Array != "":
		a, _ := spec.ParseArray(m.Array)
		s.Array = &jobspb.ArraySpec{Limit: int32(a.Limit), Text: a.String()}
		j.Indices = a.Indices
	}
	s.Cache = map[string]jobspb.CachePolicy{"on": jobspb.CachePolicy_CACHE_ON, "off": jobspb.CachePolicy_CACHE_OFF,
		"refresh": jobspb.CachePolicy_CACHE_REFRESH}[m.Cache]
	if !m.Interactive {
		s.CacheKey = memo.Spec(s, m.CacheVersion)
	}
	for _, d := range m.After {
		dep := &jobspb.Dependency{Kind: d.Kind, Index: -1}
		switch {
		case d.Job != "":
			id, _ := spec.ParseJobID(d.Job)
			dep.JobId, dep.Index = id.ID, int32(id.Index)
		case d.Entry > 0 && d.Entry < entry:
			dep.PipelineEntry = int32(d.Entry)
		default:
			return nil, &FieldError{Job: m.who(), Field: "after", Msg: fmt.Sprintf("%s: a job may run after a job or an earlier entry of its submission", d.name())}
		}
		s.Deps = append(s.Deps, dep)
	}
	return j, nil
}

// Overrides are the fields a submission sets over a job's manifest, as
// rbs job submit's flags give them: a zero value leaves the manifest's;
// Outputs and After are added to its, Env entries set over its.
type Overrides struct {
	Name, Queue                             string
	Priority, CPUs, GPUs, MaxRetries, Nodes int32
	// MinNodes, with Nodes, makes the job elastic: from MinNodes to Nodes.
	MinNodes                                  int32
	MemoryBytes, TimeLimitMs                  int64
	CheckpointDir, Array, Container, Pack     string
	Outputs, Constraints                      []string
	After                                     []Dep
	Env                                       map[string]string
	NoRequeue, Interactive, Preemptible, Hold bool
	PackRequired                              bool
	// Cache and CacheVersion set the manifest's; Sweep replaces its sweep.
	Cache, CacheVersion string
	Sweep               []SweepParam
}

// Apply sets o over m. The result is checked by Validate like any
// manifest.
func (o Overrides) Apply(m *Manifest) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set32 := func(dst *int32, v int32) {
		if v != 0 {
			*dst = v
		}
	}
	set(&m.Name, o.Name)
	set(&m.Queue, o.Queue)
	set(&m.CheckpointDir, o.CheckpointDir)
	set(&m.Array, o.Array)
	set(&m.Container, o.Container)
	set(&m.Pack, o.Pack)
	set(&m.Cache, o.Cache)
	set(&m.CacheVersion, o.CacheVersion)
	if len(o.Sweep) > 0 {
		m.Sweep = o.Sweep
	}
	set32(&m.Priority, o.Priority)
	set32(&m.CPUs, o.CPUs)
	set32(&m.GPUs, o.GPUs)
	set32(&m.MaxRetries, o.MaxRetries)
	set32(&m.Nodes, o.Nodes)
	if o.MinNodes > 0 {
		m.Elastic, m.MinNodes, m.MaxNodes = true, o.MinNodes, o.Nodes
	}
	if o.MemoryBytes != 0 {
		m.MemoryBytes = o.MemoryBytes
	}
	if o.TimeLimitMs != 0 {
		m.TimeLimitMs = o.TimeLimitMs
	}
	m.NoRequeue = m.NoRequeue || o.NoRequeue
	m.Interactive = m.Interactive || o.Interactive
	m.Preemptible = m.Preemptible || o.Preemptible
	m.Hold = m.Hold || o.Hold
	m.PackRequired = m.PackRequired || o.PackRequired
	m.Outputs = append(m.Outputs, o.Outputs...)
	m.Constraints = append(m.Constraints, o.Constraints...)
	m.After = append(m.After, o.After...)
	if len(o.Env) > 0 && m.Env == nil {
		m.Env = map[string]string{}
	}
	for k, v := range o.Env {
		m.Env[k] = v
	}
}

// TimeLimit parses a time limit as job rules and flags give it ("1h", "2d",
// Slurm's forms) into milliseconds.
func TimeLimit(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	d, err := spec.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	return d.Milliseconds(), nil
}
