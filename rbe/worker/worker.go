// Package worker provides the rbs worker: it dials the server (the server
// never dials workers), registers its resources and slots, and holds one
// stream over which it receives assignments and sends heartbeats, results
// and job output. Every heartbeat reports everything it holds, running or
// finished with its report not yet acknowledged (see rbe/session). Actions
// run in fresh directories staged from a local CAS cache by hard links;
// jobs are handed to the job slot class's runner (jobs/runner); each runs
// in its own process group, and the worker is a child subreaper
// (process.Reaper) that reaps the orphans its payloads leave.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/rbs-build/rbs/jobs/runner"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rbe/process"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config is what `rbs remote worker` is given.
type Config struct {
	Server      client.Options
	WorkDir     string
	Name        string
	ActionSlots int
	JobSlots    int
	CPUs        int
	MemoryBytes int64
	GPUs        []*workerpb.Gpu
	// GPUNote says why no GPU was discovered, when GPUs is empty.
	GPUNote string
	// Platform is offered as OSFamily and ISA; the zero value stands for
	// this machine's.
	Platform platform.Platform
	// Properties are offered in addition to OSFamily and ISA.
	Properties   []*workerpb.Property
	CacheMaxSize int64
	// RunAs is the user actions and jobs run as (nil: the worker's own).
	RunAs *process.User
	// ContainerRuntime runs the jobs that name an image: "auto" finds
	// podman, else docker, on PATH; "podman", "docker" or the path of
	// either names it, which must then work; "" or "none" offers none.
	ContainerRuntime string
	// ContainerFlags go to every `run` of the runtime, after the flags
	// the worker works out for this machine.
	ContainerFlags []string
	Version        string
	Log            *slog.Logger
}

// Worker is a running worker.
type Worker struct {
	cfg     Config
	session string
	log     *slog.Logger
	runner  *actionRunner
	// jobs runs the job slot class.
	jobs *runner.Runner

	mu      sync.Mutex
	running map[string]running // by task id
	// finished holds the tasks that have ended until the server
	// acknowledges their reports (Ack): a stream can break after a send
	// seemed to succeed, so each new stream sends them again (the server
	// ignores ends it already has), and every heartbeat lists them.
	finished map[string]finished
	// applied is the seq of the last message of the current stream that
	// the worker has applied.
	applied uint64
	// outbox holds results, job output and job ends for the server, in
	// order; it outlives any one stream. What a broken stream failed to
	// deliver is sent again from what the worker holds: the reports of
	// finished, the output the server says it lacks, and the master ports
	// in every heartbeat.
	outbox chan *workerpb.WorkerMessage
}

type running struct {
	stop  context.CancelFunc
	class workerpb.SlotClass
	// action is the digest of the action an action-class task runs.
	action *workerpb.Digest
	// masterPort is the port a gang's rank 0 picked: every heartbeat
	// reports it, lest the server never heard of it.
	masterPort int32
}

// finished is a task that has ended, with its report.
type finished struct {
	msg    *workerpb.WorkerMessage // its TaskResult or JobEnded
	class  workerpb.SlotClass
	action *workerpb.Digest
}

// holdingsLocked returns everything the worker holds, running or
// finished, as its registration and heartbeats report it. The caller holds
// mu.
func (w *Worker) holdingsLocked() []*workerpb.RunningTask {
	tasks := make([]*workerpb.RunningTask, 0, len(w.running)+len(w.finished))
	for id, r := range w.running {
		tasks = append(tasks, &workerpb.RunningTask{TaskId: id, SlotClass: r.class, ActionDigest: r.action, MasterPort: r.masterPort})
	}
	for id, f := range w.finished {
		tasks = append(tasks, &workerpb.RunningTask{TaskId: id, SlotClass: f.class, ActionDigest: f.action, Finished: true})
	}
	return tasks
}

// heartbeat is the worker's report of its whole state.
func (w *Worker) heartbeat() *workerpb.WorkerMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_Heartbeat{Heartbeat: &workerpb.Heartbeat{Running: w.holdingsLocked(), Applied: w.applied}}}
}

// ack forgets the finished tasks whose reports the server has recorded,
// and the output of those that are job attempts.
func (w *Worker) ack(tasks []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range tasks {
		f, ok := w.finished[id]
		if !ok {
			continue
		}
		delete(w.finished, id)
		if f.class == workerpb.SlotClass_SLOT_CLASS_JOB {
			w.jobs.Forget(id)
		}
	}
}

// properties are the platform properties the worker offers: its
// platform's OSFamily and ISA, then the configured ones.
func (w *Worker) properties() []*workerpb.Property {
	p := w.cfg.Platform
	if p.IsZero() {
		p = platform.Host()
	}
	props := p.Properties()
	out := []*workerpb.Property{{Name: platform.OSFamily, Value: props[platform.OSFamily]}, {Name: platform.ISA, Value: props[platform.ISA]}}
	return append(out, w.cfg.Properties...)
}

// Run connects to the server and serves assignments until ctx is done,
// reconnecting with back-off when the stream breaks.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	conn, err := client.Dial(cfg.Server)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Payloads may enter the work dir and exec and jobs in it, but list
	// none of them, and cannot enter the cache: all they reach is their
	// own directory (the inputs linked into it are read-only to them) and
	// what lies outside the work dir.
	if err := os.MkdirAll(cfg.WorkDir, 0o711); err != nil {
		return err
	}
	if err := os.Chmod(cfg.WorkDir, 0o711); err != nil {
		return err
	}
	if cfg.RunAs != nil {
		if err := cfg.RunAs.Reach(cfg.WorkDir); err != nil {
			return err
		}
	}
	execRoot := filepath.Join(cfg.WorkDir, "exec")
	jobsRoot := filepath.Join(cfg.WorkDir, "jobs")
	for _, d := range []string{execRoot, jobsRoot} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("clearing %s: %w", d, err)
		}
		if err := os.Mkdir(d, 0o711); err != nil {
			return err
		}
	}
	cacheDir := filepath.Join(cfg.WorkDir, "cache")
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(cacheDir, 0o700); err != nil {
		return err
	}
	cas := client.NewCAS(conn, "")
	cache, err := execroot.OpenCache(cacheDir, cfg.CacheMaxSize)
	if err != nil {
		return err
	}
	// Payloads get the descriptors they are given, not those this
	// process was started with.
	if err := process.SealInherited(); err != nil {
		return fmt.Errorf("marking inherited descriptors close-on-exec: %w", err)
	}
	rp := process.SharedReaper
	reapErr := make(chan error, 1)
	go func() { reapErr <- rp.Serve(ctx) }()

	sess := make([]byte, 8)
	rand.Read(sess)
	w := &Worker{
		cfg:      cfg,
		session:  hex.EncodeToString(sess),
		log:      cfg.Log,
		runner:   &actionRunner{name: cfg.Name, cas: cas, cache: cache, execRoot: execRoot, reaper: rp, user: cfg.RunAs},
		running:  map[string]running{},
		finished: map[string]finished{},
		outbox:   make(chan *workerpb.WorkerMessage, 1024),
	}
	w.jobs, err = runner.New(ctx, runner.Config{
		Root:             jobsRoot,
		Session:          w.session,
		CAS:              cas,
		Cache:            cache,
		Reaper:           rp,
		RunAs:            cfg.RunAs,
		GPUs:             cfg.GPUs,
		ContainerRuntime: cfg.ContainerRuntime,
		ContainerFlags:   cfg.ContainerFlags,
		Outbox:           w.outbox,
		Started:          w.pickedPort,
		Log:              cfg.Log,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := w.jobs.Close(); err != nil {
			w.log.Warn("removing the memory groups kept for jobs", "err", err)
		}
	}()
	api := workerpb.NewWorkersClient(conn)
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := w.serve(ctx, api)
		if ctx.Err() != nil {
			return nil
		}
		select {
		case err := <-reapErr:
			if err != nil {
				return fmt.Errorf("becoming a child subreaper: %w", err)
			}
		default:
		}
		if c := status.Code(err); c == codes.Unauthenticated || c == codes.PermissionDenied {
			// Trying again with the same token cannot help.
			return fmt.Errorf("the server refuses this worker (give its worker token with --worker-token-file or RBS_WORKER_TOKEN): %w", err)
		}
		if time.Since(start) > 30*time.Second {
			backoff = 100 * time.Millisecond
		}
		w.log.Warn("connection to server lost; reconnecting", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// serve runs one stream: register, then serve until it breaks.
func (w *Worker) serve(ctx context.Context, api workerpb.WorkersClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := api.Connect(ctx)
	if err != nil {
		return err
	}
	reg := &workerpb.Register{
		Name:            w.cfg.Name,
		Session:         w.session,
		Resources:       &workerpb.Resources{Cpus: int32(w.cfg.CPUs), MemoryBytes: w.cfg.MemoryBytes, Gpus: w.cfg.GPUs, GpuNote: w.cfg.GPUNote, ContainerRuntime: w.jobs.ContainerRuntime()},
		Properties:      w.properties(),
		ActionSlots:     int32(w.cfg.ActionSlots),
		JobSlots:        int32(w.cfg.JobSlots),
		Version:         w.cfg.Version,
		WholeHeartbeats: true,
	}
	w.mu.Lock()
	reg.Running = w.holdingsLocked()
	ends := make([]*workerpb.WorkerMessage, 0, len(w.finished))
	for _, f := range w.finished {
		ends = append(ends, f.msg)
	}
	w.applied = 0 // seqs start again with each stream
	w.mu.Unlock()
	if err := stream.Send(&workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_Register{Register: reg}}); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	registered := first.GetRegistered()
	if registered == nil {
		return fmt.Errorf("server did not acknowledge the registration")
	}
	w.log.Info("registered", "worker", registered.WorkerId, "server", w.cfg.Server.Target)
	interval := time.Duration(registered.HeartbeatIntervalMs) * time.Millisecond
	if interval <= 0 {
		interval = 2 * time.Second
	}
	// Output the server lacks (sent into a stream that broke) goes first,
	// then the reports of the tasks that finished unacknowledged.
	resend := append(w.jobs.Resend(registered.JobOutput), ends...)

	// One goroutine sends: what is sent again, then heartbeats and the
	// outbox in order. It has stopped before this function returns.
	sendErr := make(chan error, 1)
	senderDone := make(chan struct{})
	defer func() {
		cancel()
		<-senderDone
	}()
	go func() {
		defer close(senderDone)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			var m *workerpb.WorkerMessage
			if len(resend) > 0 {
				m, resend = resend[0], resend[1:]
			} else {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					m = w.heartbeat()
				case m = <-w.outbox:
				}
			}
			if err := stream.Send(m); err != nil {
				sendErr <- err
				cancel()
				return
			}
		}
	}()

	for {
		m, err := stream.Recv()
		if err != nil {
			select {
			case e := <-sendErr:
				return e
			default:
				return err
			}
		}
		switch k := m.Kind.(type) {
		case *workerpb.ServerMessage_AssignAction:
			w.startAction(k.AssignAction)
		case *workerpb.ServerMessage_AssignJob:
			w.startJob(k.AssignJob)
		case *workerpb.ServerMessage_JobStdin:
			w.jobs.Stdin(k.JobStdin)
		case *workerpb.ServerMessage_Cancel:
			w.mu.Lock()
			if r, ok := w.running[k.Cancel.TaskId]; ok {
				r.stop()
			}
			w.mu.Unlock()
		case *workerpb.ServerMessage_Ack:
			w.ack(k.Ack.TaskIds)
		}
		// Applied: what it started is in running, what it acknowledged
		// gone from finished.
		w.mu.Lock()
		w.applied = m.Seq
		w.mu.Unlock()
	}
}

// pickedPort records the master port a gang's rank 0 picked for task.
func (w *Worker) pickedPort(task string, port int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r, ok := w.running[task]; ok {
		r.masterPort = port
		w.running[task] = r
	}
}

// start runs work in the background under a task id, unless that task is
// already running or finished (a repeated assignment after a reconnect);
// action is the digest of an action-class task's action. When work ends,
// its report is kept in finished until the server acknowledges it.
func (w *Worker) start(task string, class workerpb.SlotClass, action *workerpb.Digest, work func(ctx context.Context) *workerpb.WorkerMessage) {
	ctx, cancel := context.WithCancel(context.Background())
	w.mu.Lock()
	_, dup := w.running[task]
	if _, done := w.finished[task]; dup || done {
		w.mu.Unlock()
		cancel()
		return
	}
	w.running[task] = running{stop: cancel, class: class, action: action}
	w.mu.Unlock()
	go func() {
		defer cancel()
		m := work(ctx)
		w.mu.Lock()
		delete(w.running, task)
		w.finished[task] = finished{msg: m, class: class, action: action}
		w.mu.Unlock()
		w.outbox <- m
	}()
}

func (w *Worker) startAction(a *workerpb.AssignAction) {
	w.start(a.TaskId, workerpb.SlotClass_SLOT_CLASS_ACTION, a.ActionDigest, func(ctx context.Context) *workerpb.WorkerMessage {
		r := &workerpb.TaskResult{TaskId: a.TaskId, StatusCode: int32(codes.InvalidArgument)}
		if d, err := digest.New(a.GetActionDigest().GetHash(), a.GetActionDigest().GetSizeBytes()); err != nil {
			r.StatusMessage = "bad action digest: " + err.Error()
		} else {
			r = w.runner.run(ctx, a, d)
		}
		r.ActionDigest = a.ActionDigest
		return &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_Result{Result: r}}
	})
}

func (w *Worker) startJob(a *workerpb.AssignJob) {
	if a.Interactive {
		// Before the next message, which may be its stdin.
		w.jobs.QueueStdin(a.TaskId)
	}
	w.start(a.TaskId, workerpb.SlotClass_SLOT_CLASS_JOB, nil, func(ctx context.Context) *workerpb.WorkerMessage {
		w.log.Info("job started", "job", a.JobId, "task", a.TaskId)
		end := w.jobs.Run(ctx, a)
		w.log.Info("job ended", "job", a.JobId, "state", end.State, "exit_code", end.ExitCode)
		return &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_JobEnded{JobEnded: end}}
	})
}
