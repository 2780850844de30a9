package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestDecodeAndSpec(t *testing.T) {
	good := `{"version": 1, "label": "//app:train", "name": "train", "command": ["app/trainer", "--epochs", "3"],
		"input_root": "` + strings.Repeat("a", 64) + `/78", "cpus": 2, "memory_bytes": 1024, "gpus": 0, "nodes": 1,
		"max_retries": 2, "checkpoint_dir": "ckpt", "outputs": ["out"], "platform": "linux-arm64"}`
	m, err := Decode([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	j, err := m.Job(1)
	if err != nil {
		t.Fatal(err)
	}
	s := j.Spec
	if s.Cpus != 2 || s.MaxRetries != 2 || s.CheckpointDir != "ckpt" || s.InputRoot != m.InputRoot || len(s.Outputs) != 1 || s.Platform != "linux-arm64" {
		t.Fatalf("Spec = %v, %v", s, err)
	}
	b, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Decode(b); err != nil || again.InputRoot != m.InputRoot {
		t.Fatalf("an encoded manifest reads back as %+v, %v", again, err)
	}
	for _, tc := range []struct{ from, to, want string }{
		{`"version": 1`, `"version": 2`, "has version 2"},
		{`"cpus": 2`, `"cpus": 0`, "cpus: 0"},
		{`"nodes": 1`, `"nodes": 0`, "nodes: 0"},
		{`"max_retries": 2`, `"max_retries": 101`, "max_retries: 101"},
		{`"checkpoint_dir": "ckpt"`, `"checkpoint_dir": "../ckpt"`, `contains ".."`},
		{`"outputs": ["out"]`, `"outputs": ["/out"]`, "is absolute"},
		{`"gpus": 0`, `"gpus": 0, "extra": 1`, `unknown field "extra"`},
		{`/78"`, `/x"`, "input_root"},
		{`"linux-arm64"`, `"linux-vax"`, `platform "linux-vax": unknown architecture`},
	} {
		bad := strings.Replace(good, tc.from, tc.to, 1)
		if _, err := Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.to, err, tc.want)
		}
	}
	m.Nodes = 2
	if j, err := m.Job(1); err != nil || j.Spec.Nodes != 2 {
		t.Fatalf("a 2-node manifest: %v", err)
	}
	m.Nodes = MaxNodes + 1
	if _, err := m.Job(1); err == nil || !strings.Contains(err.Error(), "nodes: 1025: want at most 1024") {
		t.Fatalf("a %d-node manifest: %v", m.Nodes, err)
	}
}

// Every field of a submission is checked at the edge, the error naming the
// job, the field and the value; a valid one comes out canonical and typed.
func TestJob(t *testing.T) {
	base := func() *Manifest {
		return &Manifest{Version: Version, Name: "x", Command: []string{"x"}, CPUs: 1, Nodes: 1}
	}
	for _, tc := range []struct {
		name  string
		edit  func(m *Manifest)
		entry int
		want  string
	}{
		{"nothing to run", func(m *Manifest) { m.Command = nil }, 1, "job x: command: nothing to run"},
		{"NUL", func(m *Manifest) { m.Command = []string{"a\x00b"} }, 1, `command: argument "a\x00b" contains a NUL byte`},
		{"env name", func(m *Manifest) { m.Env = map[string]string{"A=B": "c"} }, 1, `env: "A=B"="c"`},
		{"cpus", func(m *Manifest) { m.CPUs = -1 }, 1, "cpus: -1: want at least 1"},
		{"memory", func(m *Manifest) { m.MemoryBytes = -5 }, 1, "memory_bytes: -5"},
		{"time", func(m *Manifest) { m.TimeLimitMs = -1 }, 1, "time_limit_ms: -1"},
		{"retries", func(m *Manifest) { m.MaxRetries = 101 }, 1, "max_retries: 101: want 0 to 100"},
		{"checkpoint up", func(m *Manifest) { m.CheckpointDir = "../up" }, 1, `checkpoint_dir: path "../up"`},
		{"checkpoint abs", func(m *Manifest) { m.CheckpointDir = "/abs" }, 1, `checkpoint_dir: path "/abs"`},
		{"checkpoint //", func(m *Manifest) { m.CheckpointDir = "a//b" }, 1, `checkpoint_dir: path "a//b"`},
		{"output", func(m *Manifest) { m.Outputs = []string{"../o"} }, 1, `outputs: path "../o"`},
		{"array empty range", func(m *Manifest) { m.Array = "5-1" }, 1, `array: invalid array "5-1"`},
		{"interactive array", func(m *Manifest) { m.Interactive, m.Array = true, "0-1" }, 1, "interactive: an array cannot be interactive"},
		{"cache word", func(m *Manifest) { m.Cache = "yes" }, 1, `cache: "yes": want on, off or refresh`},
		{"interactive cached", func(m *Manifest) { m.Interactive, m.Cache = true, "on" }, 1, "cache: an interactive job reads its stdin"},
		{"cache version", func(m *Manifest) { m.CacheVersion = strings.Repeat("v", 129) }, 1, "cache_version: "},
		{"sweep name", func(m *Manifest) { m.Sweep = []SweepParam{{Name: "1lr", Values: []string{"1"}}} }, 1, `sweep: parameter name "1lr"`},
		{"sweep twice", func(m *Manifest) { m.Sweep = []SweepParam{{"lr", []string{"1"}}, {"LR", []string{"2"}}} }, 1, `sweep: parameter "LR" is given twice`},
		{"sweep empty value", func(m *Manifest) { m.Sweep = []SweepParam{{"lr", []string{"1", ""}}} }, 1, "sweep: parameter lr: an empty value"},
		{"sweep no values", func(m *Manifest) { m.Sweep = []SweepParam{{"lr", nil}} }, 1, "sweep: parameter lr: 0 values"},
		{"sweep repeated value", func(m *Manifest) { m.Sweep = []SweepParam{{"lr", []string{"1", "1"}}} }, 1, `sweep: parameter lr: value "1" is given twice`},
		{"sweep with an array", func(m *Manifest) { m.Sweep, m.Array = []SweepParam{{"lr", []string{"1"}}}, "0-3" }, 1, `sweep: array "0-3" with a sweep`},
		{"sweep too large", func(m *Manifest) {
			m.Sweep = []SweepParam{{"a", numbers(1000)}, {"b", numbers(1000)}}
		}, 1, "sweep: more than 100000 combinations"},
		{"platform", func(m *Manifest) { m.Platform = "beos-x86_64" }, 1, `platform: platform "beos-x86_64": unknown OS`},
		{"dep kind", func(m *Manifest) { m.After = []Dep{{Kind: "before", Job: "1"}} }, 1, `after: 1: unknown kind "before"`},
		{"dep job", func(m *Manifest) { m.After = []Dep{{Kind: "afterok", Job: "x1"}} }, 1, `after: invalid job id "x1"`},
		{"dep both", func(m *Manifest) { m.After = []Dep{{Kind: "afterok", Job: "1", Entry: 1}} }, 2, "give a job or an earlier entry, not both"},
		{"dep on itself", func(m *Manifest) { m.After = []Dep{{Kind: "afterok", Entry: 1}} }, 1, "entry 1: a job may run after a job or an earlier entry"},
		{"dep on a later entry", func(m *Manifest) { m.After = []Dep{{Kind: "afterok", Entry: 3, Label: "//a:b"}} }, 2, "//a:b: a job may run after a job or an earlier entry"},
		{"constraint", func(m *Manifest) { m.Constraints = []string{"gpu"} }, 1, `constraints: "gpu": want NAME=VALUE`},
		{"min above max", func(m *Manifest) { m.Elastic, m.MinNodes, m.MaxNodes = true, 4, 2 }, 1, "min_nodes: min_nodes 4 is above max_nodes 2"},
		{"min without elastic", func(m *Manifest) { m.MinNodes = 2 }, 1, "min_nodes: min_nodes and max_nodes are for elastic jobs"},
		{"dep on a label only", func(m *Manifest) { m.After = []Dep{{Kind: "afterok", Label: "//a:b"}} }, 2, "//a:b: a job may run after a job or an earlier entry"},
	} {
		m := base()
		tc.edit(m)
		_, err := m.Job(tc.entry)
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a FieldError containing %q", tc.name, err, tc.want)
		}
	}

	m := base()
	m.Platform, m.Array = "Linux-AArch64", "0-5:2%2"
	m.After = []Dep{{Kind: "afterany", Job: "12_3"}, {Kind: "afterok", Entry: 1, Label: "//app:prepare"}}
	j, err := m.Job(2)
	if err != nil {
		t.Fatal(err)
	}
	s := j.Spec
	if e, err := (&Manifest{Version: Version, Name: "e", Command: []string{"x"}, CPUs: 1, Nodes: 1, Elastic: true, MinNodes: 2, MaxNodes: 8}).Job(1); err != nil ||
		!e.Spec.Elastic || e.Spec.MinNodes != 2 || e.Spec.Nodes != 8 {
		t.Fatalf("an elastic 2-8 node job: %v, %v", e, err)
	}
	if s.Platform != "linux-arm64" || s.Array.GetText() != "0-4:2%2" || s.Array.GetLimit() != 2 || fmt.Sprint(j.Indices) != "[0 2 4]" {
		t.Fatalf("typed: platform %q, array %v, indices %v", s.Platform, s.Array, j.Indices)
	}
	if d := s.Deps; len(d) != 2 || d[0].Kind != "afterany" || d[0].JobId != 12 || d[0].Index != 3 || d[1].PipelineEntry != 1 || d[1].Index != -1 {
		t.Fatalf("dependencies %v", d)
	}
}

func TestOverrides(t *testing.T) {
	target := func() *Manifest {
		return &Manifest{Version: Version, Label: "//app:train", Name: "train", Command: []string{"app/trainer"}, CPUs: 2,
			MemoryBytes: 1 << 30, Nodes: 1, MaxRetries: 3, TimeLimitMs: 600_000, Outputs: []string{"out"},
			Env: map[string]string{"A": "1"}, After: []Dep{{Kind: "afterok", Label: "//app:prepare", Entry: 1}}}
	}
	for _, tc := range []struct {
		name  string
		o     Overrides
		check func(m *Manifest) bool
	}{
		{"nothing given keeps the target's", Overrides{}, func(m *Manifest) bool {
			return m.CPUs == 2 && m.MaxRetries == 3 && m.TimeLimitMs == 600_000 && len(m.Outputs) == 1 && len(m.After) == 1 && m.Env["A"] == "1"
		}},
		{"scalars replace", Overrides{Name: "n", Queue: "gpu", CPUs: 4, MaxRetries: 1, TimeLimitMs: 7_200_000, MemoryBytes: 5}, func(m *Manifest) bool {
			return m.Name == "n" && m.Queue == "gpu" && m.CPUs == 4 && m.MaxRetries == 1 && m.TimeLimitMs == 7_200_000 && m.MemoryBytes == 5
		}},
		{"lists add", Overrides{Outputs: []string{"logs"}, After: []Dep{{Kind: "afterany", Job: "7"}}}, func(m *Manifest) bool {
			return strings.Join(m.Outputs, ",") == "out,logs" && len(m.After) == 2 && m.After[1].Job == "7"
		}},
		{"env sets over", Overrides{Env: map[string]string{"A": "2", "B": "3"}}, func(m *Manifest) bool {
			return m.Env["A"] == "2" && m.Env["B"] == "3"
		}},
		{"flags set on", Overrides{NoRequeue: true, Interactive: true}, func(m *Manifest) bool { return m.NoRequeue && m.Interactive }},
	} {
		m := target()
		tc.o.Apply(m)
		if !tc.check(m) {
			t.Errorf("%s: %+v", tc.name, m)
		}
	}
	// A bad override is caught by the manifest's own check.
	m := target()
	Overrides{MaxRetries: 101}.Apply(m)
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "max_retries: 101") {
		t.Fatalf("max_retries 101 over a target: %v", err)
	}
}

// numbers returns "0" to n-1 as strings.
func numbers(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

// A sweep is an array over its product, capped by an array of "%N" alone;
// the cache's key leaves its parameters to the tasks.
func TestSweepJob(t *testing.T) {
	m := &Manifest{Version: Version, Name: "x", Command: []string{"x", "{lr}"}, CPUs: 1, Nodes: 1, Array: "%2", Cache: "on",
		Sweep: []SweepParam{{"lr", []string{"0.1", "0.01", "0.001"}}, {"batch", []string{"32", "64"}}}}
	j, err := m.Job(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Indices) != 6 || j.Spec.Array.Text != "0-5%2" || j.Spec.Array.Limit != 2 || len(j.Spec.Sweep) != 2 || j.Spec.CacheKey == "" {
		t.Fatalf("sweep job: %v %v", j.Indices, j.Spec)
	}
	m.Sweep[0].Values = m.Sweep[0].Values[:2]
	k, err := m.Job(1)
	if err != nil || k.Spec.CacheKey != j.Spec.CacheKey || len(k.Indices) != 4 {
		t.Fatalf("a smaller sweep: %v, key changed %v", err, k.Spec.CacheKey != j.Spec.CacheKey)
	}
	m.Interactive, m.Cache, m.Sweep, m.Array = true, "", nil, ""
	i, err := m.Job(1)
	if err != nil {
		t.Fatal(err)
	}
	if i.Spec.CacheKey != "" {
		t.Fatalf("an interactive job has key %q", i.Spec.CacheKey)
	}
}
