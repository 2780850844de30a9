// Package service provides Service, the batch scheduler's running shell
// around sched.Core: one goroutine owns the Core and applies requests in
// rounds; each round's changes are committed to the store in one
// transaction before any request of the round is answered or any worker is
// sent its assignment. It serves the Jobs gRPC API and is the jobs side of
// the worker streams.
//
// A commit that fails (a full disk, say) stops nothing. The round's
// requests are answered with an error and acknowledge nothing; a round that
// held a client's change is undone by reloading the Core from the store,
// and the workers are made to reconnect so that they report again what the
// undone round heard from them. Until a commit succeeds with room to spare,
// clients' changes are refused up front, while reads, running jobs and the
// workers' reports go on; those reports are kept and committed with the
// next round that can be.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/session"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// maxRound bounds how many requests one round applies.
	maxRound = 1000
	// logsPart is about how much output one read of the store holds in
	// memory while serving rbs job logs.
	logsPart = 4 << 20
)

// Service runs the scheduler.
type Service struct {
	jobspb.UnimplementedJobsServer
	store    *store.Store
	schedCfg sched.Config
	log      *slog.Logger
	tick     time.Duration
	// maintenance is told the workers in maintenance windows; last is
	// what it was told last.
	maintenance     func(all bool, workers []string)
	lastMaintenance string
	hasOutputs      func(ctx context.Context, root string) bool
	// checking bounds the cache checks that run at once.
	checking chan struct{}

	reqs chan *request
	done chan struct{} // closed when the loop has stopped
	err  error         // why it stopped

	// Owned by the loop goroutine.
	core *sched.Core
	// sessions holds the stream session of each connected worker, which
	// messages go through.
	sessions map[string]*session.Session
	// failing is why the last commit failed, nil once one has succeeded
	// with room to spare; while it is set, clients' changes are refused.
	failing error
	// pending is what rounds since the failure changed, with what they
	// would have sent to workers, for the next commit that succeeds.
	pending    *store.Batch
	pendingOut []sched.Outbound

	// view is what readers see (the Core's View), replaced with the Core.
	view    atomic.Pointer[sched.View]
	metrics *metrics

	mu      sync.Mutex
	changed chan struct{} // closed and replaced after every committed round
}

type request struct {
	fn func(c *sched.Core) error
	// write marks a client's change: it must be durable before it is
	// acknowledged, so it is refused while commits fail.
	write bool
	err   error
	done  chan struct{} // nil for fire-and-forget requests
	// next, set when done is closed, is closed after the round that
	// follows the request's.
	next <-chan struct{}
	// event, when set, names the request in rbs_job_event_seconds, which
	// counts from arrived.
	event   string
	arrived time.Time
}

// minSpace is the room the store's file system must have again before
// clients' changes are taken after a failed commit.
const minSpace = 1 << 20

// Config configures a Service.
type Config struct {
	Store  *store.Store
	Sched  sched.Config
	Log    *slog.Logger
	Tick   time.Duration // how often time-driven work runs; default 1s
	Buffer int           // request queue length; default 10000
	// Maintenance, when set, is told after a round which workers are in a
	// maintenance window (all, or those named) whenever that changes, so
	// that build actions stay off them too.
	Maintenance func(all bool, workers []string)
	// HasOutputs, when set, tells whether the CAS still holds every blob
	// of an output root (a Directory's digest, "HASH/SIZE"), before a job
	// is answered from the job cache with it; unset, it is taken to.
	HasOutputs func(ctx context.Context, root string) bool
}

// New loads the store and returns a Service; Run starts it.
func New(cfg Config) (*Service, error) {
	st, err := cfg.Store.Load()
	if err != nil {
		return nil, fmt.Errorf("loading jobs: %w", err)
	}
	var s *Service
	m := newMetrics(func(fn func(*sched.Core)) { s.read(fn) })
	cfg.Sched.Waited = m.waited
	core, err := sched.New(cfg.Sched, st)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = 10000
	}
	s = &Service{
		metrics:     m,
		store:       cfg.Store,
		schedCfg:    cfg.Sched,
		log:         cfg.Log,
		tick:        cfg.Tick,
		maintenance: cfg.Maintenance,
		hasOutputs:  cfg.HasOutputs,
		checking:    make(chan struct{}, maxChecks),
		reqs:        make(chan *request, cfg.Buffer),
		done:        make(chan struct{}),
		core:        core,
		sessions:    map[string]*session.Session{},
		changed:     make(chan struct{}),
	}
	s.view.Store(core.View())
	return s, nil
}

// Run applies requests until ctx is done or the store fails.
func (s *Service) Run(ctx context.Context) error {
	defer close(s.done)
	t := time.NewTicker(s.tick)
	defer t.Stop()
	for {
		var round []*request
		select {
		case <-ctx.Done():
			s.err = errors.New("the scheduler is stopping")
			return nil
		case r := <-s.reqs:
			round = append(round, r)
		case <-t.C:
			s.core.Tick()
		}
	drain:
		for len(round) < maxRound {
			select {
			case r := <-s.reqs:
				round = append(round, r)
			default:
				break drain
			}
		}
		if err := s.apply(round); err != nil {
			s.err = err
			for _, r := range round {
				if r.done != nil {
					r.err = status.Error(codes.Unavailable, err.Error())
					close(r.done)
				}
			}
			return err
		}
	}
}

// apply runs one round: its requests, scheduling, and the commit. Only an
// error that leaves the Core unusable (the store cannot be read back) or a
// commit fenced off by another server's lease stops the loop.
func (s *Service) apply(round []*request) error {
	writes := false
	for _, r := range round {
		if r.write && s.failing != nil {
			r.err = refused(s.failing)
			continue
		}
		writes = writes || r.write
		r.err = r.fn(s.core)
	}
	s.core.Schedule()
	batch, out := s.core.Flush()
	if s.pending != nil {
		s.pending.Merge(batch)
		batch, out = s.pending, append(s.pendingOut, out...)
	}
	if err := s.store.Commit(batch); err != nil {
		if errors.Is(err, store.ErrFenced) {
			// Another server is active: this one must not go on.
			return err
		}
		if s.failing == nil {
			s.log.Error("committing job state failed; clients' changes are refused until a commit succeeds", "err", err)
		}
		s.failing = err
		for _, r := range round {
			if r.write && r.err == nil {
				r.err = refused(err)
			}
		}
		if writes {
			// What the round's requests changed must not outlive their
			// refusal: start again from what is durable.
			if err := s.reload(); err != nil {
				return err
			}
		} else {
			s.pending, s.pendingOut = batch, out
		}
		s.answer(round, s.changes())
		return nil
	}
	s.pending, s.pendingOut = nil, nil
	if s.failing != nil {
		if left, err := s.store.SpaceLeft(); err == nil && left >= minSpace {
			s.log.Info("committing job state works again; taking clients' changes", "space_left", left)
			s.failing = nil
		}
	}
	if s.maintenance != nil {
		all, workers := s.core.InMaintenance()
		if key := fmt.Sprint(all, workers); key != s.lastMaintenance {
			s.lastMaintenance = key
			s.maintenance(all, workers)
		}
	}
	for _, o := range out {
		if sess := s.sessions[o.Worker]; sess != nil {
			sess.Send(o.Msg)
		}
	}
	for _, chk := range s.core.CacheChecks() {
		s.checkCache(chk)
	}
	sent := time.Now()
	for _, r := range round {
		if r.event != "" {
			s.metrics.acted(r.event, sent.Sub(r.arrived))
		}
	}
	// A client waiting on the round reads next what it changed; other
	// rounds leave the View to a later one while readers hold it.
	waited := false
	for _, r := range round {
		waited = waited || r.done != nil
	}
	s.core.Publish(waited)
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	next := s.changed
	s.mu.Unlock()
	s.answer(round, next)
	return nil
}

// maxChecks bounds the cache checks that run at once, and checkTime each.
const (
	maxChecks = 16
	checkTime = time.Minute
)

// checkCache answers a check the Core asked for, off the loop: whether the
// CAS still has the entry's outputs. One it cannot tell is a miss: the job
// runs.
func (s *Service) checkCache(chk sched.CacheCheck) {
	answer := func(present bool) {
		s.post(func(c *sched.Core) error { c.CacheChecked(chk, present); return nil })
	}
	if s.hasOutputs == nil {
		go answer(true)
		return
	}
	go func() {
		s.checking <- struct{}{}
		defer func() { <-s.checking }()
		ctx, cancel := context.WithTimeout(context.Background(), checkTime)
		defer cancel()
		answer(s.hasOutputs(ctx, chk.OutputRoot))
	}()
}

// answer wakes the requests of a round that wait for it; next is closed
// after a later round.
func (s *Service) answer(round []*request, next <-chan struct{}) {
	for _, r := range round {
		if r.done != nil {
			r.next = next
			close(r.done)
		}
	}
}

// reload replaces the Core with one loaded from the store, dropping what
// was not committed, and makes every worker reconnect: registering anew,
// each reports again what it runs, the output the store lacks and the job
// ends it has seen.
func (s *Service) reload() error {
	st, err := s.store.Load()
	if err != nil {
		return fmt.Errorf("reloading jobs after a failed commit: %w", err)
	}
	core, err := sched.New(s.schedCfg, st)
	if err != nil {
		return fmt.Errorf("reloading jobs after a failed commit: %w", err)
	}
	s.core = core
	s.view.Store(core.View())
	s.pending, s.pendingOut = nil, nil
	for _, sess := range s.sessions {
		sess.Drop()
	}
	clear(s.sessions)
	return nil
}

// refused is the answer to a client's change while commits fail.
func refused(err error) error {
	if store.IsFull(err) {
		return status.Error(codes.ResourceExhausted, "the server's disk is full: nothing of this request was recorded; try again once space is freed")
	}
	return status.Errorf(codes.Unavailable, "the server cannot record job state (%v): nothing of this request was recorded; try again later", err)
}

// do applies fn in the next round and returns once that round is durable.
func (s *Service) do(ctx context.Context, fn func(c *sched.Core) error) error {
	return s.run(ctx, &request{fn: fn, done: make(chan struct{})})
}

// doNext is do that also returns a channel closed after the round that
// follows fn's: what a later round changes, it announces.
func (s *Service) doNext(ctx context.Context, fn func(c *sched.Core) error) (<-chan struct{}, error) {
	r := &request{fn: fn, done: make(chan struct{})}
	err := s.run(ctx, r)
	return r.next, err
}

// doWrite is do for a client's change, which is refused while commits fail.
func (s *Service) doWrite(ctx context.Context, fn func(c *sched.Core) error) error {
	return s.run(ctx, &request{fn: fn, write: true, done: make(chan struct{})})
}

func (s *Service) run(ctx context.Context, r *request) error {
	r.arrived = time.Now()
	select {
	case s.reqs <- r:
	case <-s.done:
		return status.Error(codes.Unavailable, s.err.Error())
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	select {
	case <-r.done:
		return r.err
	case <-s.done:
		// The loop stopped; the round either committed (done is closed) or
		// never ran.
		select {
		case <-r.done:
			return r.err
		default:
			return status.Error(codes.Unavailable, s.err.Error())
		}
	}
}

// post applies fn in a coming round without waiting.
func (s *Service) post(fn func(c *sched.Core) error) { s.enqueue(&request{fn: fn}) }

// enqueue hands r to a coming round without waiting.
func (s *Service) enqueue(r *request) {
	r.arrived = time.Now()
	select {
	case s.reqs <- r:
	case <-s.done:
	}
}

// changes returns a channel closed after the next committed round.
func (s *Service) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Register adds the Jobs API to a gRPC server.
func (s *Service) Register(r grpc.ServiceRegistrar) { jobspb.RegisterJobsServer(r, s) }

// WorkerUp takes the session of a worker's new stream and returns how much
// output of each job attempt the worker runs is stored.
func (s *Service) WorkerUp(sess *session.Session) map[string]int64 {
	reg := sess.Reg
	info := sched.WorkerInfo{
		Name:             reg.Name,
		CPUs:             reg.Resources.GetCpus(),
		Memory:           reg.Resources.GetMemoryBytes(),
		GPUs:             reg.Resources.GetGpus(),
		JobSlots:         reg.JobSlots,
		Address:          reg.Address,
		ContainerRuntime: reg.Resources.GetContainerRuntime(),
		Platform:         reg.Platform,
	}
	for _, p := range reg.Properties {
		info.Properties = append(info.Properties, p.String())
	}
	var stored map[string]int64
	s.do(context.Background(), func(c *sched.Core) error {
		s.sessions[reg.Name] = sess
		c.WorkerUp(info, report(sess, reg.Holds))
		stored = c.OutputStored(reg.Name)
		return nil
	})
	return stored
}

// report is a worker's report of the job attempts it holds, as the Core
// takes it.
func report(sess *session.Session, r session.Report) sched.Report {
	rep := sched.Report{Running: map[string]int32{}, Finished: map[string]bool{}, Lost: func(task string) bool { return sess.Lost(r, task) }}
	for _, t := range r.Of(workerpb.SlotClass_SLOT_CLASS_JOB) {
		if t.Finished {
			rep.Finished[t.ID] = true
		} else {
			rep.Running[t.ID] = t.MasterPort
		}
	}
	return rep
}

// Reconcile takes what a worker reports holding in a heartbeat.
func (s *Service) Reconcile(sess *session.Session, r session.Report) {
	s.post(func(c *sched.Core) error {
		if s.sessions[sess.Name()] == sess {
			c.Reconcile(sess.Name(), report(sess, r))
		}
		return nil
	})
}

// WorkerDown is told that a session's stream has ended.
func (s *Service) WorkerDown(sess *session.Session) {
	s.post(func(c *sched.Core) error {
		if s.sessions[sess.Name()] != sess {
			return nil // a newer stream has taken over
		}
		delete(s.sessions, sess.Name())
		c.WorkerDown(sess.Name())
		return nil
	})
}

// WorkerLost is told by the owner of worker liveness that a worker is
// lost: its jobs are requeued, or end as NODE_FAIL.
func (s *Service) WorkerLost(name, why string) {
	s.post(func(c *sched.Core) error {
		c.WorkerLost(name, why)
		return nil
	})
}

// FromWorker takes a worker's job messages, in the order they arrived.
func (s *Service) FromWorker(sess *session.Session, m *workerpb.WorkerMessage) {
	name := sess.Name()
	switch k := m.Kind.(type) {
	case *workerpb.WorkerMessage_JobLog:
		s.post(func(c *sched.Core) error {
			c.Log(name, k.JobLog.TaskId, k.JobLog.Offset, k.JobLog.Skipped, k.JobLog.Data)
			return nil
		})
	case *workerpb.WorkerMessage_JobEnded:
		s.enqueue(&request{event: "end", fn: func(c *sched.Core) error {
			c.Ended(name, k.JobEnded)
			return nil
		}})
	case *workerpb.WorkerMessage_JobStdinAck:
		s.post(func(c *sched.Core) error {
			c.StdinAck(name, k.JobStdinAck.TaskId, k.JobStdinAck.Offset)
			return nil
		})
	case *workerpb.WorkerMessage_JobStarted:
		s.post(func(c *sched.Core) error {
			c.Started(name, k.JobStarted)
			return nil
		})
	}
}

// Status returns job counts by state and job slots in use by worker, as
// readers see them.
func (s *Service) Status() (counts map[string]int64, slots map[string]int32) {
	s.read(func(c *sched.Core) { counts, slots = c.Counts(), c.JobSlotsUsed() })
	return counts, slots
}

// readNext is read that also returns a channel closed after the next
// committed round, when readers may see more.
func (s *Service) readNext(fn func(c *sched.Core)) <-chan struct{} {
	next := s.changes()
	s.read(fn)
	return next
}

// await waits for next to close, for ctx to be done, or for the loop to
// stop.
func (s *Service) await(ctx context.Context, next <-chan struct{}) error {
	select {
	case <-next:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-s.done:
		return status.Error(codes.Unavailable, s.err.Error())
	}
}

// read calls fn with what readers see of the scheduler (sched.View), without
// going through the loop.
func (s *Service) read(fn func(c *sched.Core)) { s.view.Load().Read(fn) }
