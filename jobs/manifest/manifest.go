// Package manifest provides Manifest, the versioned JSON description of a
// job that a build of a job target writes and that rbs job submit sends: the
// command, the digest of the staged input root, resources, retries and
// checkpoints. Decode and Validate check one at the edge; Spec turns it into
// the scheduler's request, so that a job target and a command typed after
// rbs job submit -- reach the scheduler as the same thing.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rbe/platform"
)

// Version is the manifest format this rbs writes and reads.
const Version = 1

// Manifest is a job as a job target describes it.
type Manifest struct {
	Version int    `json:"version"`
	Label   string `json:"label"`
	Name    string `json:"name"`
	// Command is the argv, run in the job's directory, where the input
	// root is staged.
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	// InputRoot is the digest, "HASH/SIZE", of the Directory staged into
	// the job's directory: the binary, its runfiles and the data.
	InputRoot     string   `json:"input_root"`
	CPUs          int32    `json:"cpus"`
	MemoryBytes   int64    `json:"memory_bytes"`
	GPUs          int32    `json:"gpus"`
	Queue         string   `json:"queue,omitempty"`
	TimeLimitMs   int64    `json:"time_limit_ms,omitempty"`
	Nodes         int32    `json:"nodes"`
	MaxRetries    int32    `json:"max_retries"`
	CheckpointDir string   `json:"checkpoint_dir,omitempty"`
	Outputs       []string `json:"outputs,omitempty"`
	// Array is a job array spec, such as "0-99%10".
	Array string `json:"array,omitempty"`
	// After are the job targets this one runs after.
	After []Dep `json:"after,omitempty"`
	// Platform, OS-ARCH, is the platform the job's binary and input root
	// were built for: the job runs only on workers of that platform.
	Platform string `json:"platform,omitempty"`
}

// Dep is a job target a job runs after, and how: afterok, afterany or
// afternotok.
type Dep struct {
	Kind  string `json:"kind"`
	Label string `json:"label"`
}

// Decode reads a manifest, refusing unknown fields and other versions.
func Decode(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	m := &Manifest{}
	if err := dec.Decode(m); err != nil {
		return nil, fmt.Errorf("reading a job manifest: %w", err)
	}
	if m.Version != Version {
		return nil, fmt.Errorf("job manifest of %s has version %d; this rbs reads version %d: build it again", m.Label, m.Version, Version)
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

// Validate checks every field, naming the job and the value at fault.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("job manifest of %s: %s", m.Label, fmt.Sprintf(format, args...))
	}
	switch {
	case len(m.Command) == 0:
		return bad("no command")
	case m.CPUs < 1:
		return bad("cpus %d: want at least 1", m.CPUs)
	case m.MemoryBytes < 0:
		return bad("memory %d bytes: must not be negative", m.MemoryBytes)
	case m.GPUs < 0:
		return bad("gpus %d: want 0 or more", m.GPUs)
	case m.Nodes < 1:
		return bad("nodes %d: want at least 1", m.Nodes)
	case m.MaxRetries < 0 || m.MaxRetries > 100:
		return bad("max_retries %d: want 0 to 100", m.MaxRetries)
	case m.TimeLimitMs < 0:
		return bad("time limit %d ms: must not be negative", m.TimeLimitMs)
	}
	if m.InputRoot != "" {
		if _, err := digest.Parse(m.InputRoot); err != nil {
			return bad("input root: %v", err)
		}
	}
	if m.Platform != "" {
		if _, err := platform.Parse(m.Platform); err != nil {
			return bad("%v", err)
		}
	}
	if m.CheckpointDir != "" {
		if err := merkle.CheckPath(m.CheckpointDir); err != nil {
			return bad("checkpoint_dir: %v", err)
		}
	}
	for _, o := range m.Outputs {
		if err := merkle.CheckPath(o); err != nil {
			return bad("output: %v", err)
		}
	}
	if m.Array != "" {
		if _, err := spec.ParseArray(m.Array); err != nil {
			return bad("array: %v", err)
		}
	}
	for _, d := range m.After {
		switch spec.DepKind(d.Kind) {
		case spec.AfterOK, spec.AfterAny, spec.AfterNotOK:
		default:
			return bad("after %s: unknown kind %q", d.Label, d.Kind)
		}
	}
	return nil
}

// Spec is the scheduler's request for the job. Multi-node jobs are not
// scheduled yet: a manifest of more than one node is refused here.
func (m *Manifest) Spec() (*jobspb.JobSpec, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if m.Nodes > 1 {
		return nil, fmt.Errorf("%s asks for %d nodes: multi-node jobs are not scheduled yet", m.Label, m.Nodes)
	}
	env := map[string]string{}
	for k, v := range m.Env {
		env[k] = v
	}
	return &jobspb.JobSpec{
		Name: m.Name, Queue: m.Queue, Command: m.Command, Env: env,
		Cpus: m.CPUs, MemoryBytes: m.MemoryBytes, Gpus: m.GPUs, TimeLimitMs: m.TimeLimitMs,
		InputRoot: m.InputRoot, Outputs: m.Outputs, MaxRetries: m.MaxRetries, CheckpointDir: m.CheckpointDir,
		Array: array(m.Array), Platform: m.Platform,
	}, nil
}

// array is the request's form of a validated array spec.
func array(text string) *jobspb.ArraySpec {
	if text == "" {
		return nil
	}
	a, _ := spec.ParseArray(text)
	return &jobspb.ArraySpec{Limit: int32(a.Limit), Text: a.String()}
}

// TimeLimit parses a time limit as job rules give it ("1h", "2d", Slurm's
// forms) into milliseconds.
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
