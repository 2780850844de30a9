// Package scheduler provides Scheduler, the execution queue of an rbs
// server. It separates a task (one execution of an action) from the
// operations clients hold on it, so identical actions in flight share one
// execution; it matches tasks to workers by platform properties, tracks
// worker heartbeats, re-queues the work of lost workers, and fails tasks that
// overrun their timeout.
//
// All state changes happen under one lock, with the clock and the id
// generator injected, so tests script timelines without sleeping. The
// Scheduler does no I/O: the server writes action results before it reports
// them with Complete, and carries messages between workers and their
// outboxes.
package scheduler

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/session"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults for Config.
const (
	DefaultHeartbeatTimeout = 15 * time.Second
	// DefaultTimeoutGrace is how long past an action's timeout the server
	// waits for the worker's own report before failing the task itself.
	DefaultTimeoutGrace = 30 * time.Second
	// DefaultMaxAttempts bounds how often a task is dispatched again after
	// its worker was lost.
	DefaultMaxAttempts = 5
	// DefaultRetention is how long a finished operation stays available to
	// WaitExecution.
	DefaultRetention = 10 * time.Minute
	overheadSamples  = 10000
)

// Config holds the Scheduler's injected dependencies and limits.
type Config struct {
	Now   func() time.Time
	NewID func() string
	// HeartbeatTimeout is the one deadline of worker liveness: a worker
	// not heard from for this long, whether its stream is gone or silent,
	// is lost, for its actions and its jobs alike.
	HeartbeatTimeout time.Duration
	// Lost, when set, is told each worker found lost, outside the
	// Scheduler's lock: the jobs of the worker go elsewhere then too.
	Lost         func(worker, why string)
	TimeoutGrace time.Duration
	MaxAttempts  int
	Retention    time.Duration
}

// Stage is where a task is in its life.
type Stage int

// The stages of a task, as in REAPI's ExecutionStage.
const (
	Queued Stage = iota
	Executing
	Completed
)

func (s Stage) String() string {
	return [...]string{"QUEUED", "EXECUTING", "COMPLETED"}[s]
}

// Proto returns the REAPI execution stage.
func (s Stage) Proto() repb.ExecutionStage_Value {
	return [...]repb.ExecutionStage_Value{repb.ExecutionStage_QUEUED, repb.ExecutionStage_EXECUTING, repb.ExecutionStage_COMPLETED}[s]
}

// Property is one platform property an action requires or a worker offers.
type Property = session.Property

// Action is what the scheduler needs to know about an action to run.
type Action struct {
	Digest     digest.Digest
	Platform   []Property
	Timeout    time.Duration // 0: none
	DoNotCache bool
	Priority   int32 // lower runs first, as in REAPI's ExecutionPolicy
	// ActionBlob and CommandBlob are the serialized Action and Command,
	// passed to the worker with the assignment.
	ActionBlob, CommandBlob []byte
}

// Scheduler is the execution queue. Its methods are safe for concurrent use.
type Scheduler struct {
	cfg Config

	mu       sync.Mutex
	seq      uint64
	inFlight map[digest.Digest]*task // deduplicable tasks not yet completed
	// done holds deduplicable tasks completed within the retention, for
	// Resume.
	done  map[digest.Digest]*task
	tasks map[string]*task // by id, not yet completed
	// ended holds the ids of tasks completed here within the retention,
	// with when: a late report of one, from a worker that was lost (cut
	// off, not dead) while its task ran again elsewhere, is stale.
	ended   map[string]time.Time
	queue   []*task // queued tasks, in dispatch order
	ops     map[string]*Operation
	workers map[string]*Worker
	stats   stats
	recent  recent
	// maint and maintAll are the workers in a maintenance window, which
	// get no new action.
	maint    map[string]bool
	maintAll bool
}

type task struct {
	id       string
	seq      uint64
	action   Action
	stage    Stage
	worker   *Worker
	attempts int
	deadline time.Time // while executing with a timeout
	// heldUntil keeps a resumed action queued until then, for the
	// worker that may run it for the server before to report it.
	heldUntil time.Time
	received  time.Time
	// completed is when a deduplicable task completed, for its retention
	// in done.
	completed time.Time
	response  *repb.ExecuteResponse
	changed   chan struct{} // closed and replaced on every change
}

// New returns a Scheduler.
func New(cfg Config) *Scheduler {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HeartbeatTimeout == 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.TimeoutGrace == 0 {
		cfg.TimeoutGrace = DefaultTimeoutGrace
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	return &Scheduler{
		cfg:      cfg,
		inFlight: map[digest.Digest]*task{},
		done:     map[digest.Digest]*task{},
		tasks:    map[string]*task{},
		ended:    map[string]time.Time{},
		ops:      map[string]*Operation{},
		workers:  map[string]*Worker{},
	}
}

// Operation is a client's handle on a task.
type Operation struct {
	Name     string
	task     *task
	finished time.Time // when the task completed, for retention
}

// Snapshot is an operation's state at one moment.
type Snapshot struct {
	Name     string
	Action   digest.Digest
	Stage    Stage
	Response *repb.ExecuteResponse // set when Completed
	// Changed is closed when the state moves on from this snapshot.
	Changed <-chan struct{}
}

// Submit queues an action and returns an operation on it. An identical
// action already in flight is joined instead, unless either does not cache.
// It fails with FAILED_PRECONDITION when workers are registered and none of
// them offers the action's platform.
func (s *Scheduler) Submit(a Action) (*Operation, error) {
	return s.submit(a, 0)
}

// submit is Submit, with a new task held in the queue for hold.
func (s *Scheduler) submit(a Action, hold time.Duration) (*Operation, error) {
	sort.Slice(a.Platform, func(i, j int) bool {
		if a.Platform[i].Name != a.Platform[j].Name {
			return a.Platform[i].Name < a.Platform[j].Name
		}
		return a.Platform[i].Value < a.Platform[j].Value
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.inFlight[a.Digest]; ok && !a.DoNotCache {
		return s.newOpLocked(t), nil
	}
	if err := s.satisfiableLocked(a.Platform); err != nil {
		return nil, err
	}
	s.seq++
	t := &task{
		id:       s.cfg.NewID(),
		seq:      s.seq,
		action:   a,
		received: s.cfg.Now(),
		changed:  make(chan struct{}),
	}
	if hold > 0 {
		t.heldUntil = t.received.Add(hold)
	}
	s.tasks[t.id] = t
	if !a.DoNotCache {
		s.inFlight[a.Digest] = t
	}
	s.enqueueLocked(t)
	op := s.newOpLocked(t)
	s.dispatchLocked()
	return op, nil
}

// Resume is Submit for an operation another server started, that a client
// waits on here: an identical action that completed here within the
// retention answers too (it ran for the same operation, adopted from a
// worker, and may have ended between the client's look at the action cache
// and this call). A new task waits in the queue, for as long as a worker
// may be silent (HeartbeatTimeout), before it goes to a worker: a worker
// may be running the action for the server before, and reconnecting, and
// adopting it then (adoptOneLocked) runs it once.
func (s *Scheduler) Resume(a Action) (*Operation, error) {
	s.mu.Lock()
	if t, ok := s.done[a.Digest]; ok && !a.DoNotCache {
		op := s.newOpLocked(t)
		op.finished = s.cfg.Now()
		s.mu.Unlock()
		return op, nil
	}
	s.mu.Unlock()
	return s.submit(a, s.cfg.HeartbeatTimeout)
}

func (s *Scheduler) newOpLocked(t *task) *Operation {
	op := &Operation{Name: s.cfg.NewID(), task: t}
	s.ops[op.Name] = op
	return op
}

// Watch returns the current state of the named operation.
func (s *Scheduler) Watch(name string) (Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op, ok := s.ops[name]
	if !ok {
		return Snapshot{}, status.Errorf(codes.NotFound, "operation %q not found", name)
	}
	t := op.task
	return Snapshot{Name: op.Name, Action: t.action.Digest, Stage: t.stage, Response: t.response, Changed: t.changed}, nil
}

func (s *Scheduler) enqueueLocked(t *task) {
	t.stage = Queued
	i := sort.Search(len(s.queue), func(i int) bool {
		q := s.queue[i]
		if q.action.Priority != t.action.Priority {
			return q.action.Priority > t.action.Priority
		}
		return q.seq > t.seq
	})
	s.queue = append(s.queue, nil)
	copy(s.queue[i+1:], s.queue[i:])
	s.queue[i] = t
}

func (s *Scheduler) changedLocked(t *task) {
	close(t.changed)
	t.changed = make(chan struct{})
}

// dispatchLocked assigns queued tasks to workers with free action slots,
// in queue order, preferring the least loaded feasible worker.
func (s *Scheduler) dispatchLocked() {
	free := 0
	for _, w := range s.workers {
		free += w.actionSlots() - len(w.running)
	}
	kept := s.queue[:0]
	now := s.cfg.Now()
	for i, t := range s.queue {
		if free == 0 {
			kept = append(kept, s.queue[i:]...)
			break
		}
		if now.Before(t.heldUntil) {
			kept = append(kept, t)
			continue
		}
		w := s.pickLocked(t)
		if w == nil {
			kept = append(kept, t)
			continue
		}
		free--
		t.stage = Executing
		t.worker = w
		t.attempts++
		if t.action.Timeout > 0 {
			t.deadline = s.cfg.Now().Add(t.action.Timeout + s.cfg.TimeoutGrace)
		}
		w.running[t.id] = t
		w.sess.Send(&workerpb.ServerMessage{Kind: &workerpb.ServerMessage_AssignAction{AssignAction: &workerpb.AssignAction{
			TaskId:       t.id,
			ActionDigest: &workerpb.Digest{Hash: t.action.Digest.Hash(), SizeBytes: t.action.Digest.Size()},
			Action:       t.action.ActionBlob,
			Command:      t.action.CommandBlob,
		}}})
		s.changedLocked(t)
	}
	for i := len(kept); i < len(s.queue); i++ {
		s.queue[i] = nil
	}
	s.queue = kept
}

func (s *Scheduler) pickLocked(t *task) *Worker {
	var best *Worker
	for _, w := range s.workers {
		if !w.sess.Connected() || s.inMaintenanceLocked(w) || len(w.running) >= w.actionSlots() || !w.offers(t.action.Platform) {
			continue
		}
		if best == nil || w.actionSlots()-len(w.running) > best.actionSlots()-len(best.running) ||
			w.actionSlots()-len(w.running) == best.actionSlots()-len(best.running) && w.id < best.id {
			best = w
		}
	}
	return best
}

// satisfiableLocked reports FAILED_PRECONDITION when workers are registered
// and none could ever run an action with this platform. With no worker
// registered at all, actions wait for one.
func (s *Scheduler) satisfiableLocked(platform []Property) error {
	if len(s.workers) == 0 {
		return nil
	}
	for _, w := range s.workers {
		if w.offers(platform) {
			return nil
		}
	}
	for _, p := range platform {
		offered := false
		for _, w := range s.workers {
			if w.props[p.Name][p.Value] {
				offered = true
				break
			}
		}
		if !offered {
			return status.Errorf(codes.FailedPrecondition, "no worker offers platform property %s (registered workers offer: %s)", p, s.offeredLocked(p.Name))
		}
	}
	names := make([]string, len(platform))
	for i, p := range platform {
		names[i] = p.String()
	}
	return status.Errorf(codes.FailedPrecondition, "no single worker offers all of the platform properties %s", strings.Join(names, ", "))
}

func (s *Scheduler) offeredLocked(name string) string {
	seen := map[string]bool{}
	var vals []string
	for _, w := range s.workers {
		for v := range w.props[name] {
			if !seen[v] {
				seen[v] = true
				vals = append(vals, name+"="+v)
			}
		}
	}
	if len(vals) == 0 {
		return "no " + name
	}
	sort.Strings(vals)
	return strings.Join(vals, ", ")
}

// failUnsatisfiableLocked fails queued tasks no registered worker can run,
// after the set of workers changed.
func (s *Scheduler) failUnsatisfiableLocked() {
	kept := s.queue[:0]
	for _, t := range s.queue {
		if err := s.satisfiableLocked(t.action.Platform); err != nil {
			s.completeLocked(t, &repb.ExecuteResponse{Status: status.Convert(err).Proto()})
			continue
		}
		kept = append(kept, t)
	}
	s.queue = kept
}

// completeLocked ends a task with resp and wakes its watchers.
func (s *Scheduler) completeLocked(t *task, resp *repb.ExecuteResponse) {
	now := s.cfg.Now()
	t.stage = Completed
	t.response = resp
	worker := ""
	if t.worker != nil {
		worker = t.worker.name
	}
	s.recent.add(actionRecord(t, worker, resp, now))
	if t.worker != nil {
		delete(t.worker.running, t.id)
		t.worker = nil
	}
	delete(s.tasks, t.id)
	s.ended[t.id] = now
	if s.inFlight[t.action.Digest] == t {
		delete(s.inFlight, t.action.Digest)
		t.completed = now
		s.done[t.action.Digest] = t
	}
	for _, op := range s.ops {
		if op.task == t {
			op.finished = now
		}
	}
	s.stats.record(now.Sub(t.received))
	s.changedLocked(t)
}

// Complete reports the end of a task run by worker workerID. The caller has
// already written the result to the action cache where it should be. A
// report for a task the worker no longer owns (it was re-dispatched or timed
// out) is ignored.
func (s *Scheduler) Complete(workerID, taskID string, resp *repb.ExecuteResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok || t.worker == nil || t.worker.id != workerID {
		return
	}
	s.completeLocked(t, resp)
	s.dispatchLocked()
}

// Tick does the time-driven work: workers silent past the heartbeat timeout
// are dropped and their tasks re-queued; executing tasks past their timeout
// (plus grace) fail with DEADLINE_EXCEEDED; old finished operations are
// forgotten. The server calls it periodically; tests call it after moving
// their clock.
func (s *Scheduler) Tick() {
	var lost []string
	var whys []string
	defer func() {
		for i, name := range lost {
			if s.cfg.Lost != nil {
				s.cfg.Lost(name, whys[i])
			}
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	for _, w := range s.workers {
		if since := w.sess.Silent(now); since > s.cfg.HeartbeatTimeout {
			why := fmt.Sprintf("worker %s silent for %s", w.name, since.Round(time.Second))
			if !w.sess.Connected() {
				why = fmt.Sprintf("worker %s gone for %s", w.name, since.Round(time.Second))
			}
			s.dropWorkerLocked(w, why)
			lost, whys = append(lost, w.name), append(whys, why)
		}
	}
	for _, t := range s.tasks {
		if t.stage == Executing && !t.deadline.IsZero() && now.After(t.deadline) {
			w := t.worker
			w.sess.Send(&workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Cancel{Cancel: &workerpb.Cancel{TaskId: t.id}}})
			s.completeLocked(t, &repb.ExecuteResponse{Status: status.Newf(codes.DeadlineExceeded,
				"action %s did not finish within its timeout of %s", t.action.Digest, t.action.Timeout).Proto()})
		}
	}
	for name, op := range s.ops {
		if !op.finished.IsZero() && now.Sub(op.finished) > s.cfg.Retention {
			delete(s.ops, name)
		}
	}
	for d, t := range s.done {
		if now.Sub(t.completed) > s.cfg.Retention {
			delete(s.done, d)
		}
	}
	for id, at := range s.ended {
		if now.Sub(at) > s.cfg.Retention {
			delete(s.ended, id)
		}
	}
	s.dispatchLocked()
}

// Owned returns the action of a task that worker w is executing, and when
// the task was received.
func (s *Scheduler) Owned(w *Worker, taskID string) (Action, time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[taskID]
	if !ok || t.worker != w {
		return Action{}, time.Time{}, false
	}
	return t.action, t.received, true
}

// Load is how busy the action queue is at one moment.
type Load struct {
	Queued  int // actions waiting for a slot
	Workers int // workers connected
	// Slots and SlotsUsed are the action slots of the connected workers,
	// offered and running an action.
	Slots, SlotsUsed int
}

// Load returns the queue's load, holding the lock for one pass over the
// workers.
func (s *Scheduler) Load() Load {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Load{Queued: len(s.queue)}
	for _, w := range s.workers {
		if w.sess.Connected() {
			l.Workers++
			l.Slots += w.actionSlots()
			l.SlotsUsed += len(w.running)
		}
	}
	return l
}

// SetMaintenance sets the workers in a maintenance window, all of them or
// those named: no new action starts on them; those running finish.
func (s *Scheduler) SetMaintenance(all bool, workers []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maintAll, s.maint = all, map[string]bool{}
	for _, w := range workers {
		s.maint[w] = true
	}
	s.dispatchLocked()
}

func (s *Scheduler) inMaintenanceLocked(w *Worker) bool { return s.maintAll || s.maint[w.name] }
