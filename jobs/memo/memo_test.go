package memo

import (
	"testing"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

func base() *jobspb.JobSpec {
	return &jobspb.JobSpec{
		Command: []string{"python", "train.py"}, Env: map[string]string{"LR": "0.1"}, InputRoot: "ab/12",
		Platform: "linux-amd64", Outputs: []string{"out"}, Cpus: 1, MemoryBytes: 1 << 30, Nodes: 1,
	}
}

// TestSpec checks which fields of a spec change its key: what decides the
// result does, where and when it runs does not.
func TestSpec(t *testing.T) {
	k := Spec(base(), "")
	for _, c := range []struct {
		name    string
		change  func(s *jobspb.JobSpec)
		version string
		same    bool
	}{
		{"command", func(s *jobspb.JobSpec) { s.Command = []string{"python", "train.py", "--fast"} }, "", false},
		{"argument boundaries", func(s *jobspb.JobSpec) { s.Command = []string{"python train.py"} }, "", false},
		{"script", func(s *jobspb.JobSpec) { s.Script = "#!/bin/sh\n" }, "", false},
		{"environment", func(s *jobspb.JobSpec) { s.Env["LR"] = "0.2" }, "", false},
		{"a new variable", func(s *jobspb.JobSpec) { s.Env["SEED"] = "1" }, "", false},
		{"input root", func(s *jobspb.JobSpec) { s.InputRoot = "cd/12" }, "", false},
		{"platform", func(s *jobspb.JobSpec) { s.Platform = "linux-arm64" }, "", false},
		{"image", func(s *jobspb.JobSpec) { s.Container = "localhost/train:1" }, "", false},
		{"outputs", func(s *jobspb.JobSpec) { s.Outputs = []string{"out", "ckpt"} }, "", false},
		{"nodes", func(s *jobspb.JobSpec) { s.Nodes = 2 }, "", false},
		{"cache version", func(s *jobspb.JobSpec) {}, "v2", false},
		{"RBS_ variables", func(s *jobspb.JobSpec) { s.Env["RBS_REMOTE"] = "h:1"; s.Env["RBS_JOB_ID"] = "7" }, "", true},
		{"SLURM_ variables", func(s *jobspb.JobSpec) { s.Env["SLURM_JOB_ID"] = "7" }, "", true},
		{"resources", func(s *jobspb.JobSpec) { s.Cpus, s.MemoryBytes, s.Gpus, s.TimeLimitMs = 8, 64<<30, 2, 3600000 }, "", true},
		{"queue and priority", func(s *jobspb.JobSpec) { s.Queue, s.Priority = "gpu", 10 }, "", true},
		{"user and name", func(s *jobspb.JobSpec) { s.User, s.Name = "bob", "x" }, "", true},
		{"sweep parameters", func(s *jobspb.JobSpec) { s.Sweep = []*jobspb.SweepParam{{Name: "lr", Values: []string{"1"}}} }, "", true},
	} {
		s := proto.Clone(base()).(*jobspb.JobSpec)
		c.change(s)
		if got := Spec(s, c.version) == k; got != c.same {
			t.Errorf("%s: same key = %v, want %v", c.name, got, c.same)
		}
	}
}

func TestTask(t *testing.T) {
	k := Spec(base(), "")
	keys := map[string]string{}
	for _, c := range []struct {
		name     string
		index    int32
		sweep    []string
		upstream []string
	}{
		{"plain", -1, nil, nil},
		{"task 0", 0, nil, nil},
		{"task 1", 1, nil, nil},
		{"after a job", -1, nil, []string{"ab/1"}},
		{"after another output", -1, nil, []string{"cd/1"}},
		{"sweep lr=0.1", 3, []string{"lr=0.1"}, nil},
		{"sweep lr=0.2", 3, []string{"lr=0.2"}, nil},
	} {
		key := Task(k, c.index, c.sweep, c.upstream)
		if other, dup := keys[key]; dup {
			t.Errorf("%s has the key of %s", c.name, other)
		}
		keys[key] = c.name
	}
	// A sweep task's key is its values', wherever the sweep puts it.
	if Task(k, 3, []string{"lr=0.1"}, nil) != Task(k, 5, []string{"lr=0.1"}, nil) {
		t.Error("a sweep task's key depends on its index")
	}
	if Scoped(k, "alice") == Scoped(k, "bob") || Scoped(k, "alice") == k {
		t.Error("users' keys are not apart")
	}
}
