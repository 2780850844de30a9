package tests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// distMetrics is what examples/app/train_dist.py's rank 0 writes.
type distMetrics struct {
	W, B           float64
	Epochs         int    `json:"epochs"`
	WorldSize      int    `json:"world_size"`
	Backend        string `json:"backend"`
	AllreduceCheck int    `json:"allreduce_check"`
}

// metricsOf downloads a job's outputs and reads out/metrics.json.
func metricsOf(t *testing.T, srv *server, id string) distMetrics {
	t.Helper()
	dest := filepath.Join(t.TempDir(), "outputs")
	rbs(t, srv, "job", "outputs", id, "--dest", dest)
	var m distMetrics
	b, err := os.ReadFile(filepath.Join(dest, "out", "metrics.json"))
	if err != nil || json.Unmarshal(b, &m) != nil {
		t.Fatalf("metrics.json of job %s: %v %s", id, err, b)
	}
	return m
}

// A gang that real torchrun runs in: two workers, one torchrun each, given
// its node rank and rank 0's address and port by rbs; the two ranks
// all_reduce with torch.distributed (gloo) and train data-parallel. Then
// the same trainer without torchrun, from the plain RANK/WORLD_SIZE
// environment.
func TestTorchrunGang(t *testing.T) {
	torchrun := requireTool(t, "torchrun")
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	startWorker(t, srv, "w2", "--cpus", "2", "--job-slots", "2")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "data"), 0o755)
	copyFile(t, "../examples/app/train_dist.py", filepath.Join(dir, "train_dist.py"))
	copyFile(t, "../examples/app/data/points.csv", filepath.Join(dir, "data", "points.csv"))
	// torch lives with the system's Python, which torchrun runs.
	python := filepath.Join(filepath.Dir(torchrun), "python3")
	train := "train_dist.py --backend torch --data data/points.csv --epochs 10"

	for _, tc := range []struct{ name, cmd string }{
		{"torchrun", torchrun + ` --nnodes 2 --nproc_per_node 1 --node_rank "$RBS_NODE_RANK" --master_addr "$RBS_MASTER_ADDR" --master_port "$RBS_MASTER_PORT" --redirects 1 --tee 1 --log_dir tlogs ` + train},
		{"plain", python + " " + train},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, srv, "--nodes", "2", "--inputs", dir, "--outputs", "out", "--", "sh", "-c", tc.cmd)
			if _, stderr, err := rbsRun(srv, "job", "wait", id); err != nil {
				t.Fatalf("the gang: %v %s\n%s", err, stderr, rbs(t, srv, "job", "logs", id))
			}
			logs := rbs(t, srv, "job", "logs", id)
			for _, rank := range []string{"0", "1"} {
				if !strings.Contains(logs, "rank "+rank+": all_reduce check: 3 (world size 2)") {
					t.Fatalf("rank %s did not all_reduce:\n%s", rank, logs)
				}
			}
			m := metricsOf(t, srv, id)
			if m.Backend != "torch" || m.WorldSize != 2 || m.AllreduceCheck != 3 || m.Epochs != 10 || m.W < 2.5 || m.W > 3.5 {
				t.Fatalf("metrics %+v", m)
			}
			if j := show(t, srv, id); len(j.Workers) != 2 || j.Workers[0] == j.Workers[1] {
				t.Fatalf("the gang ran on %v", j.Workers)
			}
		})
	}
}

// copyFile copies the file src to dst.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
