// Package worker provides the rbs worker: it dials the server (the server
// never dials workers), registers its resources and slots, and holds one
// stream over which it receives assignments and sends heartbeats and
// results. Actions run in fresh directories staged from a local CAS cache
// by hard links, each in its own process group; the worker is a child
// subreaper and reaps the orphans its payloads leave.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
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
	// Properties are offered in addition to OSFamily and ISA.
	Properties   []*workerpb.Property
	CacheMaxSize int64
	Version      string
	Log          *slog.Logger
}

// Worker is a running worker.
type Worker struct {
	cfg     Config
	session string
	log     *slog.Logger
	runner  *actionRunner

	mu      sync.Mutex
	running map[string]context.CancelFunc // by task id
	results chan *workerpb.TaskResult     // survive reconnects
}

// ISA returns the REAPI ISA name of this machine's architecture.
func ISA() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86-64"
	case "386":
		return "x86-32"
	case "arm64":
		return "arm-a64"
	case "arm":
		return "arm-a32"
	}
	return runtime.GOARCH
}

// DefaultProperties are the platform properties every worker offers.
func DefaultProperties() []*workerpb.Property {
	return []*workerpb.Property{{Name: "OSFamily", Value: runtime.GOOS}, {Name: "ISA", Value: ISA()}}
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
	execRoot := filepath.Join(cfg.WorkDir, "exec")
	if err := os.RemoveAll(execRoot); err != nil {
		return fmt.Errorf("clearing %s: %w", execRoot, err)
	}
	if err := os.MkdirAll(execRoot, 0o755); err != nil {
		return err
	}
	cas := client.NewCAS(conn, "")
	cache, err := newFileCache(filepath.Join(cfg.WorkDir, "cache"), cfg.CacheMaxSize, cas)
	if err != nil {
		return err
	}
	rp := newReaper()
	reapErr := make(chan error, 1)
	go func() { reapErr <- rp.serve(ctx) }()

	sess := make([]byte, 8)
	rand.Read(sess)
	w := &Worker{
		cfg:     cfg,
		session: hex.EncodeToString(sess),
		log:     cfg.Log,
		runner:  &actionRunner{name: cfg.Name, cas: cas, cache: cache, execRoot: execRoot, reaper: rp},
		running: map[string]context.CancelFunc{},
		results: make(chan *workerpb.TaskResult, 1024),
	}
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
		Name:        w.cfg.Name,
		Session:     w.session,
		Resources:   &workerpb.Resources{Cpus: int32(w.cfg.CPUs), MemoryBytes: w.cfg.MemoryBytes, Gpus: w.cfg.GPUs},
		Properties:  append(DefaultProperties(), w.cfg.Properties...),
		ActionSlots: int32(w.cfg.ActionSlots),
		JobSlots:    int32(w.cfg.JobSlots),
		Version:     w.cfg.Version,
	}
	w.mu.Lock()
	for id := range w.running {
		reg.Running = append(reg.Running, &workerpb.RunningTask{TaskId: id, SlotClass: workerpb.SlotClass_SLOT_CLASS_ACTION})
	}
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

	// One goroutine sends: heartbeats and results.
	sendErr := make(chan error, 1)
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			var m *workerpb.WorkerMessage
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				m = &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_Heartbeat{Heartbeat: &workerpb.Heartbeat{}}}
			case r := <-w.results:
				m = &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_Result{Result: r}}
				if err := stream.Send(m); err != nil {
					// Keep the result for the next connection.
					w.results <- r
					sendErr <- err
					cancel()
					return
				}
				continue
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
		case *workerpb.ServerMessage_Cancel:
			w.mu.Lock()
			if stop, ok := w.running[k.Cancel.TaskId]; ok {
				stop()
			}
			w.mu.Unlock()
		}
	}
}

func (w *Worker) startAction(a *workerpb.AssignAction) {
	d, err := digest.New(a.GetActionDigest().GetHash(), a.GetActionDigest().GetSizeBytes())
	ctx, cancel := context.WithCancel(context.Background())
	w.mu.Lock()
	if _, dup := w.running[a.TaskId]; dup {
		w.mu.Unlock()
		cancel()
		return
	}
	w.running[a.TaskId] = cancel
	w.mu.Unlock()
	go func() {
		defer cancel()
		var r *workerpb.TaskResult
		if err != nil {
			r = &workerpb.TaskResult{TaskId: a.TaskId, StatusCode: int32(codes.InvalidArgument), StatusMessage: "bad action digest: " + err.Error()}
		} else {
			r = w.runner.run(ctx, a.TaskId, d)
		}
		w.mu.Lock()
		delete(w.running, a.TaskId)
		w.mu.Unlock()
		w.results <- r
	}()
}
