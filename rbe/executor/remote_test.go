package executor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/rbe/clustertest"
	"google.golang.org/grpc"
)

// newCluster starts an in-process cluster. Its worker makes the test
// process a child subreaper that reaps orphaned processes, so Local must not
// run while a cluster is up: tests using one live in this file, which runs
// last, and run Local before starting it.
func newCluster(t *testing.T) *grpc.ClientConn { return clustertest.Start(t).Conn }

func TestRemote(t *testing.T) {
	f := newFixture(t, "remote input\n")
	dirScript := "cat in.txt > out.txt && mkdir -p d/sub && echo n > d/sub/n.txt && printf '#!/bin/sh\\n' > d/x.sh && chmod +x d/x.sh && ln -s sub d/link"
	newAction := func() *Action {
		a := f.shAction(dirScript, "out.txt")
		a.OutputDirs = []string{"d"}
		return a
	}

	// Local first: no cluster (and its subreaper) is up yet.
	localRes := run(t, newLocal(t), newAction(), f.outRoot)
	localOut := f.read("out.txt")

	remote := NewRemote(newCluster(t), "")
	r := Cached(remote.Cache(), remote)
	remoteRoot := t.TempDir()
	first := run(t, r, newAction(), remoteRoot)
	got, err := os.ReadFile(filepath.Join(remoteRoot, "out.txt"))
	if err != nil || string(got) != localOut || localOut != "remote input\n" {
		t.Fatalf("remote out.txt %q (%v), local %q", got, err, localOut)
	}
	if first.Cached || first.Digest != localRes.Digest {
		t.Fatalf("first remote run: cached %v, digest %s, local digest %s", first.Cached, first.Digest, localRes.Digest)
	}
	checkDir := func(root string) {
		t.Helper()
		n, err := os.ReadFile(filepath.Join(root, "d/link/n.txt"))
		info, serr := os.Stat(filepath.Join(root, "d/x.sh"))
		if string(n) != "n\n" || err != nil || serr != nil || info.Mode().Perm()&0o111 == 0 {
			t.Fatalf("output directory under %s: n.txt %q %v, x.sh %v %v", root, n, err, info, serr)
		}
	}
	checkDir(remoteRoot)

	for _, p := range []string{"out.txt", "d"} {
		if err := os.RemoveAll(filepath.Join(remoteRoot, p)); err != nil {
			t.Fatal(err)
		}
	}
	second := run(t, r, newAction(), remoteRoot)
	if !second.Cached {
		t.Fatal("second remote run was not cached")
	}
	if got, _ := os.ReadFile(filepath.Join(remoteRoot, "out.txt")); string(got) != localOut {
		t.Fatalf("cached out.txt %q", got)
	}
	checkDir(remoteRoot)

	for _, tc := range []struct {
		name    string
		change  func(*Action)
		exit    int
		stdout  string
		stderr  string
		errs    []string
		outputs map[string]string
	}{
		{name: "failure", change: func(a *Action) { a.Args[2] = "echo out; echo boom >&2; exit 7" }, exit: 7, stdout: "out\n", stderr: "boom\n"},
		{name: "missing output", change: func(a *Action) { a.Args[2] = "true" }, errs: []string{"Genrule //pkg:cat", `"out.txt"`}},
		{name: "symlinked output", change: func(a *Action) {
			a.Args[2] = "cat in.txt > real.txt && ln -s real.txt out.txt"
			a.Outputs = []string{"out.txt", "real.txt"}
		}, outputs: map[string]string{"out.txt": "remote input\n", "real.txt": "remote input\n"}},
		{name: "no cache", change: func(a *Action) { a.NoCache = true }, outputs: map[string]string{"out.txt": "remote input\n"}},
		{name: "timeout", change: func(a *Action) { a.Args[2] = "echo partial; sleep 30"; a.Timeout = time.Second }, exit: -1, stdout: "partial\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := f.shAction(catScript, "out.txt")
			tc.change(a)
			root := t.TempDir()
			for i := 0; i < 2; i++ {
				res, err := r.Run(context.Background(), a, root)
				if len(tc.errs) > 0 {
					if err == nil {
						t.Fatalf("no error, want one containing %q", tc.errs)
					}
					for _, want := range tc.errs {
						if !strings.Contains(err.Error(), want) {
							t.Fatalf("error %q does not contain %q", err, want)
						}
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if res.ExitCode != tc.exit || tc.stdout != "" && string(res.Stdout) != tc.stdout || tc.stderr != "" && string(res.Stderr) != tc.stderr {
					t.Fatalf("run %d: exit %d stdout %q stderr %q", i, res.ExitCode, res.Stdout, res.Stderr)
				}
				if wantCached := i == 1 && tc.exit == 0 && !a.NoCache; res.Cached != wantCached {
					t.Fatalf("run %d: cached %v, want %v", i, res.Cached, wantCached)
				}
				for p, want := range tc.outputs {
					if got, err := os.ReadFile(filepath.Join(root, p)); string(got) != want {
						t.Fatalf("run %d: %s = %q (%v), want %q", i, p, got, err, want)
					}
				}
				if tc.exit != 0 {
					if _, err := os.Stat(filepath.Join(root, "out.txt")); !os.IsNotExist(err) {
						t.Fatalf("run %d: a failed action wrote out.txt", i)
					}
				}
				if tc.exit == -1 {
					break // one timeout is enough
				}
			}
		})
	}
}
