package process

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		spec     Spec
		cancel   bool
		exit     int
		timedOut bool
		out      string
	}{
		{"exit code and env", Spec{Args: []string{"sh", "-c", `echo "$X"; exit 3`}, Env: []string{"PATH=/bin:/usr/bin", "X=only this"}}, false, 3, false, "only this\n"},
		{"killed by a signal", Spec{Args: []string{"sh", "-c", "kill -9 $$"}, Env: []string{"PATH=/bin:/usr/bin"}}, false, 137, false, ""},
		{"timeout", Spec{Args: []string{"sh", "-c", "echo started; sleep 30"}, Env: []string{"PATH=/bin:/usr/bin"}, Timeout: 200 * time.Millisecond}, false, 143, true, "started\n"},
		{"timeout ignoring SIGTERM", Spec{Args: []string{"sh", "-c", "trap '' TERM; echo started; sleep 30"}, Env: []string{"PATH=/bin:/usr/bin"}, Timeout: 200 * time.Millisecond, Grace: 100 * time.Millisecond}, false, 137, true, "started\n"},
		{"cancelled", Spec{Args: []string{"sleep", "30"}, Env: []string{"PATH=/bin:/usr/bin"}}, true, 143, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.spec.Stdout, tt.spec.Stderr, tt.spec.Dir = &out, &out, dir
			ctx, cancel := context.WithCancel(context.Background())
			if tt.cancel {
				time.AfterFunc(200*time.Millisecond, cancel)
			}
			defer cancel()
			start := time.Now()
			res, err := Run(ctx, tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.exit || res.TimedOut != tt.timedOut || res.Cancelled != tt.cancel || out.String() != tt.out {
				t.Fatalf("Run = %+v, output %q", res, out.String())
			}
			if time.Since(start) > 10*time.Second {
				t.Fatal("the process was not stopped")
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
