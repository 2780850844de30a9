package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// churnView is what the churn test reads of a job: its state and every
// attempt's end.
type churnView struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Message  string `json:"message"`
	Attempts int    `json:"attempts"`
	History  []struct {
		Attempt int    `json:"attempt"`
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"history"`
}

// For a minute (RBS_CHURN_FOR, a Go duration, for longer: bench/churn.sh
// runs ten) workers join, leave (SIGTERM) and are killed (SIGKILL) at
// random while arrays, 2-node gangs and GPU jobs run on them and on three
// workers that stay. Every job ends, each in a state its history explains:
// COMPLETED, after as many attempts as the history records, each earlier
// one ended by its worker's loss. Afterwards no slot or GPU is held: the
// scheduler's accounting shows none in use, on every worker.
func TestWorkerChurn(t *testing.T) {
	churnFor := time.Minute
	if v := os.Getenv("RBS_CHURN_FOR"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("RBS_CHURN_FOR=%q: want a positive Go duration such as 10m", v)
		}
		churnFor = d
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	srv := startServer(t, "--worker-timeout", "2s")
	shape := []string{"--cpus", "4", "--job-slots", "4", "--gpus", "2", "--action-slots", "0"}
	for i := range 3 {
		startWorker(t, srv, fmt.Sprintf("stays%d", i+1), shape...)
	}
	var ids []string
	submitWave := func(wave int) {
		ids = append(ids,
			submit(t, srv, "--array", "0-39%12", "--", "sh", "-c", "sleep 0.$(($$ % 5))"),
			submit(t, srv, "--nodes", "2", "--gpus", "1", "--", "sh", "-c", "sleep 0.$(($$ % 5))"),
			submit(t, srv, "--gpus", "1", "--", "sh", "-c", "sleep 0.$(($$ % 9))"),
		)
	}
	var churned []*worker
	next := 0
	counts := map[string]int{}
	end := time.Now().Add(churnFor)
	for wave := 0; time.Now().Before(end); wave++ {
		submitWave(wave)
		switch op := rng.IntN(3); {
		case op == 0 || len(churned) == 0:
			next++
			churned = append(churned, startWorker(t, srv, "churn"+strconv.Itoa(next), shape...))
			counts["joined"]++
		default:
			i := rng.IntN(len(churned))
			w := churned[i]
			churned = append(churned[:i], churned[i+1:]...)
			sig, what := syscall.SIGTERM, "left"
			if op == 2 {
				sig, what = syscall.SIGKILL, "killed"
			}
			w.cmd.Process.Signal(sig)
			w.cmd.Wait()
			counts[what]++
		}
		// The next change comes at a random moment.
		time.Sleep(time.Duration(200+rng.IntN(1300)) * time.Millisecond)
	}
	t.Logf("in %v: %d workers joined, %d left, %d were killed; %d submissions", churnFor, counts["joined"], counts["left"], counts["killed"], len(ids))

	rbs(t, srv, append([]string{"job", "wait"}, ids...)...)
	var listed []churnView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--history", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	requeued := 0
	for _, j := range listed {
		if j.State != "COMPLETED" {
			t.Errorf("job %s ended %s: %s", j.ID, j.State, j.Message)
			continue
		}
		var full churnView
		if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", j.ID)), &full); err != nil {
			t.Fatal(err)
		}
		if len(full.History) != full.Attempts {
			t.Errorf("job %s: %d attempts, %d in its history: %+v", j.ID, full.Attempts, len(full.History), full.History)
			continue
		}
		for i, a := range full.History {
			last := i == len(full.History)-1
			switch {
			case last && a.State != "COMPLETED":
				t.Errorf("job %s's last attempt ended %s", j.ID, a.State)
			case !last && !strings.Contains(a.Message, "worker"):
				t.Errorf("job %s's attempt %d ended %s (%q), which no worker's loss explains", j.ID, a.Attempt, a.State, a.Message)
			}
		}
		requeued += full.Attempts - 1
	}
	t.Logf("%d jobs and tasks, all COMPLETED; %d attempts requeued after their worker was lost", len(listed), requeued)

	// Nothing is held once everything has ended.
	eventually(t, "no slot or GPU to be held", func() bool {
		_, m := scrape(t, srv, "")
		return m[`rbs_slots_in_use{class="job"}`] == 0 && m["rbs_gpus_allocated"] == 0 && m["rbs_job_workers"] >= 3
	}, func() string {
		_, m := scrape(t, srv, "")
		return fmt.Sprintf("job slots in use %v, GPUs allocated %v", m[`rbs_slots_in_use{class="job"}`], m["rbs_gpus_allocated"])
	})
	status := rbs(t, srv, "remote", "status")
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		if len(f) > 3 && (strings.HasPrefix(f[0], "stays") || strings.HasPrefix(f[0], "churn")) && !strings.HasPrefix(f[2], "0/") {
			t.Errorf("worker %s holds job slots after the churn: %s", f[0], line)
		}
	}
	if t.Failed() {
		os.Stderr.WriteString(status)
	}
}
