package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeWithWorkers runs `rbs remote serve --workers 2`: its two
// in-process workers register under the data directory, an array's tasks
// run on both of them at once, a remote build's action runs in one of their
// work directories, and SIGTERM stops it all cleanly.
func TestServeWithWorkers(t *testing.T) {
	dir := t.TempDir()
	srv := startServerIn(t, dir, "--workers", "2")
	srv.waitRegistered(t, 2)

	var st struct {
		Workers []struct {
			Name     string `json:"name"`
			CPUs     int    `json:"cpus"`
			JobSlots struct {
				Total int `json:"total"`
			} `json:"job_slots"`
		} `json:"workers"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "remote", "status", "--json")), &st); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range st.Workers {
		names = append(names, w.Name)
		if w.CPUs < 1 || w.JobSlots.Total != w.CPUs {
			t.Fatalf("worker %s offers %d CPUs and %d job slots, want at least one CPU and a job slot per CPU", w.Name, w.CPUs, w.JobSlots.Total)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"w1", "w2"}) {
		t.Fatalf("workers %v, want w1 and w2", names)
	}

	// Each task takes all of a worker's CPUs and waits until the other has
	// started, so both end COMPLETED only if they ran at once, one on each
	// worker.
	marks := t.TempDir()
	arr := submit(t, srv, "--array", "0-1", "--cpus", fmt.Sprint(st.Workers[0].CPUs), "--", "sh", "-c",
		`: >"$1/started-$RBS_ARRAY_INDEX"; i=0; until [ -e "$1/started-0" ] && [ -e "$1/started-1" ]; do i=$((i+1)); [ $i -lt 1200 ] || exit 1; sleep 0.05; done`, "sh", marks)
	if _, _, err := rbsRun(srv, "job", "wait", arr); err != nil {
		t.Fatalf("array %s: %v: %+v %+v", arr, err, show(t, srv, arr+"_0"), show(t, srv, arr+"_1"))
	}
	var ranOn []string
	for i := 0; i < 2; i++ {
		j := show(t, srv, fmt.Sprintf("%s_%d", arr, i))
		if j.State != "COMPLETED" || len(j.Workers) != 1 {
			t.Fatalf("task %d: %+v", i, j)
		}
		ranOn = append(ranOn, j.Workers[0])
	}
	slices.Sort(ranOn)
	if !slices.Equal(ranOn, []string{"w1", "w2"}) {
		t.Fatalf("the array's tasks ran on %v, want one on each of w1 and w2", ranOn)
	}

	ws := newWorkspace(t)
	ws.write("where/BUILD.rbs", `genrule(name = "where", outs = ["where.txt"], cmd = "pwd > $@")`+"\n")
	ws.mustRbs("build", "--remote", srv.Addr, "//where")
	ran := strings.TrimSpace(ws.read("rbs-bin/where/where.txt"))
	workers, err := filepath.EvalSymlinks(filepath.Join(dir, "workers"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ran, workers+"/w1/") && !strings.HasPrefix(ran, workers+"/w2/") {
		t.Fatalf("the remote action ran in %s, outside the in-process workers' work dirs under %s", ran, workers)
	}
	if n := executedOnCluster(t, srv); n != 1 {
		t.Fatalf("the server counts %d executed actions, want 1", n)
	}

	if err := srv.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("rbs remote serve --workers 2 after SIGTERM: %v; log:\n%s", err, srv.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("rbs remote serve --workers 2 did not stop on SIGTERM; log:\n%s", srv.log.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "workers", "w2", "cache")); err != nil {
		t.Fatalf("no cache in the second worker's work dir: %v", err)
	}
}
