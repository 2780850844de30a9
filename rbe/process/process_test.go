package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func sh(script string) []string { return []string{"sh", "-c", script} }

// waitForFile waits until path exists.
func waitForFile(path string) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s never appeared", path)
		}
	}
}

func TestRun(t *testing.T) {
	dir := t.TempDir()
	// The payloads that are stopped create $READY once they are set up,
	// and Run's timer starts (or the context is cancelled) only then, from
	// OnStart: their output and their trap are in place whatever the
	// machine's speed. Were they not stopped, they would print "not
	// stopped" and exit 0.
	ready := filepath.Join(dir, "ready")
	env := []string{"PATH=/bin:/usr/bin", "READY=" + ready}
	tests := []struct {
		name     string
		spec     Spec
		cancel   bool
		exit     int
		timedOut bool
		out      string
	}{
		{"exit code and env", Spec{Args: sh(`echo "$X"; exit 3`), Env: []string{"PATH=/bin:/usr/bin", "X=only this"}}, false, 3, false, "only this\n"},
		{"killed by a signal", Spec{Args: sh("kill -9 $$"), Env: []string{"PATH=/bin:/usr/bin"}}, false, 137, false, ""},
		{"timeout", Spec{Args: sh(`echo started; : >"$READY"; sleep 30; echo not stopped`), Env: env, Timeout: 200 * time.Millisecond}, false, 143, true, "started\n"},
		{"timeout ignoring SIGTERM", Spec{Args: sh(`trap '' TERM; echo started; : >"$READY"; sleep 30; echo not stopped`), Env: env, Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond}, false, 137, true, "started\n"},
		{"cancelled", Spec{Args: sh(`: >"$READY"; sleep 30; echo not stopped`), Env: env}, true, 143, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(ready)
			var out bytes.Buffer
			tt.spec.Stdout, tt.spec.Stderr, tt.spec.Dir = &out, &out, dir
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if slices.Equal(tt.spec.Env, env) {
				tt.spec.OnStart = func(int) error {
					err := waitForFile(ready)
					if tt.cancel {
						cancel()
					}
					return err
				}
			}
			res, err := Run(ctx, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.exit || res.TimedOut != tt.timedOut || res.Cancelled != tt.cancel || out.String() != tt.out {
				t.Fatalf("Run = %+v, output %q", res, out.String())
			}
		})
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bin", "data"), []byte(""), 0o644)
	tests := []struct {
		name     string
		env      []string
		hostPath bool
		want     string
		err      string
	}{
		{"tool", []string{"PATH=bin"}, false, filepath.Join(dir, "bin", "tool"), ""},
		{"./bin/tool", nil, false, filepath.Join(dir, "bin", "tool"), ""},
		{"data", []string{"PATH=bin"}, false, "", "not found"},
		{"tool", nil, false, "", "no PATH"},
		{"sh", nil, true, "", ""},
	}
	for _, tt := range tests {
		got, err := LookPath(tt.name, dir, tt.env, tt.hostPath)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("LookPath(%q) = %q, %v; want error %q", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil || (tt.want != "" && got != tt.want) {
			t.Errorf("LookPath(%q) = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
