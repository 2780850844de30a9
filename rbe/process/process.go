// Package process runs payload processes the way rbs workers and the local
// executor need: exactly the given environment, the program found in that
// environment's PATH, its own session and process group (so no controlling
// terminal of whoever started rbs), a time limit, and on timeout
// or cancellation SIGTERM to the whole group, then SIGKILL after a grace
// period; whatever the payload leaves in its group is killed when it ends.
//
// A worker also needs Reaper, which makes it a child subreaper and reaps
// the orphans its payloads leave, and User, the account payloads run as
// under --run-as, with the hand-over and reclaim of their directories.
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Spec is a process to run.
type Spec struct {
	Args    []string
	Env     []string // exactly the payload's environment
	Dir     string
	Stdin   *os.File // nil: /dev/null
	Stdout  io.Writer
	Stderr  io.Writer
	Timeout time.Duration // 0: none
	// Grace is how long the group has between SIGTERM and SIGKILL.
	Grace time.Duration
	// HostPath lets a bare program name be found in this process's PATH
	// when Env has none.
	HostPath bool
	// Start starts the command (default cmd.Start); Finish is called once
	// it has been waited for. Workers use them to tell their own children
	// from orphans.
	Start  func(*exec.Cmd) error
	Finish func(*exec.Cmd)
	// OnStart is called with the pid right after the start (to put the
	// process in a memory cgroup), before the command runs; an error stops
	// it. The process is held until then, as a shell that then execs the
	// command, which costs a process start of its own: a Start that puts
	// the process in place as it starts needs none.
	OnStart func(pid int) error
	// Credential is the user and groups the process runs as (nil: this
	// process's own); setting another needs root.
	Credential *syscall.Credential
}

// Result says how a process ended.
type Result struct {
	ExitCode  int // 128+signal when killed by a signal
	TimedOut  bool
	Cancelled bool
	// MaxRSS is the largest resident set of any one process of the tree.
	MaxRSS int64
	// CPUTime is the user and system time of the process and of the
	// descendants it waited for.
	CPUTime time.Duration
}

// LookPath resolves argv[0]: a name with a slash is relative to dir; a bare
// name is searched in the PATH of env (relative entries relative to dir),
// or, with hostPath, in this process's PATH when env has none.
func LookPath(name, dir string, env []string, hostPath bool) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, nil
	}
	pathVar, found := "", false
	if hostPath {
		pathVar, found = os.LookupEnv("PATH")
	}
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
		var st syscall.Stat_t
		if syscall.Stat(cand, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG && st.Mode&0o111 != 0 {
			return cand, nil
		}
	}
	return "", fmt.Errorf("program %q not found in PATH %q", name, pathVar)
}

// devNull is /dev/null, opened once for every process's stdin: os/exec
// would open and close it for each, about a twentieth of a worker's CPU in
// an array of short jobs. A child gets its own descriptor of it; this one
// is never closed.
var devNull = sync.OnceValues(func() (*os.File, error) { return os.Open(os.DevNull) })

// Run runs the process and waits for it.
func Run(ctx context.Context, spec Spec) (Result, error) {
	if len(spec.Args) == 0 {
		return Result{}, errors.New("empty command")
	}
	prog, err := LookPath(spec.Args[0], spec.Dir, spec.Env, spec.HostPath)
	if err != nil {
		return Result{}, err
	}
	// The child takes on Credential before it sets Pdeathsig, which a
	// change of uid would clear. Its own session is its own process group
	// too, and takes it off the terminal, if any, that rbs was started
	// from, as Bazel's process-wrapper does.
	cmd := &exec.Cmd{
		Path:        prog,
		Args:        spec.Args,
		Env:         spec.Env,
		Dir:         spec.Dir,
		Stdout:      spec.Stdout,
		Stderr:      spec.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Credential: spec.Credential},
	}
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	stdin := spec.Stdin
	if stdin == nil {
		if stdin, err = devNull(); err != nil {
			return Result{}, err
		}
	}
	cmd.Stdin = stdin
	// The command must not run before OnStart has placed it (in a memory
	// cgroup, say): what it allocated first would escape the limit and the
	// peak. It starts as a shell that waits for a line on fd 3, closes it,
	// and execs the command in its own place.
	var hold, release *os.File
	if spec.OnStart != nil {
		if hold, release, err = os.Pipe(); err != nil {
			return Result{}, err
		}
		defer release.Close()
		cmd.Path = "/bin/sh"
		cmd.Args = append([]string{"/bin/sh", "-c", `read -r _ <&3 || exit 125; exec 3<&-; exec "$0" "$@"`, prog}, spec.Args[1:]...)
		cmd.ExtraFiles = []*os.File{hold}
	}
	start := spec.Start
	if start == nil {
		start = (*exec.Cmd).Start
	}
	err = start(cmd)
	if hold != nil {
		hold.Close()
	}
	if err != nil {
		return Result{}, err
	}
	pgid := cmd.Process.Pid
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if spec.Finish != nil {
			spec.Finish(cmd)
		}
	}()
	if spec.OnStart != nil {
		if err := spec.OnStart(pgid); err != nil {
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
			return Result{}, err
		}
		if _, err := release.WriteString("go\n"); err != nil {
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-done
			return Result{}, fmt.Errorf("releasing the started process: %w", err)
		}
		release.Close()
	}

	var timeout <-chan time.Time
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var res Result
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
	// Stragglers that stayed in the group (daemons, background jobs).
	syscall.Kill(-pgid, syscall.SIGKILL)

	if st := cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			res.MaxRSS = ru.Maxrss << 10
			res.CPUTime = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
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
