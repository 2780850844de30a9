package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// procResult says how a process ended.
type procResult struct {
	exitCode int // 128+signal when a signal killed it
	timedOut bool
}

// lookPath resolves argv[0]: a name with a slash is relative to dir; a bare
// name is searched in the PATH of env (relative entries relative to dir).
// The host's PATH is never used: the action's environment is all it has.
func lookPath(name, dir string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	var pathVar string
	found := false
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar, found = v, true
		}
	}
	if !found {
		return "", fmt.Errorf("program %q has no slash and the environment has no PATH", name)
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

// runProcess runs args in dir with exactly env, in a process group of its
// own, writing its output to stdout and stderr. The group is killed when
// timeout (if non-zero) passes or ctx is done, and once the command ends,
// so that nothing it started in the background outlives it. A cancelled
// ctx is an error.
func runProcess(ctx context.Context, args, env []string, dir string, stdout, stderr *os.File, timeout time.Duration) (procResult, error) {
	if len(args) == 0 {
		return procResult{}, errors.New("empty command")
	}
	prog, err := lookPath(args[0], dir, env)
	if err != nil {
		return procResult{}, err
	}
	if env == nil {
		env = []string{}
	}
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        args,
		Env:         env,
		Dir:         dir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		return procResult{}, err
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	var res procResult
	var werr error
	select {
	case werr = <-done:
	case <-timer:
		res.timedOut = true
		syscall.Kill(-pgid, syscall.SIGKILL)
		werr = <-done
	case <-ctx.Done():
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return procResult{}, ctx.Err()
	}
	// Whatever the command left running in its group.
	syscall.Kill(-pgid, syscall.SIGKILL)
	var exit *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &exit):
		ws := exit.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			res.exitCode = 128 + int(ws.Signal())
		} else {
			res.exitCode = ws.ExitStatus()
		}
	default:
		return res, werr
	}
	if res.timedOut {
		res.exitCode = -1
	}
	return res, nil
}
