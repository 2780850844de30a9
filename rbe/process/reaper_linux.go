package process

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Reaper makes the worker a child subreaper, so that processes a payload
// orphans (daemons, setsid escapes) are re-parented to the worker instead of
// PID 1, and reaps those orphans when they exit. It never reaps the
// processes the worker started itself: their exec.Cmd waits for them.
type Reaper struct {
	// starting is held for reading while a payload is forked and its pid
	// recorded, and for writing while orphans are reaped, so a fresh child
	// can never be mistaken for an orphan.
	starting sync.RWMutex
	mu       sync.Mutex
	ours     map[int]bool
}

// NewReaper returns a Reaper. A process has one, SharedReaper; tests make
// their own.
func NewReaper() *Reaper { return &Reaper{ours: map[int]bool{}} }

// SharedReaper is the reaper of every worker run in this process: a
// process has one set of children, so workers run side by side (rbs remote
// serve --workers N) must share one record of their payloads, lest one
// reap another's payload before its exec.Cmd waits for it.
var SharedReaper = NewReaper()

// Wrap makes spec start and finish through the reaper.
func (r *Reaper) Wrap(spec Spec) Spec {
	spec.Start = r.start
	spec.Finish = func(cmd *exec.Cmd) { r.forget(cmd.Process.Pid) }
	spec.HostPath = true
	return spec
}

func (r *Reaper) start(cmd *exec.Cmd) error {
	r.starting.RLock()
	defer r.starting.RUnlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	r.mu.Lock()
	r.ours[cmd.Process.Pid] = true
	r.mu.Unlock()
	return nil
}

func (r *Reaper) forget(pid int) {
	r.mu.Lock()
	delete(r.ours, pid)
	r.mu.Unlock()
}

// Serve becomes a subreaper and reaps orphans until ctx is done.
func (r *Reaper) Serve(ctx context.Context) error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	defer signal.Stop(sig)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sig:
		case <-tick.C:
		}
		r.reapOrphans()
	}
}

// siginfoChild is the layout of siginfo_t for SIGCHLD on Linux.
type siginfoChild struct {
	Signo, Errno, Code, _ int32
	Pid                   int32
	_                     [108]byte
}

func (r *Reaper) reapOrphans() {
	r.starting.Lock()
	defer r.starting.Unlock()
	for {
		var info siginfoChild
		err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if err != nil || info.Pid == 0 {
			return
		}
		r.mu.Lock()
		ours := r.ours[int(info.Pid)]
		r.mu.Unlock()
		if ours {
			// Its exec.Cmd will wait for it; look again next time.
			return
		}
		var ws unix.WaitStatus
		unix.Wait4(int(info.Pid), &ws, unix.WNOHANG, nil)
	}
}

// Output runs a program of the worker's own (not a payload) through the
// reaper and returns its standard output, or an error holding its standard
// error.
func (r *Reaper) Output(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := r.start(cmd); err != nil {
		return "", err
	}
	err := cmd.Wait()
	r.forget(cmd.Process.Pid)
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("%s: %w", msg, err)
		}
		return "", err
	}
	return stdout.String(), nil
}
