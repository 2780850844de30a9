package scheduler

import (
	"fmt"
	"slices"
	"sort"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/session"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Worker is a registered worker as the action queue sees it: its session,
// its action slots and the actions it runs.
type Worker struct {
	sess    *session.Session
	id      string
	name    string
	props   map[string]map[string]bool
	running map[string]*task
}

// ID returns the worker's id, which is its name.
func (w *Worker) ID() string { return w.id }

// Session returns the worker's stream session.
func (w *Worker) Session() *session.Session { return w.sess }

func (w *Worker) actionSlots() int { return w.sess.Reg.ActionSlots }

func (w *Worker) offers(platform []Property) bool {
	for _, p := range platform {
		if !w.props[p.Name][p.Value] {
			return false
		}
	}
	return true
}

// RegisterWorker adds the worker of a new session. A worker reconnecting
// with the same name and process replaces its old registration and keeps
// the tasks it reports; another process under a name already connected is
// refused. What the worker reports holding is reconciled as its first
// report (Reconcile), with actions of a server this one took over from
// adopted.
func (s *Scheduler) RegisterWorker(sess *session.Session) (*Worker, error) {
	reg := sess.Reg
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &Worker{
		sess:    sess,
		id:      reg.Name,
		name:    reg.Name,
		props:   map[string]map[string]bool{},
		running: map[string]*task{},
	}
	for _, p := range reg.Properties {
		if w.props[p.Name] == nil {
			w.props[p.Name] = map[string]bool{}
		}
		w.props[p.Name][p.Value] = true
	}
	if old, ok := s.workers[w.id]; ok && old.sess.Reg.Process != reg.Process {
		if old.sess.Connected() {
			return nil, status.Errorf(codes.AlreadyExists, "a worker named %q is already connected; give each worker a distinct --name", reg.Name)
		}
		// A new process under the name of one gone: what the old one ran
		// is lost with it.
		s.dropWorkerLocked(old, "worker restarted")
	}
	if old, ok := s.workers[w.id]; ok {
		// The same process reconnecting: it keeps what it still holds.
		for _, r := range reg.Holds.Tasks {
			if t := old.running[r.ID]; t != nil {
				delete(old.running, r.ID)
				t.worker = w
				w.running[r.ID] = t
			}
		}
		s.dropWorkerLocked(old, "worker reconnected")
	}
	s.workers[w.id] = w
	s.reconcileLocked(w, reg.Holds)
	s.failUnsatisfiableLocked()
	s.dispatchLocked()
	return w, nil
}

// Reconcile brings what the scheduler holds of worker w in line with what
// the worker reports holding (its heartbeat): an action the worker runs
// that was not given to it is cancelled, and one given to it that it no
// longer holds is lost and queued again.
func (s *Scheduler) Reconcile(w *Worker, r session.Report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.workers[w.id] != w {
		return
	}
	s.reconcileLocked(w, r)
	s.dispatchLocked()
}

// reconcileLocked is Reconcile. A registration's report (the worker's
// holdings from before the stream) also adopts the actions the worker
// runs or finished for a server this one took over from, as many as it
// has action slots for.
func (s *Scheduler) reconcileLocked(w *Worker, r session.Report) {
	for id, t := range w.running {
		if w.sess.Lost(r, id) {
			delete(w.running, id)
			s.requeueLocked(t, fmt.Sprintf("worker %s no longer runs it", w.name))
		}
	}
	for _, h := range r.Of(workerpb.SlotClass_SLOT_CLASS_ACTION) {
		if w.running[h.ID] != nil {
			continue
		}
		if r.Whole() && len(w.running) < w.actionSlots() && s.adoptOneLocked(w, h) != nil {
			continue
		}
		if !h.Finished {
			w.sess.Send(&workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Cancel{Cancel: &workerpb.Cancel{TaskId: h.ID}}})
		}
	}
}

// adoptOneLocked takes on one action the worker runs under a task id this
// scheduler did not give: an action already queued here (a client's retry
// got here first) becomes the one the worker runs; an action in flight on
// another worker, a task that is not an action's, or one that ended here
// (its worker was lost meanwhile, and it ran elsewhere), is left alone.
func (s *Scheduler) adoptOneLocked(w *Worker, r session.Task) *task {
	if _, ended := s.ended[r.ID]; ended || r.Action.IsZero() || s.tasks[r.ID] != nil {
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
	t := s.adoptOneLocked(w, session.Task{ID: taskID, Action: d})
	if t == nil {
		return Action{}, time.Time{}, false
	}
	return t.action, t.received, true
}

// Disconnect records that a worker's stream ended: it gets no new work,
// and what it runs waits for it to reconnect until it is lost (Tick).
func (s *Scheduler) Disconnect(w *Worker) {
	w.sess.End()
}

// dropWorkerLocked removes w and re-queues its tasks, failing those that
// have used up their attempts.
func (s *Scheduler) dropWorkerLocked(w *Worker, why string) {
	if s.workers[w.id] == w {
		delete(s.workers, w.id)
	}
	w.sess.Drop()
	for id, t := range w.running {
		delete(w.running, id)
		s.requeueLocked(t, why)
	}
}

// requeueLocked queues again a task lost from its worker, or fails it when
// it has used up its attempts.
func (s *Scheduler) requeueLocked(t *task, why string) {
	t.worker = nil
	t.deadline = time.Time{}
	if t.attempts >= s.cfg.MaxAttempts {
		s.completeLocked(t, &repb.ExecuteResponse{Status: status.Newf(codes.Unavailable,
			"action %s was lost with its worker %d times (last: %s)", t.action.Digest, t.attempts, why).Proto()})
		return
	}
	s.enqueueLocked(t)
	s.changedLocked(t)
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
			Resources:           w.sess.Reg.Resources,
			ActionSlots:         &workerpb.SlotUse{Used: int32(len(w.running)), Total: int32(w.actionSlots())},
			JobSlots:            &workerpb.SlotUse{Total: int32(w.sess.Reg.JobSlots)},
			LastHeartbeatUnixMs: w.sess.LastSeen().UnixMilli(),
			Version:             w.sess.Reg.Version,
		}
		for _, p := range w.sess.Reg.Properties {
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
