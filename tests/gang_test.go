package tests

import (
	"regexp"
	"strings"
	"testing"
)

// exchange is a two-rank exchange in plain Python through MASTER_ADDR and
// MASTER_PORT: rank 1 sends RANK+1 to rank 0, which adds its own and prints
// the sum, as an all_reduce of RANK+1 would give.
const exchange = `
import os, socket, sys, time
rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print("rank %d of %d, master %s:%d, nodes %s" % (rank, size, addr, port, os.environ["RBS_NODELIST"]), flush=True)
if rank == 0:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.listen()
    total = 1
    for _ in range(size - 1):
        c, _ = s.accept()
        total += int(c.recv(64).decode())
        c.close()
    print("sum of ranks + 1: %d" % total, flush=True)
else:
    deadline = time.time() + 60
    while True:
        try:
            c = socket.create_connection((addr, port))
            break
        except OSError:
            if time.time() > deadline:
                sys.exit("rank %d: cannot reach rank 0 at %s:%d" % (rank, addr, port))
            time.sleep(0.1)
    c.sendall(str(rank + 1).encode())
    c.close()
`

// A job of --nodes 2 runs on two workers at once: each rank gets its rank,
// the world size and where rank 0 is, the two exchange data through it, the
// job ends with rank 0, and the output of both ranks comes back
// interleaved, or one rank's alone.
func TestGang(t *testing.T) {
	python := requireTool(t, "python3")
	srv := startServer(t)
	w1 := startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	startWorker(t, srv, "w2", "--cpus", "2", "--job-slots", "2")
	// Where NVML finds no GPU, remote status says why.
	if m := regexp.MustCompile(`msg="no GPUs offered" reason="([^"]*)"`).FindStringSubmatch(w1.log.String()); m != nil {
		if st := rbs(t, srv, "remote", "status"); !strings.Contains(st, "no GPUs on w1, w2: "+m[1]) {
			t.Fatalf("remote status does not say why there are no GPUs (%s):\n%s", m[1], st)
		}
	}

	id := submit(t, srv, "--nodes", "2", "--", python, "-c", exchange)
	rbs(t, srv, "job", "wait", id)
	j := show(t, srv, id)
	if j.State != "COMPLETED" || len(j.Workers) != 2 || j.Workers[0] == j.Workers[1] {
		t.Fatalf("the 2-node job: %+v", j)
	}
	logs := rbs(t, srv, "job", "logs", id)
	line := regexp.MustCompile(`(?m)^\[rank (\d)\] rank (\d) of 2, master 127\.0\.0\.1:(\d+), nodes (\S+)$`)
	found := line.FindAllStringSubmatch(logs, -1)
	if len(found) != 2 || found[0][3] != found[1][3] || found[0][3] == "0" || found[0][4] != j.Workers[0]+","+j.Workers[1] {
		t.Fatalf("the ranks printed:\n%s", logs)
	}
	for _, f := range found {
		if f[1] != f[2] {
			t.Fatalf("a line of rank %s came from rank %s:\n%s", f[2], f[1], logs)
		}
	}
	if !strings.Contains(logs, "[rank 0] sum of ranks + 1: 3\n") {
		t.Fatalf("rank 0 did not get rank 1's data:\n%s", logs)
	}
	if one := rbs(t, srv, "job", "logs", "--rank", "1", id); !strings.HasPrefix(one, "rank 1 of 2, master") || strings.Contains(one, "[rank") || strings.Contains(one, "sum") {
		t.Fatalf("logs --rank 1:\n%s", one)
	}
	if shown := rbs(t, srv, "job", "show", id); !strings.Contains(shown, "rank 1: "+j.Workers[1]) || !strings.Contains(shown, "Nodes:       2") {
		t.Fatalf("job show of the gang:\n%s", shown)
	}

	// A rank other than 0 failing ends the gang at once, as that rank ended.
	failing := submit(t, srv, "--nodes", "2", "--", "sh", "-c", `if [ "$RANK" = 1 ]; then exit 5; fi; exec sleep 120`)
	rbsRun(srv, "job", "wait", failing) // fails, as the job does
	if f := show(t, srv, failing); f.State != "FAILED" || f.ExitCode != 5 {
		t.Fatalf("the gang whose rank 1 failed: %+v", f)
	}
	if shown := rbs(t, srv, "job", "show", failing); !strings.Contains(shown, "rank 1 on") {
		t.Fatalf("job show does not say rank 1 ended the gang:\n%s", shown)
	}

	// Elastic: 1 to 3 nodes on two workers starts on both, and says so.
	// (Rank 0 waits for rank 1 through the exchange: a rank 0 that ended
	// at once would stop rank 1, maybe before it printed anything.)
	elastic := submit(t, srv, "--nodes", "1-3", "--", python, "-c", exchange)
	rbs(t, srv, "job", "wait", elastic)
	if e := show(t, srv, elastic); len(e.Workers) != 2 {
		t.Fatalf("the 1-3 node job ran on %v", e.Workers)
	}
	if logs := rbs(t, srv, "job", "logs", elastic); !strings.Contains(logs, "[rank 1] rank 1 of 2, master") || !strings.Contains(logs, "[rank 0] sum of ranks + 1: 3\n") {
		t.Fatalf("the elastic job printed:\n%s", logs)
	}

	// More nodes than workers: it waits, and says why worker by worker.
	big := submit(t, srv, "--nodes", "3", "--", "true")
	waitFor(t, srv, big, "pending for want of workers", func(j jobView) bool { return j.PendingReason == "NoWorkerFits" })
	if shown := rbs(t, srv, "job", "show", big); !strings.Contains(shown, "Placement:   2 workers: could run it now") ||
		!strings.Contains(shown, "the job needs 3 workers at once") {
		t.Fatalf("job show of the 3-node job:\n%s", shown)
	}
	rbs(t, srv, "job", "cancel", big)
}

// --constraint NAME=VALUE keeps a job to the workers offering that
// property, and a job no worker satisfies says which property is lacking.
func TestJobConstraints(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "plain", "--cpus", "1", "--job-slots", "1")
	startWorker(t, srv, "fast", "--cpus", "1", "--job-slots", "1", "--property", "disk=nvme")
	id := submit(t, srv, "--constraint", "disk=nvme", "--", "true")
	rbs(t, srv, "job", "wait", id)
	if j := show(t, srv, id); len(j.Workers) != 1 || j.Workers[0] != "fast" {
		t.Fatalf("the job wanting disk=nvme ran on %v", j.Workers)
	}
	none := submit(t, srv, "--constraint", "disk=tape", "--", "true")
	waitFor(t, srv, none, "pending for want of the property", func(j jobView) bool { return j.PendingReason == "NoWorkerFits" })
	if shown := rbs(t, srv, "job", "show", none); !strings.Contains(shown, "2 workers: lacks the property disk=tape") {
		t.Fatalf("job show of the job no worker satisfies:\n%s", shown)
	}
	if _, stderr, err := rbsRun(srv, "job", "submit", "--constraint", "tape", "--", "true"); err == nil || !strings.Contains(stderr, `invalid --constraint: "tape": want NAME=VALUE`) {
		t.Fatalf("a bad --constraint: %v %s", err, stderr)
	}
}
