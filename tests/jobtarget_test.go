package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A job target's manifest is what the scheduler consumes: rbs build writes
// it, rbs job submit builds, uploads the input root and submits it, with
// flags given over it; the training run's outputs come back with rbs job
// outputs.
func TestJobTarget(t *testing.T) {
	requireTool(t, "python3")
	srv := startServer(t)
	startWorker(t, srv, "w1")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	env := []string{"RBS_REMOTE=" + srv.Addr}
	in := func(args ...string) string {
		t.Helper()
		out, err := run(t, ws, env, rbsBin, args...)
		if err != nil {
			t.Fatalf("rbs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	in("build", "//app:train")
	var m struct {
		Version   int      `json:"version"`
		Command   []string `json:"command"`
		InputRoot string   `json:"input_root"`
		Memory    int64    `json:"memory_bytes"`
	}
	b, err := os.ReadFile(filepath.Join(ws, "rbs-bin/app/train.job.json"))
	if err != nil || json.Unmarshal(b, &m) != nil || m.Version != 1 || m.Command[0] != "app/trainer" || m.InputRoot == "" || m.Memory != 1<<30 {
		t.Fatalf("the manifest of //app:train: %v\n%s", err, b)
	}

	out := in("job", "submit", "--parsable", "--time", "5m", "//app:train")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := lines[len(lines)-1]
	rbs(t, srv, "job", "wait", id)
	var j struct {
		State     string `json:"state"`
		TimeLimit int64  `json:"time_limit_seconds"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil || j.State != "COMPLETED" || j.TimeLimit != 300 {
		t.Fatalf("the job target's job: %+v, %v (want COMPLETED, the --time 5m over the manifest's 10m)", j, err)
	}
	if logs := rbs(t, srv, "job", "logs", id); !strings.Contains(logs, "epoch 30 loss") {
		t.Fatalf("the training run printed:\n%s", logs)
	}
	dest := filepath.Join(t.TempDir(), "got")
	rbs(t, srv, "job", "outputs", id, "--dest", dest)
	var metrics struct {
		W, B   float64
		Epochs int
	}
	if b, err := os.ReadFile(filepath.Join(dest, "out", "metrics.json")); err != nil || json.Unmarshal(b, &metrics) != nil ||
		metrics.Epochs != 30 || metrics.W < 2.8 || metrics.W > 3.2 {
		t.Fatalf("metrics.json: %v %+v", err, metrics)
	}

	// A target that is not a job, and bad attributes, named with the target.
	if out, err := run(t, ws, env, rbsBin, "job", "submit", "//app:greet"); err == nil || !strings.Contains(out, "//app:greet is not a job target") {
		t.Fatalf("submitting a py_binary: %v\n%s", err, out)
	}
	for _, tc := range []struct{ attrs, want string }{
		{`memory = "4Q"`, `//bad:job: memory: invalid size "4Q"`},
		{`nodes = 0`, `//bad:job: nodes: 0: want at least 1`},
		{`min_nodes = 4, max_nodes = 2`, `//bad:job: min_nodes: min_nodes 4 is above max_nodes 2`},
		{`cpu = "lots"`, `//bad:job: cpu: "lots"`},
		{`time_limit = "forever"`, `//bad:job: time_limit:`},
	} {
		os.MkdirAll(filepath.Join(ws, "bad"), 0o755)
		os.WriteFile(filepath.Join(ws, "bad", "BUILD.rbs"), []byte(`load("@rbs//job/rules.rbs", "batch_job")
batch_job(name = "job", binary = "//app:trainer", `+tc.attrs+`)
`), 0o644)
		if out, err := run(t, ws, env, rbsBin, "build", "//bad:job"); err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %v\n%s", tc.attrs, err, out)
		}
	}
	// A partition is a queue of the server: an unknown one is an error
	// naming the target and the attribute once the server is asked.
	os.WriteFile(filepath.Join(ws, "bad", "BUILD.rbs"), []byte(`load("@rbs//job/rules.rbs", "batch_job")
batch_job(name = "job", binary = "//app:step", partition = "nope")
`), 0o644)
	want := `//bad:job: partition: unknown queue "nope" (the server's queues: batch)`
	if out, err := run(t, ws, env, rbsBin, "job", "submit", "//bad:job"); err == nil || !strings.Contains(out, want) {
		t.Errorf("an unknown partition: %v, want %q\n%s", err, want, out)
	}
}

// A job_pipeline is submitted in one request: each job with the ones it
// runs after, their dependencies mapped to the new ids.
func TestJobPipeline(t *testing.T) {
	requireTool(t, "python3")
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	env := []string{"RBS_REMOTE=" + srv.Addr}
	out, err := run(t, ws, env, rbsBin, "job", "submit", "//app:pipeline")
	if err != nil {
		t.Fatalf("submitting the pipeline: %v\n%s", err, out)
	}
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] != "JOBID" && !strings.HasPrefix(line, "rbs:") && !strings.HasPrefix(line, "Built") {
			ids = append(ids, f[0])
		}
	}
	if len(ids) != 3 || !strings.Contains(out, "fit       afterok:"+ids[0]) || !strings.Contains(out, "evaluate  afterany:"+ids[1]) {
		t.Fatalf("the pipeline's table:\n%s", out)
	}
	rbs(t, srv, append([]string{"job", "wait"}, ids...)...)
	var jobs []jobView
	for _, id := range ids {
		jobs = append(jobs, show(t, srv, id))
	}
	if *jobs[1].StartTime < *jobs[0].EndTime || *jobs[2].StartTime < *jobs[1].EndTime {
		t.Fatalf("the pipeline ran out of order: %+v", jobs)
	}
	if d := jobs[1].Dependencies; len(d) != 1 || d[0].Kind != "afterok" || d[0].ID != ids[0] {
		t.Fatalf("fit's dependencies %+v", d)
	}
	if logs := rbs(t, srv, "job", "logs", ids[2]); !strings.HasPrefix(logs, "evaluate: running") {
		t.Fatalf("evaluate printed %q", logs)
	}

	// A job target with jobs it runs after brings them along.
	out, err = run(t, ws, env, rbsBin, "job", "submit", "--parsable", "//app:fit")
	if err != nil || strings.Count(out, "\n") < 2 {
		t.Fatalf("submitting //app:fit: %v\n%s", err, out)
	}
}

// A gpu_job goes to the gpu queue with one GPU: the worker shows the job
// the GPU it was given (a GPU known by index, as --gpus N offers without
// NVIDIA's library).
func TestGPUJobTarget(t *testing.T) {
	requireTool(t, "python3")
	cfg := filepath.Join(t.TempDir(), "cluster.rbs")
	os.WriteFile(cfg, []byte("queue(name = \"batch\", default = True)\nqueue(name = \"gpu\", priority = 10)\n"), 0o644)
	srv := startServer(t, "--config", cfg)
	startWorker(t, srv, "gpu1", "--gpus", "1", "--memory-gb", "8")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	os.MkdirAll(filepath.Join(ws, "gpu"), 0o755)
	os.WriteFile(filepath.Join(ws, "gpu", "show.sh"), []byte("#!/bin/sh\necho \"devices=$CUDA_VISIBLE_DEVICES\"\n"), 0o755)
	os.WriteFile(filepath.Join(ws, "gpu", "BUILD.rbs"), []byte(`load("@rbs//job/rules.rbs", "gpu_job")
sh_binary(name = "show", srcs = ["show.sh"])
gpu_job(name = "train", binary = ":show", memory = "1Gi")
`), 0o644)
	env := []string{"RBS_REMOTE=" + srv.Addr}
	out, err := run(t, ws, env, rbsBin, "job", "submit", "--parsable", "//gpu:train")
	if err != nil {
		t.Fatalf("rbs job submit //gpu:train: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	id := lines[len(lines)-1]
	rbs(t, srv, "job", "wait", id)
	var j struct {
		State      string  `json:"state"`
		Queue      string  `json:"queue"`
		GPUs       int32   `json:"gpus"`
		GPUIndices []int32 `json:"gpu_indices"`
		MaxRetries int32   `json:"max_retries"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil || j.State != "COMPLETED" ||
		j.Queue != "gpu" || j.GPUs != 1 || len(j.GPUIndices) != 1 || j.MaxRetries != 3 {
		t.Fatalf("the gpu_job: %+v, %v; want COMPLETED on the gpu queue with one GPU and 3 retries", j, err)
	}
	if logs := rbs(t, srv, "job", "logs", id); logs != fmt.Sprintf("devices=%d\n", j.GPUIndices[0]) {
		t.Fatalf("the job printed %q, want its GPU %d", logs, j.GPUIndices[0])
	}
}
