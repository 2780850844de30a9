package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// procSpec is one payload process to run: an action's command, later a job.
type procSpec struct {
	Args    []string
	Env     []string // exactly the payload's environment
	Dir     string
	Stdout  io.Writer
	Stderr  io.Writer
	Timeout time.Duration // 0: none
	// Grace is how long a process group has between SIGTERM and SIGKILL
	// when it is stopped.
	Grace time.Duration
	// OnStart, when set, is called with the new process's pid right after
	// it starts (to put it in a memory cgroup); an error stops it.
	OnStart func(pid int) error
}

// procResult says how a payload ended.
type procResult struct {
	ExitCode  int // 128+signal when killed by a signal
	TimedOut  bool
	Cancelled bool
	// MaxRSS is the largest resident set of any one process of the tree.
	MaxRSS int64
}

// lookPath resolves the program the way a shell with the payload's PATH
// would: a name with a slash is relative to dir; a bare name is searched in
// PATH from env (the worker's own PATH when env has none).
func lookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	pathVar, found := os.LookupEnv("PATH")
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar, found = v, true
		}
	}
	if !found {
		pathVar = "/usr/local/bin:/usr/bin:/bin"
	}
	for _, p := range filepath.SplitList(pathVar) {
		if p == "" {
			p = "."
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		cand := filepath.Join(p, name)
		if info, err := os.Stat(cand); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("program %q not found in PATH %q", name, pathVar)
}

// run starts the payload in its own process group, waits for it, and stops
// the whole group on timeout or when ctx is cancelled (SIGTERM, then SIGKILL
// after the grace period). Whatever is left of the group afterwards is
// killed.
func (r *reaper) run(ctx context.Context, spec procSpec) (procResult, error) {
	if len(spec.Args) == 0 {
		return procResult{}, errors.New("empty command")
	}
	prog, err := lookPath(spec.Args[0], spec.Dir, spec.Env)
	if err != nil {
		return procResult{}, err
	}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        spec.Args,
		Env:         spec.Env,
		Dir:         spec.Dir,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	if err := r.start(cmd); err != nil {
		return procResult{}, err
	}
	pgid := cmd.Process.Pid
	if spec.OnStart != nil {
		if err := spec.OnStart(pgid); err != nil {
			syscall.Kill(-pgid, syscall.SIGKILL)
			cmd.Wait()
			r.forget(pgid)
			return procResult{}, err
		}
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res procResult
	var werr error
	select {
	case werr = <-done:
	case <-timeout:
		res.TimedOut = true
		werr = stopGroup(pgid, spec.Grace, done)
	case <-ctx.Done():
		res.Cancelled = true
		werr = stopGroup(pgid, spec.Grace, done)
	}
	r.forget(pgid)
	// Stragglers that stayed in the group (daemons, background jobs).
	syscall.Kill(-pgid, syscall.SIGKILL)

	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); cmd.ProcessState != nil && ok {
		res.MaxRSS = ru.Maxrss << 10
	}
	var exit *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &exit):
		ws := exit.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = ws.ExitStatus()
		}
	default:
		return res, werr
	}
	return res, nil
}

// stopGroup sends SIGTERM to the process group, then SIGKILL after grace,
// and returns the leader's wait result.
func stopGroup(pgid int, grace time.Duration, done <-chan error) error {
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		return <-done
	}
}
