package session

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A job target built by the session is submitted with the manifest and
// input root its build made, without reading the manifest back or
// walking its runfiles again: removed from disk after the build, it is
// still there to submit.
func TestJobReusesTheBuild(t *testing.T) {
	root := workspace(t, map[string]string{
		"MODULE.bazel": "",
		"pkg/BUILD.rbs": `load("@rbs//job/rules.rbs", "batch_job")
sh_binary(name = "step", srcs = ["step.sh"], data = ["data.txt"])
batch_job(name = "job", binary = ":step", args = ["go"])
`,
		"pkg/step.sh":  "#!/bin/sh\ncat data.txt\n",
		"pkg/data.txt": "data\n",
	})
	s, err := Open(Options{Dir: root, Jobs: 2, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	sum, err := s.Build(ctx, []string{"//pkg:job"}, false)
	if err != nil {
		t.Fatal(err)
	}
	built := s.jobs["//pkg:job"]
	if built.Tree == nil || built.Manifest == nil || built.Manifest.InputRoot != built.Tree.Root.String() {
		t.Fatalf("the build kept %+v for //pkg:job", built)
	}
	if err := os.Remove(filepath.Join(root, s.ManifestPath(sum.Targets[0].Label))); err != nil {
		t.Fatal(err)
	}
	m, tree, err := s.jobOf(sum.Targets[0])
	if err != nil {
		t.Fatalf("submitting what the build made: %v", err)
	}
	if tree != built.Tree || m.InputRoot != tree.Root.String() {
		t.Fatalf("submitted input root %s, the build's %s", m.InputRoot, built.Tree.Root)
	}
	// Asked again, it is read back from what the build wrote.
	if _, _, err := s.jobOf(sum.Targets[0]); !os.IsNotExist(err) {
		t.Fatalf("a second ask with the manifest gone: %v, want it not found", err)
	}
}

// A job target's cache, cache_version and sweep reach its manifest, the
// sweep's parameters in the order written; a bad one names the target and
// the attribute.
func TestJobCacheAttributes(t *testing.T) {
	root := workspace(t, map[string]string{
		"MODULE.bazel": "",
		"pkg/BUILD.rbs": `load("@rbs//job/rules.rbs", "batch_job")
sh_binary(name = "step", srcs = ["step.sh"])
batch_job(name = "sweep", binary = ":step", args = ["{lr}"], cache = True, cache_version = "v2",
          sweep = {"lr": ["0.1", "0.01"], "batch": ["64", "32"]})
batch_job(name = "bad", binary = ":step", sweep = {"1x": ["a"]})
`,
		"pkg/step.sh": "#!/bin/sh\n",
	})
	s, err := Open(Options{Dir: root, Jobs: 2, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Build(ctx, []string{"//pkg:sweep"}, false); err != nil {
		t.Fatal(err)
	}
	m := s.jobs["//pkg:sweep"].Manifest
	if m.Cache != "on" || m.CacheVersion != "v2" || len(m.Sweep) != 2 || m.Sweep[0].Name != "lr" || m.Sweep[1].Values[0] != "64" {
		t.Fatalf("the manifest of //pkg:sweep: cache %q version %q sweep %+v", m.Cache, m.CacheVersion, m.Sweep)
	}
	if _, err := s.Build(ctx, []string{"//pkg:bad"}, false); err == nil || !strings.Contains(err.Error(), `//pkg:bad: sweep: parameter name "1x"`) {
		t.Fatalf("a bad sweep: %v", err)
	}
}

// workspace writes files, by path, into a new directory and returns it.
func workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
