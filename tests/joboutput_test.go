package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

type outputView struct {
	State        string `json:"state"`
	Bytes        int64  `json:"output_bytes"`
	Truncated    bool   `json:"output_truncated"`
	DroppedBytes int64  `json:"output_dropped_bytes"`
}

func showOutput(t *testing.T, srv *server, id string) outputView {
	t.Helper()
	var v outputView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// numbered is what `seq -f %015g FROM TO` prints: 16-byte lines.
func numbered(from, to int) string {
	var b strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&b, "%015d\n", i)
	}
	return b.String()
}

// TestJobOutputCap runs jobs that write more than the server's
// --max-job-output, one of them across a restart of the server, and checks
// that their logs keep the head and the tail with a line saying what was
// dropped between, that show says so, and that the server stored no more.
func TestJobOutputCap(t *testing.T) {
	srv := startServer(t, "--max-job-output", "64KiB")
	startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	marker := func(n int) string {
		return fmt.Sprintf("\n[rbs: %d bytes of output dropped here: over --max-job-output]\n", n)
	}
	dir := t.TempDir()
	gate := filepath.Join(dir, "go")
	for _, tc := range []struct {
		name    string
		command string
		restart bool // restart the server once the head is stored; the job then goes on
		want    string
		written int
	}{
		// 65,536 lines of 16 bytes: 1 MiB, of which the first and last 32 KiB stay.
		{"1 MiB", "seq -f %015g 1 65536", false, numbered(1, 2048) + marker(1<<20-64<<10) + numbered(63489, 65536), 1 << 20},
		{"under the cap", "seq -f %015g 1 4096", false, numbered(1, 4096), 64 << 10},
		{"2 MiB across a restart", "seq -f %015g 1 65536; while [ ! -e " + gate + " ]; do sleep 0.05; done; seq -f %015g 65537 131072", true,
			numbered(1, 2048) + marker(2<<20-64<<10) + numbered(129025, 131072), 2 << 20},
	} {
		id := submit(t, srv, "--", "sh", "-c", tc.command)
		if tc.restart {
			waitFor(t, srv, id, "its head stored", func(jobView) bool { return showOutput(t, srv, id).Bytes == 32<<10 })
			srv.cmd.Process.Signal(syscall.SIGKILL)
			srv.cmd.Wait()
			srv.start(t, srv.Addr)
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rbs(t, srv, "job", "wait", id)
		if got := rbs(t, srv, "job", "logs", id); got != tc.want {
			i := 0
			for i < min(len(got), len(tc.want)) && got[i] == tc.want[i] {
				i++
			}
			t.Errorf("%s: logs have %d bytes, want %d; from byte %d they read %.200q, want %.200q", tc.name, len(got), len(tc.want), i, got[i:], tc.want[i:])
		}
		dropped := int64(tc.written - 64<<10)
		if v := showOutput(t, srv, id); v.Bytes != int64(tc.written) || v.Truncated != (dropped > 0) || v.DroppedBytes != dropped {
			t.Errorf("%s: show --json %+v, want %d bytes written and %d dropped", tc.name, v, tc.written, dropped)
		}
		if text := rbs(t, srv, "job", "show", id); dropped > 0 && !strings.Contains(text, fmt.Sprintf("truncated: %d bytes", dropped)) {
			t.Errorf("%s: show does not say the output was truncated:\n%s", tc.name, text)
		}
	}

	// 3 MiB of output went to the server; it stored about 3 × 64 KiB.
	var size int64
	for _, name := range []string{"jobs.db", "jobs.db-wal"} {
		if fi, err := os.Stat(filepath.Join(srv.DataDir, name)); err == nil {
			size += fi.Size()
		}
	}
	if size > 1<<20 {
		t.Errorf("the job database takes %d KiB for jobs capped at 64 KiB of output each", size>>10)
	}
}
