package scheduler

import (
	"context"
	"slices"
	"sort"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// WorkerInfo is what a worker declares when it registers.
type WorkerInfo struct {
	Name        string
	Session     string
	ActionSlots int
	JobSlots    int
	Properties  []Property
	Resources   *workerpb.Resources
	Version     string
	// Running lists tasks the worker still runs from before a reconnect.
	Running []RunningTask
}

// Worker is a registered worker: its slots, what it runs, and the outbox of
// messages for its stream.
type Worker struct {
	id          string
	name        string
	info        WorkerInfo
	actionSlots int
	props       map[string]map[string]bool
	running     map[string]*task
	lastSeen    time.Time
	// connected is false once the worker's stream has ended: it gets no
	// new work, and keeps what it runs until it reconnects or is lost.
	connected bool

	outMu  sync.Mutex
	out    []*workerpb.ServerMessage
	notify chan struct{} // signalled when out grows
	gone   chan struct{} // closed when the worker is dropped
}

// ID returns the worker's id, which is its name.
func (w *Worker) ID() string { return w.id }

func (w *Worker) offers(platform []Property) bool {
	for _, p := range platform {
		if !w.props[p.Name][p.Value] {
			return false
		}
	}
	return true
}

// Send queues a message for the worker's stream.
func (w *Worker) Send(m *workerpb.ServerMessage) {
	w.outMu.Lock()
	w.out = append(w.out, m)
	w.outMu.Unlock()
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// Next returns the next message for the worker's stream. It fails once the
// worker has been dropped or ctx is done.
func (w *Worker) Next(ctx context.Context) (*workerpb.ServerMessage, error) {
	for {
		w.outMu.Lock()
		if len(w.out) > 0 {
			m := w.out[0]
			w.out[0] = nil
			w.out = w.out[1:]
			w.outMu.Unlock()
			return m, nil
		}
		w.outMu.Unlock()
		select {
		case <-w.notify:
		case <-w.gone:
			return nil, status.Errorf(codes.Unavailable, "worker %s was dropped", w.name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// RegisterWorker adds a worker. A worker reconnecting with the same name and
// session replaces its old registration and keeps the tasks it reports as
// still running; another process under a name already connected is refused.
func (s *Scheduler) RegisterWorker(info WorkerInfo) (*Worker, error) {
	if info.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "worker name must not be empty")
	}
	if info.ActionSlots < 0 || info.JobSlots < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "worker %s: negative slot count", info.Name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &Worker{
		id:          info.Name,
		name:        info.Name,
		info:        info,
		actionSlots: info.ActionSlots,
		props:       map[string]map[string]bool{},
		running:     map[string]*task{},
		lastSeen:    s.cfg.Now(),
		connected:   true,
		notify:      make(chan struct{}, 1),
		gone:        make(chan struct{}),
	}
	for _, p := range info.Properties {
		if w.props[p.Name] == nil {
			w.props[p.Name] = map[string]bool{}
		}
		w.props[p.Name][p.Value] = true
	}
	if old, ok := s.workers[w.id]; ok && old.info.Session != info.Session {
		if old.connected {
			return nil, status.Errorf(codes.AlreadyExists, "a worker named %q is already connected; give each worker a distinct --name", info.Name)
		}
		// A new process under the name of one gone: what the old one ran
		// is lost with it.
		s.dropWorkerLocked(old, "worker restarted")
	}
	if old, ok := s.workers[w.id]; ok {
		// The same process reconnecting: it keeps what it still runs.
		still := map[string]bool{}
		for _, r := range info.Running {
			still[r.ID] = true
		}
		for id, t := range old.running {
			if still[id] {
				delete(old.running, id)
				t.worker = w
				w.running[id] = t
			}
		}
		s.dropWorkerLocked(old, "worker reconnected")
	}
	s.workers[w.id] = w
	s.adoptLocked(w, info.Running)
	s.failUnsatisfiableLocked()
	s.dispatchLocked()
	return w, nil
}

// RunningTask is a task a registering worker runs: its id and, for an
// action, the action's digest (zero for a job's task).
type RunningTask struct {
	ID     string
	Action digest.Digest
}

// adoptLocked takes on the actions a worker runs that this scheduler did
// not assign: those of a server it took over from, as many as the worker
// has action slots for.
func (s *Scheduler) adoptLocked(w *Worker, running []RunningTask) {
	for _, r := range running {
		if len(w.running) < w.actionSlots {
			s.adoptOneLocked(w, r)
		}
	}
}

// adoptOneLocked takes on one action the worker runs under a task id this
// scheduler did not give: an action already queued here (a client's retry
// got here first) becomes the one the worker runs; an action in flight on
// another worker, or a task that is not an action's, is left alone.
func (s *Scheduler) adoptOneLocked(w *Worker, r RunningTask) *task {
	if r.Action.IsZero() || s.tasks[r.ID] != nil {
		return nil
	}
	t := s.inFlight[r.Action]
	switch {
	case t == nil:
		s.seq++
		t = &task{seq: s.seq, action: Action{Digest: r.Action}, received: s.cfg.Now(), changed: make(chan struct{})}
		s.inFlight[r.Action] = t
	case t.stage == Queued:
		s.queue = slices.DeleteFunc(s.queue, func(q *task) bool { return q == t })
		delete(s.tasks, t.id)
	default:
		return nil
	}
	t.id, t.stage, t.worker = r.ID, Executing, w
	t.attempts++
	s.tasks[t.id] = t
	w.running[t.id] = t
	s.changedLocked(t)
	return t
}

// AdoptFinished takes on an action a worker has finished under a task id
// this scheduler did not give (it ran for a server this one took over
// from, and ended before the worker reconnected), so that its result
// answers for it here; it returns the action and when it was received, as
// Owned does, and false when the action is in flight on another worker.
func (s *Scheduler) AdoptFinished(w *Worker, taskID string, d digest.Digest) (Action, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.adoptOneLocked(w, RunningTask{ID: taskID, Action: d})
	if t == nil {
		return Action{}, time.Time{}, false
	}
	return t.action, t.received, true
}

// Heartbeat records that the worker is alive.
func (s *Scheduler) Heartbeat(w *Worker) {
	s.mu.Lock()
	w.lastSeen = s.cfg.Now()
	s.mu.Unlock()
}

// Disconnect records that a worker's stream ended: it gets no new work,
// and what it runs waits for it to reconnect until it is lost (Tick).
func (s *Scheduler) Disconnect(w *Worker, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers[w.id] == w {
		w.connected = false
	}
}

// dropWorkerLocked removes w and re-queues its tasks, failing those that
// have used up their attempts.
func (s *Scheduler) dropWorkerLocked(w *Worker, why string) {
	if s.workers[w.id] == w {
		delete(s.workers, w.id)
	}
	select {
	case <-w.gone:
	default:
		close(w.gone)
	}
	for id, t := range w.running {
		delete(w.running, id)
		t.worker = nil
		t.deadline = time.Time{}
		if t.attempts >= s.cfg.MaxAttempts {
			s.completeLocked(t, &repb.ExecuteResponse{Status: status.Newf(codes.Unavailable,
				"action %s was lost with its worker %d times (last: %s)", t.action.Digest, t.attempts, why).Proto()})
			continue
		}
		s.enqueueLocked(t)
		s.changedLocked(t)
	}
}

// Status is a snapshot of the cluster for `rbs remote status`.
func (s *Scheduler) Status() *workerpb.StatusResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &workerpb.StatusResponse{Queue: &workerpb.QueueStatus{}, Jobs: map[string]int64{}}
	for _, w := range s.workers {
		ws := &workerpb.WorkerStatus{
			Id:                  w.id,
			Name:                w.name,
			Resources:           w.info.Resources,
			ActionSlots:         &workerpb.SlotUse{Used: int32(len(w.running)), Total: int32(w.actionSlots)},
			JobSlots:            &workerpb.SlotUse{Total: int32(w.info.JobSlots)},
			LastHeartbeatUnixMs: w.lastSeen.UnixMilli(),
			Version:             w.info.Version,
		}
		for _, p := range w.info.Properties {
			ws.Properties = append(ws.Properties, &workerpb.Property{Name: p.Name, Value: p.Value})
		}
		resp.Workers = append(resp.Workers, ws)
	}
	sort.Slice(resp.Workers, func(i, j int) bool { return resp.Workers[i].Id < resp.Workers[j].Id })
	for _, t := range s.tasks {
		switch t.stage {
		case Queued:
			resp.Queue.QueuedActions++
		case Executing:
			resp.Queue.ExecutingActions++
		}
	}
	resp.Actions = s.stats.snapshot()
	return resp
}

// CacheHit counts an Execute of action d answered from the action cache
// with res.
func (s *Scheduler) CacheHit(d digest.Digest, res *repb.ActionResult) {
	s.mu.Lock()
	s.stats.cacheHits++
	s.recent.add(cacheHitRecord(d, res, s.cfg.Now()))
	s.mu.Unlock()
}

// stats keeps recent per-action overheads (Execute received to result
// written) in a ring.
type stats struct {
	completed int64
	cacheHits int64
	ring      []time.Duration
	next      int
}

func (st *stats) record(d time.Duration) {
	st.completed++
	if len(st.ring) < overheadSamples {
		st.ring = append(st.ring, d)
		return
	}
	st.ring[st.next] = d
	st.next = (st.next + 1) % overheadSamples
}

func (st *stats) snapshot() *workerpb.ActionStats {
	out := &workerpb.ActionStats{Completed: st.completed, CacheHits: st.cacheHits}
	if len(st.ring) == 0 {
		return out
	}
	ds := append([]time.Duration(nil), st.ring...)
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	pct := func(p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1))]) / float64(time.Millisecond)
	}
	out.OverheadP50Ms, out.OverheadP99Ms = pct(0.50), pct(0.99)
	return out
}
