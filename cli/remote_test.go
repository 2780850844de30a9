package cli

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rbs-build/rbs/proto/workerpb"
)

func TestEmbeddedWorkers(t *testing.T) {
	gpus := []*workerpb.Gpu{{Index: 0}, {Index: 1}, {Index: 2}}
	ws := embeddedWorkers(3, "/data", 8, 3<<30, gpus)
	wantCPUs := []int{3, 3, 2}
	wantGPUs := [][]int32{{0}, {1}, {2}}
	for i, w := range ws {
		name := []string{"w1", "w2", "w3"}[i]
		if w.cmd.Name != name || w.cmd.WorkDir != filepath.Join("/data", "workers", name) {
			t.Errorf("worker %d: name %q, work dir %q", i, w.cmd.Name, w.cmd.WorkDir)
		}
		if w.cmd.CPUs != wantCPUs[i] || w.cmd.MemoryGB != 1<<30 {
			t.Errorf("worker %s: %d CPUs, %d bytes, want %d and 1GiB", name, w.cmd.CPUs, w.cmd.MemoryGB, wantCPUs[i])
		}
		var idx []int32
		for _, g := range w.gpus {
			idx = append(idx, g.Index)
		}
		if len(idx) != len(wantGPUs[i]) || idx[0] != wantGPUs[i][0] {
			t.Errorf("worker %s offers GPUs %v, want %v", name, idx, wantGPUs[i])
		}
		cfg, err := w.cmd.configOffering(w.gpus)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.ActionSlots != wantCPUs[i] || cfg.JobSlots != wantCPUs[i] || cfg.CacheMaxSize != defaultWorkerCache/3 || cfg.MemoryBytes != 1<<30 {
			t.Errorf("worker %s: %d action slots, %d job slots, cache %d, memory %d", name, cfg.ActionSlots, cfg.JobSlots, cfg.CacheMaxSize, cfg.MemoryBytes)
		}
	}

	// More workers than CPUs: each still offers one; GPUs run out.
	ws = embeddedWorkers(4, "/data", 2, 0, gpus[:1])
	for i, w := range ws {
		if w.cmd.CPUs != 1 {
			t.Errorf("worker %s of 4 on 2 CPUs offers %d", w.cmd.Name, w.cmd.CPUs)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 0]; len(w.gpus) != want {
			t.Errorf("worker %s offers %d GPUs, want %d", w.cmd.Name, len(w.gpus), want)
		}
	}
}

func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		err    string
	}{
		{"text", ""},
		{"json", ""},
		{"xml", `--log-format "xml": want text or json`},
		{"", `--log-format "": want text or json`},
	} {
		log, err := newLogger(tc.format)
		if tc.err == "" && (err != nil || log == nil) {
			t.Errorf("--log-format %s: %v", tc.format, err)
		}
		if tc.err != "" && (err == nil || err.Error() != tc.err) {
			t.Errorf("--log-format %q: %v, want %s", tc.format, err, tc.err)
		}
	}
}

// A bad --cas or --ac is refused before anything is opened, naming the flag,
// the spec and what is wrong with it.
func TestServeStoreSpecs(t *testing.T) {
	for _, tc := range []struct {
		cmd  RemoteServeCmd
		want string
	}{
		{RemoteServeCmd{CAS: "mirror(disk:/a)"}, `--cas "mirror(disk:/a)": mirror takes exactly two backends, got 1 (column 1)`},
		{RemoteServeCmd{AC: "disk:/a?max_size=big"}, `--ac "disk:/a?max_size=big": disk:/a?max_size=big: max_size: invalid size "big": unknown unit "big" (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB) (column 1)`},
	} {
		tc.cmd.LogFormat = "text"
		tc.cmd.DataDir = t.TempDir()
		if err := tc.cmd.Run(); err == nil || err.Error() != tc.want {
			t.Errorf("Run: %v\nwant %s", err, tc.want)
		}
	}
}

// A worker's metrics are served on loopback only, with the process's and
// the Go runtime's figures.
func TestServeProcessMetrics(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "8.8.8.8:0"} {
		if _, err := serveProcessMetrics(t.Context(), listen); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("--metrics-listen %s: %v; want it refused for not being loopback", listen, err)
		}
	}
	addr, err := serveProcessMetrics(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"go_goroutines ", "process_open_fds ", "process_resident_memory_bytes "} {
		if !strings.Contains(string(b), "\n"+name) {
			t.Errorf("/metrics has no %s:\n%s", name, b)
		}
	}
}
