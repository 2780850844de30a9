package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
)

// submitJobs has clients goroutines submit n jobs in all, each running
// command, and calls progress with the number acknowledged after each.
func submitJobs(t *testing.T, target string, clients, n int, command []string, progress func(int)) ([]int64, []time.Duration) {
	t.Helper()
	conn, err := client.Dial(client.Options{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	jobs := jobspb.NewJobsClient(conn)
	m, err := json.Marshal(&manifest.Manifest{Version: manifest.Version, Name: "load", Command: command, CPUs: 1, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		ids     []int64
		latency []time.Duration
		done    atomic.Int64
		wg      sync.WaitGroup
		failed  = make(chan error, clients)
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < n; i += clients {
				req := &jobspb.SubmitRequest{Manifests: [][]byte{m}, User: "load", IdempotencyKey: uuid.NewString()}
				start := time.Now()
				var r *jobspb.SubmitResponse
				var err error
				for {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					r, err = jobs.Submit(ctx, req)
					cancel()
					// The client retries UNAVAILABLE for a while itself; a
					// takeover of several seconds may outlast it.
					if err == nil || time.Since(start) > 2*time.Minute {
						break
					}
				}
				if err != nil {
					failed <- fmt.Errorf("submission %d: %w", i, err)
					return
				}
				mu.Lock()
				ids = append(ids, r.JobId)
				latency = append(latency, time.Since(start))
				mu.Unlock()
				if progress != nil {
					progress(int(done.Add(1)))
				}
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-failed:
		t.Fatal(err)
	default:
	}
	return ids, latency
}

// percentile returns the p-th percentile of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// 32 clients submit 20,000 jobs through the list of two servers sharing a
// PostgreSQL state while a remote Bazel build runs, and the active server
// is SIGKILLed three times at random moments, each time started again to
// stand by. No acknowledged job is lost or made twice, each runs once, and
// the build is green. The test logs the submissions' p50 and p99 latency
// with the kills, and before them (5,000 more jobs, the build running)
// without.
func TestFailoverUnderLoad(t *testing.T) {
	const clients, total, kills = 32, 20000, 3
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	ws := newBazelWorkspace(t)
	// 60 actions of 2 s each on 4 action slots: a build that lasts.
	if err := os.MkdirAll(filepath.Join(ws.dir, "load"), 0o755); err != nil {
		t.Fatal(err)
	}
	build := `[genrule(name = "s%d" % i, outs = ["s%d.txt" % i], cmd = "sleep 2; echo %d > $@" % i) for i in range(60)]` + "\n"
	if err := os.WriteFile(filepath.Join(ws.dir, "load", "BUILD"), []byte(build), 0o644); err != nil {
		t.Fatal(err)
	}
	storage := startServer(t)
	_, _, a, b, both := haPair(t, "--cas", "grpc://"+storage.Addr, "--ac", "grpc://"+storage.Addr)
	for _, name := range []string{"w1", "w2"} {
		startWorker(t, both, name, "--cpus", "8", "--job-slots", "8", "--action-slots", "2")
	}
	file := filepath.Join(t.TempDir(), "ran")
	command := []string{"sh", "-c", `echo "$RBS_JOB_ID" >> ` + file}

	type result struct {
		out string
		err error
	}
	began := time.Now()
	built := make(chan result, 1)
	var builtAt time.Duration
	go func() {
		out, err := ws.bazel("build", "--remote_executor=grpc://"+b.Addr, "--remote_retries=30", "--jobs=8", "//load:all")
		builtAt = time.Since(began).Round(time.Millisecond)
		built <- result{out, err}
	}()

	// Without kills first, for the latency to compare, the build running.
	calm, calmLatency := submitJobs(t, both.Addr, clients, 5000, command, nil)

	// Each kill comes once a random share of the submissions is in, the
	// one before it having been taken over and its server standing by
	// again.
	var at []int
	for k := range kills {
		at = append(at, total*(k+1)/(kills+1)+rng.IntN(total/(kills+1)/2)-total/(kills+1)/4)
	}
	killNow := make(chan struct{}, kills)
	var next atomic.Int64
	progress := func(done int) {
		if k := int(next.Load()); k < kills && done >= at[k] && next.CompareAndSwap(int64(k), int64(k+1)) {
			killNow <- struct{}{}
		}
	}
	killed := make(chan error, 1)
	var killedAt []time.Duration
	go func() {
		active, standby := a, b
		for range kills {
			<-killNow
			active.cmd.Process.Signal(syscall.SIGKILL)
			active.cmd.Wait()
			killedAt = append(killedAt, time.Since(began).Round(time.Millisecond))
			took := strings.Count(standby.log.String(), "active: took the lease")
			deadline := time.Now().Add(time.Minute)
			for strings.Count(standby.log.String(), "active: took the lease") == took {
				if time.Now().After(deadline) {
					killed <- fmt.Errorf("the standby did not take over:\n%s", standby.log.String())
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The killed server comes back on its address, to stand by.
			waiting := strings.Count(active.log.String(), "standing by")
			active.start(t, active.Addr)
			for strings.Count(active.log.String(), "standing by") == waiting {
				if time.Now().After(deadline) {
					killed <- fmt.Errorf("the restarted server did not stand by:\n%s", active.log.String())
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			active, standby = standby, active
		}
		killed <- nil
	}()
	ids, latency := submitJobs(t, both.Addr, clients, total, command, progress)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	t.Logf("submit latency without kills: p50 %v, p99 %v, max %v (%d jobs); with %d kills: p50 %v, p99 %v, max %v (%d jobs)",
		percentile(calmLatency, 0.5).Round(time.Microsecond), percentile(calmLatency, 0.99).Round(time.Microsecond), percentile(calmLatency, 1).Round(time.Microsecond), len(calm),
		kills, percentile(latency, 0.5).Round(time.Microsecond), percentile(latency, 0.99).Round(time.Microsecond), percentile(latency, 1).Round(time.Microsecond), len(ids))
	t.Logf("the active server killed at %v; submissions done at %v", killedAt, time.Since(began).Round(time.Millisecond))

	all := append(calm, ids...)
	seen := map[int64]bool{}
	var args []string
	for _, id := range all {
		if seen[id] {
			t.Fatalf("job %d was acknowledged twice", id)
		}
		seen[id] = true
		args = append(args, strconv.FormatInt(id, 10))
	}
	for len(args) > 0 {
		n := min(len(args), 2000)
		if _, stderr, err := rbsRun(both, append([]string{"job", "wait"}, args[:n]...)...); err != nil {
			t.Fatalf("rbs job wait: %v\n%s", err, stderr)
		}
		args = args[n:]
	}
	var listed []jobView
	if err := json.Unmarshal([]byte(rbs(t, both, "job", "list", "--history", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed) != len(all) {
		t.Errorf("%d jobs listed, want the %d acknowledged: none lost, none made twice", len(listed), len(all))
	}
	for _, j := range listed {
		if j.State != "COMPLETED" {
			t.Errorf("job %s: %+v", j.ID, j)
		}
	}
	b2, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, l := range strings.Fields(string(b2)) {
		runs[l]++
	}
	for id := range seen {
		if n := runs[strconv.FormatInt(id, 10)]; n != 1 {
			t.Errorf("job %d ran %d times", id, n)
		}
	}
	if len(runs) != len(all) {
		t.Errorf("%d jobs ran, want %d", len(runs), len(all))
	}
	r := <-built
	if r.err != nil {
		t.Fatalf("the build across the kills failed: %v\n%s", r.err, r.out)
	}
	t.Logf("the Bazel build ended green at %v", builtAt)
}
