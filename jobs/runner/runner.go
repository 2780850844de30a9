// Package runner provides Runner, the worker's runner of the job slot
// class: it runs one attempt of a batch job at a time per AssignJob, in a
// directory of its own staged from the CAS (inputs, a checkpoint), under a
// memory limit or in a container image, with the GPUs pinned to it; it
// streams the attempt's output to the server and keeps it in a file until
// the server has the attempt's end; it feeds an interactive attempt's
// stdin; and when the attempt ends it records its outputs and checkpoint
// into the CAS and reports how it ended (JobEnded).
//
// Build actions are the worker's other slot class (rbe/worker), which
// holds the stream to the server and hands the runner its job messages.
package runner

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/memlimit"
	"github.com/rbs-build/rbs/rbe/process"
)

// Config is what a Runner works with.
type Config struct {
	// Root is the directory the attempts' directories are made in; it
	// must exist.
	Root string
	// Session is random per worker process; it names what attempts run
	// in (memory groups, containers), so that a later worker can sweep
	// those of one gone.
	Session string
	// CAS is the server's, where inputs come from and outputs go to.
	CAS *client.CAS
	// Cache is the worker's local copy of CAS blobs, which inputs are
	// hard-linked from.
	Cache  *execroot.Cache
	Reaper *process.Reaper
	// RunAs is the user attempts run as (nil: the worker's own).
	RunAs *process.User
	// GPUs are the worker's, which attempts are pinned to.
	GPUs []*workerpb.Gpu
	// ContainerRuntime runs the attempts that name an image: "auto" finds
	// podman, else docker, on PATH; "podman", "docker" or the path of
	// either names it, which must then work; "" or "none" offers none.
	ContainerRuntime string
	// ContainerFlags go to every `run` of the runtime, after the flags
	// worked out for this machine.
	ContainerFlags []string
	// Outbox takes the attempts' output and stdin acknowledgements for
	// the server, in order.
	Outbox chan<- *workerpb.WorkerMessage
	// Started is told the master port a gang's rank 0 picked, before the
	// attempt starts.
	Started func(task string, masterPort int32)
	Log     *slog.Logger
}

// Runner runs job attempts. Its methods are safe for concurrent use.
type Runner struct {
	cfg Config
	// containers runs attempts in images; nil for none.
	containers *containerRuntime
	// dirs hands out the attempts' directories, groups their memory
	// groups.
	dirs   *execroot.Spares
	groups *memlimit.Pool

	mu sync.Mutex
	// outputs holds the output of attempts, running or ended, until
	// Forget.
	outputs map[string]*jobOutput
	// stdins holds the stdin of interactive attempts, by task id.
	stdins map[string]*jobStdin
}

// New returns a Runner. It removes what workers gone before left (memory
// groups, containers) and finds the container runtime cfg names: one named
// outright that does not work is an error; one "auto" finds none of is
// logged.
func New(ctx context.Context, cfg Config) (*Runner, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Started == nil {
		cfg.Started = func(string, int32) {}
	}
	n, err := sweepGroups()
	if err != nil {
		cfg.Log.Warn("removing the memory groups of a previous worker", "err", err)
	}
	if n > 0 {
		cfg.Log.Info("removed the memory groups of jobs of a previous worker", "groups", n)
	}
	containers, err := startContainers(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return newRunner(cfg, containers), nil
}

func newRunner(cfg Config, containers *containerRuntime) *Runner {
	rn := &Runner{cfg: cfg, containers: containers, dirs: execroot.NewSpares(cfg.Root), outputs: map[string]*jobOutput{}, stdins: map[string]*jobStdin{}}
	rn.groups = memlimit.NewPool(rn.payloadName("run-"))
	return rn
}

// Close removes the memory groups kept for later attempts; those of
// attempts still running are removed as each ends.
func (rn *Runner) Close() error { return rn.groups.Close() }

// ContainerRuntime names the container runtime attempts may run in ("" for
// none), as the worker offers it.
func (rn *Runner) ContainerRuntime() string { return rn.containers.offered() }

// source is where the blobs the cache lacks come from: the server's CAS.
func (rn *Runner) source() execroot.Source { return execroot.CASSource(rn.cfg.CAS) }

// Forget drops the output kept of an ended attempt, once the server has
// recorded its end.
func (rn *Runner) Forget(task string) {
	rn.mu.Lock()
	delete(rn.outputs, task)
	rn.mu.Unlock()
	os.Remove(rn.outputFile(task))
}
