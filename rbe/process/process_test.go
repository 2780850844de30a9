package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	// The payloads that are cancelled create $READY once they are set up,
	// and only then is the context cancelled: their trap is in place
	// whatever the machine's speed. Were they not stopped, they would
	// print "not stopped" and exit 0. $PLACED is made by OnStart, which
	// runs before the command does.
	ready, placed := filepath.Join(dir, "ready"), filepath.Join(dir, "placed")
	env := []string{"PATH=/bin:/usr/bin", "READY=" + ready, "PLACED=" + placed}
	tests := []struct {
		name     string
		spec     Spec
		cancel   bool
		exit     int
		timedOut bool
		out      string
	}{
		{"exit code and env", Spec{Args: sh(`echo "$X"; exit 3`), Env: []string{"PATH=/bin:/usr/bin", "X=only this"}}, false, 3, false, "only this\n"},
		{"killed by a signal", Spec{Args: sh("kill -9 $$"), Env: env}, false, 137, false, ""},
		// A long grace: SIGTERM, not the SIGKILL after it, ends these.
		{"timeout", Spec{Args: sh(`sleep 30; echo not stopped`), Env: env, Timeout: 200 * time.Millisecond, Grace: time.Minute}, false, 143, true, ""},
		{"cancelled", Spec{Args: sh(`: >"$READY"; sleep 30; echo not stopped`), Env: env, Grace: time.Minute}, true, 143, false, ""},
		{"cancelled, ignoring SIGTERM", Spec{Args: sh(`trap '' TERM; : >"$READY"; sleep 30; echo not stopped`), Env: env, Grace: 100 * time.Millisecond}, true, 137, false, ""},
		// Twice: the shared /dev/null must still be there for the second.
		{"stdin is /dev/null", Spec{Args: sh(`test -c /dev/stdin && cat && echo eof`), Env: env}, false, 0, false, "eof\n"},
		{"stdin is /dev/null again", Spec{Args: sh(`test -c /dev/stdin && cat && echo eof`), Env: env}, false, 0, false, "eof\n"},
		{"its own session and process group", Spec{Args: sh(`read -r _ _ _ _ pgrp sid _ </proc/$$/stat; [ "$pgrp" = $$ ] && [ "$sid" = $$ ] && echo leader`), Env: env}, false, 0, false, "leader\n"},
		{"held until placed", Spec{Args: []string{"cat", placed}, Env: env, OnStart: place(placed)}, false, 0, false, "placed\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(ready)
			os.Remove(placed)
			var out bytes.Buffer
			tt.spec.Stdout, tt.spec.Stderr, tt.spec.Dir = &out, &out, dir
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				go func() {
					if err := waitForFile(ready); err != nil {
						t.Error(err)
					}
					cancel()
				}()
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

// place returns an OnStart that gives the command, were it not held, half a
// second to run and exit (and fail, finding no file) before it makes the
// file the command reads.
func place(path string) func(pid int) error {
	return func(pid int) error {
		for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				return err
			}
			if _, after, _ := strings.Cut(string(b), ") "); strings.HasPrefix(after, "Z") {
				break // it ran and exited: the file comes too late
			}
		}
		return os.WriteFile(path, []byte("placed\n"), 0o644)
	}
}

// A process whose OnStart fails is stopped before its command runs.
func TestOnStartFailureStopsTheCommand(t *testing.T) {
	ran := filepath.Join(t.TempDir(), "ran")
	_, err := Run(context.Background(), Spec{
		Args: sh(`: >"$RAN"`), Env: []string{"PATH=/bin:/usr/bin", "RAN=" + ran},
		OnStart: func(int) error { return fmt.Errorf("no room") },
	})
	if err == nil || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("Run = %v, want OnStart's error", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ran although OnStart failed")
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

// TestSealInherited opens a descriptor without close-on-exec, as a shell
// or supervisor may leave one, and checks that once sealed (through
// close_range, and through the listing older kernels need) a payload no
// longer has it, while its stdout still reaches the test.
func TestSealInherited(t *testing.T) {
	for _, tt := range []struct {
		name string
		seal func() error
	}{
		{"close_range", SealInherited},
		{"listed", sealListed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fd, err := syscall.Open(os.DevNull, syscall.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Close(fd)
			script := fmt.Sprintf(`if [ -e /proc/self/fd/%d ]; then echo inherited; else echo sealed; fi`, fd)
			run := func() string {
				var out bytes.Buffer
				spec := Spec{Args: sh(script), Env: []string{"PATH=/bin:/usr/bin"}, Stdout: &out, Stderr: &out}
				if _, err := Run(context.Background(), spec); err != nil {
					t.Fatal(err)
				}
				return strings.TrimSpace(out.String())
			}
			if got := run(); got != "inherited" {
				t.Fatalf("before sealing, the payload printed %q: descriptor %d was not passed on, so the test checks nothing", got, fd)
			}
			if err := tt.seal(); err != nil {
				t.Fatal(err)
			}
			if got := run(); got != "sealed" {
				t.Fatalf("after sealing, the payload printed %q: it inherited descriptor %d", got, fd)
			}
		})
	}
}
