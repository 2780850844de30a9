package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// mountTmpfs mounts a tmpfs of the given size (such as "30m") on a fresh
// directory for the test's life. It needs root; without it the test skips,
// or fails under RBS_TEST_REQUIRE_ALL=1.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatalf("mounting a tmpfs is required (RBS_TEST_REQUIRE_ALL=1): %v %s", err, out)
		}
		t.Skipf("cannot mount a tmpfs (%v %s); set RBS_TEST_REQUIRE_ALL=1 to make this a failure", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes to path until its file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}

// A data directory on a small tmpfs is filled while jobs run and clients
// submit and upload. The server keeps serving: submissions are refused with
// RESOURCE_EXHAUSTED and nothing acknowledged is lost, the CAS makes room by
// evicting old blobs and says when it cannot, reads and running jobs go on,
// and once space is freed the server takes submissions again by itself.
func TestFullDisk(t *testing.T) {
	data := mountTmpfs(t, "30m")
	srv := startServerIn(t, data)
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	release := filepath.Join(t.TempDir(), "release")
	long := submit(t, srv, "--", "sh", "-c", `echo started; while [ ! -e "$1" ]; do sleep 0.05; done; echo done`, "sh", release)
	waitFor(t, srv, long, "RUNNING", inState("RUNNING"))

	conn, err := client.Dial(client.Options{Target: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cas := client.NewCAS(conn, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	blob := func(n int) client.Blob {
		b := make([]byte, n)
		rand.Read(b)
		return client.Blob{Digest: digest.FromBytes(b), Data: b}
	}
	var old []client.Blob
	for i := 0; i < 4; i++ {
		b := blob(1 << 20)
		if err := cas.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		old = append(old, b)
	}

	big := strings.Repeat("x", 100_000)
	var acked []string
	for i := 0; i < 3; i++ {
		acked = append(acked, submit(t, srv, "--env", "BIG="+big, "--", "true"))
	}

	filler := filepath.Join(data, "filler")
	fill(t, filler)
	// The CAS makes room for a new blob by evicting the oldest.
	if err := cas.Write(ctx, blob(1<<20)); err != nil {
		t.Fatalf("a blob on a full disk with older blobs to evict: %v", err)
	}
	if missing, err := cas.FindMissing(ctx, []digest.Digest{old[0].Digest}); err != nil || len(missing) != 1 {
		t.Fatalf("the least recently used blob was not evicted: missing %v, %v", missing, err)
	}
	fill(t, filler)

	// Submissions go on until the job store runs out of room; each one
	// acknowledged must survive.
	for {
		out, stderr, err := rbsRun(srv, "job", "submit", "--parsable", "--env", "BIG="+big, "--", "true")
		if err == nil {
			acked = append(acked, strings.TrimSpace(out))
			if len(acked) > 303 {
				t.Fatal("300 submissions of 100 KB each fitted on a full 30 MB disk")
			}
			continue
		}
		if !strings.Contains(stderr, "disk is full") {
			t.Fatalf("a submission on a full disk: %v: %s", err, stderr)
		}
		break
	}
	t.Logf("%d submissions acknowledged before the job store was full", len(acked)-3)

	// Reads still work, and the server still serves.
	rbs(t, srv, "job", "list")
	if j := show(t, srv, long); j.State != "RUNNING" {
		t.Fatalf("the running job on a full disk: %+v", j)
	}
	// A blob larger than all there is to evict is refused, without the
	// server's paths in the message.
	err = cas.Write(ctx, blob(12<<20))
	if status.Code(err) != codes.ResourceExhausted || strings.Contains(err.Error(), data) {
		t.Fatalf("a blob that cannot fit: %v, want RESOURCE_EXHAUSTED without server paths", err)
	}
	fill(t, filler)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// Once space is freed, submissions are taken again, with no restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	var after string
	for {
		out, stderr, err := rbsRun(srv, "job", "submit", "--parsable", "--", "echo", "after")
		if err == nil {
			after = strings.TrimSpace(out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("submissions still refused a minute after space was freed: %s", stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rbs(t, srv, "job", "wait", long, after)
	if got := rbs(t, srv, "job", "logs", long); got != "started\ndone\n" {
		t.Fatalf("the output of the job that ran through the full disk: %q", got)
	}

	// Everything acknowledged is there, before and after a crash.
	want := append(append([]string{long}, acked...), after)
	check := func(when string) {
		t.Helper()
		var listed []struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--history", "--json")), &listed); err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, j := range listed {
			have[j.ID] = true
		}
		for _, id := range want {
			if !have[id] {
				t.Errorf("%s: acknowledged job %s is gone", when, id)
			}
		}
		if len(listed) != len(want) {
			t.Errorf("%s: %d jobs listed, want the %d acknowledged", when, len(listed), len(want))
		}
	}
	check("after the disk was freed")
	srv.cmd.Process.Signal(syscall.SIGKILL)
	srv.cmd.Wait()
	srv.start(t, "127.0.0.1:0")
	check("after a crash")
	if !bytes.Contains([]byte(srv.log.String()), []byte("listening")) {
		t.Fatal("the restarted server did not start")
	}
}
