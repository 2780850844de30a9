package tests

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/memlimit"
	"google.golang.org/protobuf/proto"
)

// usage is what a process holds at one moment, from its /metrics.
type usage struct {
	goroutines, fds, rss float64
	heap                 float64 // bytes of live objects in the Go heap
}

func (u usage) String() string {
	return fmt.Sprintf("%.0f goroutines, %.0f open files, %.1f MiB resident (%.1f MiB of it live in the Go heap)", u.goroutines, u.fds, u.rss/(1<<20), u.heap/(1<<20))
}

// within reports whether each of u's figures is within frac of base's.
func (u usage) within(base usage, frac float64) bool {
	return u.goroutines <= base.goroutines*(1+frac) && u.fds <= base.fds*(1+frac) && u.rss <= base.rss*(1+frac) && u.heap <= base.heap*(1+frac)
}

// scrapeUsage reads a process's usage from its /metrics under base, once
// it has collected its garbage (asked by its heap profile).
func scrapeUsage(t *testing.T, base, auth string) usage {
	t.Helper()
	get(t, base+"/debug/pprof/heap?gc=1", auth).Body.Close()
	resp := get(t, base+"/metrics", auth)
	defer resp.Body.Close()
	var u usage
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch name {
		case "go_goroutines":
			u.goroutines = v
		case "process_open_fds":
			u.fds = v
		case "process_resident_memory_bytes":
			u.rss = v
		case "go_memstats_heap_alloc_bytes":
			u.heap = v
		}
	}
	if u.goroutines == 0 || u.fds == 0 || u.rss == 0 || u.heap == 0 {
		t.Fatalf("%s/metrics lacks a figure: %+v", base, u)
	}
	return u
}

// get GETs url with the Authorization header auth (none for ""), failing
// the test unless it answers 200.
func get(t *testing.T, url, auth string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	return resp
}

var metricsURL = regexp.MustCompile(`msg="serving metrics" url=(\S+)/metrics`)

// executeActions runs n actions through the server's Execution service, 16
// at a time, each writing its own line to an output file, and checks each
// result.
func executeActions(t *testing.T, srv *server, tag string, n int) {
	t.Helper()
	conn, err := client.Dial(client.Options{Target: srv.Addr, Token: srv.token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	cas := client.NewCAS(conn, "")
	actions := make([]digest.Digest, n)
	var blobs []client.Blob
	for i := range n {
		cmd, _ := proto.Marshal(&repb.Command{Arguments: []string{"sh", "-c", `echo "$1" > out`, "sh", fmt.Sprintf("%s %d", tag, i)}, OutputPaths: []string{"out"}})
		cd := digest.FromBytes(cmd)
		action, _ := proto.Marshal(&repb.Action{CommandDigest: cd.Proto(), InputRootDigest: digest.Empty.Proto()})
		actions[i] = digest.FromBytes(action)
		blobs = append(blobs, client.Blob{Digest: cd, Data: cmd}, client.Blob{Digest: actions[i], Data: action})
		if len(blobs) >= 2000 || i == n-1 {
			if _, _, err := cas.Upload(ctx, blobs); err != nil {
				t.Fatal(err)
			}
			blobs = nil
		}
	}
	exec := repb.NewExecutionClient(conn)
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := executeOne(ctx, exec, actions[i]); err != nil {
					errs <- fmt.Errorf("action %d: %w", i, err)
					return
				}
			}
		}()
	}
	func() {
		defer close(next)
		for i := range n {
			select {
			case next <- i:
			case err := <-errs:
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

func executeOne(ctx context.Context, exec repb.ExecutionClient, action digest.Digest) error {
	st, err := exec.Execute(ctx, &repb.ExecuteRequest{ActionDigest: action.Proto(), SkipCacheLookup: true})
	if err != nil {
		return err
	}
	for {
		op, err := st.Recv()
		if err != nil {
			return err
		}
		if !op.Done {
			continue
		}
		var resp repb.ExecuteResponse
		if err := op.GetResponse().UnmarshalTo(&resp); err != nil {
			return err
		}
		if c := resp.GetStatus().GetCode(); c != 0 {
			return fmt.Errorf("status %d: %s", c, resp.GetStatus().GetMessage())
		}
		if r := resp.GetResult(); r.GetExitCode() != 0 || len(r.GetOutputFiles()) != 1 {
			return fmt.Errorf("result %v", r)
		}
		return nil
	}
}

// Over 10,000 array tasks and 10,000 actions, the server's and each
// worker's goroutines, open files and resident memory come back to within
// 5% of what they were after a first round of the same work, and the
// workers' scratch directories are empty. Ended jobs and finished
// operations are forgotten after 2s, so that what is left is what leaked,
// not what is kept.
func TestNoLeaks(t *testing.T) {
	srv := startServer(t, "--token", "leak-token", "--job-retention", "2s", "--operation-retention", "2s")
	auth := "Bearer leak-token"
	var workers []*worker
	urls := map[string]string{"server": "http://" + srv.Addr}
	for _, name := range []string{"w1", "w2"} {
		w := startWorker(t, srv, name, "--cpus", "8", "--job-slots", "8", "--action-slots", "8", "--metrics-listen", "127.0.0.1:0")
		m := metricsURL.FindStringSubmatch(w.log.String())
		if m == nil {
			t.Fatalf("worker %s names no metrics address:\n%s", name, w.log.String())
		}
		workers = append(workers, w)
		urls[name] = m[1]
	}
	measure := func() map[string]usage {
		got := map[string]usage{}
		for name, url := range urls {
			a := ""
			if name == "server" {
				a = auth
			}
			got[name] = scrapeUsage(t, url, a)
		}
		return got
	}
	round := func(n int) {
		t.Helper()
		done := make(chan struct{})
		go func() {
			defer close(done)
			executeActions(t, srv, "leak", n)
		}()
		array := submit(t, srv, "--array", fmt.Sprintf("0-%d", n-1), "--", "true")
		rbs(t, srv, "job", "wait", array)
		<-done
		// Every job ended is forgotten once the retention is up.
		eventually(t, "the ended jobs to be forgotten", func() bool {
			return strings.TrimSpace(rbs(t, srv, "job", "list", "--history", "--json")) == "[]"
		}, func() string { return "some are listed" })
	}

	// The first round brings each process to its working size: caches
	// filled, maps grown to the most they held. The second does the same
	// work again (each action runs again, the cache skipped), so that
	// what it adds is what leaks.
	const n = 10000
	round(n)
	base := measure()
	round(n)
	var after map[string]usage
	eventually(t, "each process to come back to within 5% of its baseline", func() bool {
		after = measure()
		for name, u := range after {
			if !u.within(base[name], 0.05) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("before %v\nafter  %v", base, after) })
	for name, u := range after {
		t.Logf("%s: before %v; after 10,000 jobs and 10,000 actions %v", name, base[name], u)
	}
	for _, w := range workers {
		// The worker keeps some directories and memory groups of ended
		// jobs to reuse, empty and no more than a bound; anything else is a
		// leak.
		if entries, err := os.ReadDir(filepath.Join(w.WorkDir, "exec")); err != nil || len(entries) != 0 {
			t.Errorf("worker %s's exec directory holds %d entries after the load (%v), want none", w.Name, len(entries), err)
		}
		entries, err := os.ReadDir(filepath.Join(w.WorkDir, "jobs"))
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > execroot.MaxSpares {
			t.Errorf("worker %s's jobs directory holds %d entries after the load, want at most the %d kept", w.Name, len(entries), execroot.MaxSpares)
		}
		for _, e := range entries {
			inside, err := os.ReadDir(filepath.Join(w.WorkDir, "jobs", e.Name()))
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") || err != nil || len(inside) != 0 {
				t.Errorf("worker %s's jobs directory holds %s (%v, %d entries) after the load, want only empty directories kept", w.Name, e.Name(), err, len(inside))
			}
		}
		left := jobGroups(t, w.cmd.Process.Pid)
		if len(left) > memlimit.MaxKept {
			t.Errorf("worker %s left %d job memory groups after the load, want at most the %d kept: %v", w.Name, len(left), memlimit.MaxKept, left)
		}
		for _, g := range left {
			if procs, err := os.ReadFile(filepath.Join(g, "cgroup.procs")); err != nil || len(procs) != 0 {
				t.Errorf("worker %s's memory group %s holds processes %q (%v) after the load", w.Name, g, procs, err)
			}
		}
	}
}

// jobGroups lists the memory groups under /sys/fs/cgroup that the worker
// of process pid made for its jobs (rbs-job-PID-...).
func jobGroups(t *testing.T, pid int) []string {
	t.Helper()
	prefix := fmt.Sprintf("rbs-job-%d-", pid)
	var found []string
	err := filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
