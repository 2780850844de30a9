package main

import (
	"container/heap"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// Config is what a simulation runs.
type Config struct {
	Workers int
	Jobs    int
	Mix     string // simple or full
	Store   string // memory or sqlite
	Seed    int64
	// Progress, when set, takes a line every 10 simulated minutes.
	Progress io.Writer
	// Round is the simulated time between scheduling rounds: what
	// happens within one is applied in one round, as the server applies
	// what arrives while a round runs in the next.
	Round time.Duration
}

func defaults() Config {
	return Config{Workers: 10000, Jobs: 1000000, Mix: "full", Store: "memory", Seed: 1, Round: 250 * time.Millisecond}
}

// Result holds the figures of a run.
type Result struct {
	Workers int    `json:"workers"`
	Jobs    int    `json:"jobs"`
	Mix     string `json:"mix"`
	Store   string `json:"store"`
	// Placements are job attempts started (a gang's counts once);
	// PlacementsPerS is per second of scheduler time: the core's calls
	// and, with sqlite, the commits.
	Placements     int64   `json:"placements"`
	PlacementsPerS float64 `json:"placements_per_s"`
	SchedulerS     float64 `json:"scheduler_s"`
	CommitS        float64 `json:"commit_s"`
	// ScheduleS is the part of the scheduler time spent deciding
	// (Core.Schedule): without taking submissions, starts and ends in,
	// or publishing the result for readers. DecidedPerS is placements per
	// second of it, as in-process benchmarks of schedulers count.
	ScheduleS   float64 `json:"schedule_s"`
	DecidedPerS float64 `json:"decided_per_s"`
	Rounds      int     `json:"rounds"`
	P50RoundMs  float64 `json:"p50_round_ms"`
	P99RoundMs  float64 `json:"p99_round_ms"`
	MaxRoundMs  float64 `json:"max_round_ms"`
	// HeapBytesPerJob is the core's heap per pending job, measured apart:
	// a core with no worker given the workload's first jobs.
	HeapBytesPerJob float64 `json:"heap_bytes_per_job"`
	PeakHeapBytes   uint64  `json:"peak_heap_bytes"`
	JobsCompleted   int64   `json:"jobs_completed"`
	SimulatedS      float64 `json:"simulated_s"`
	// LongestGangWaitS is the longest wait of a gang, and
	// LongestSingleWaitS of a single of a queue and priority gangs had.
	LongestGangWaitS   float64 `json:"longest_gang_wait_s"`
	LongestSingleWaitS float64 `json:"longest_single_wait_s"`
	// Starved counts the jobs placed later than 3x their ideal wait (see
	// fairness), WorstWaitRatio the worst such ratio. StarvedAnySize and
	// WorstAnySize are the same with the ideal wait taken over jobs of
	// every size.
	Starved        int     `json:"starved"`
	WorstWaitRatio float64 `json:"worst_wait_ratio"`
	StarvedAnySize int     `json:"starved_any_size"`
	WorstAnySize   float64 `json:"worst_wait_ratio_any_size"`
	// PassedOver counts, at each start of a single job, the jobs that
	// waited still though they ask exactly what it asks (same user,
	// queue, priority, CPUs, memory, GPUs, platform and container) and
	// were submitted before it: the order the policy gives such jobs,
	// broken. PassedOverByLimit are those of them that asked a longer
	// time limit than the job that started, which backfill may pass on
	// purpose (a hole before a reservation fits the shorter).
	PassedOver        int `json:"passed_over"`
	PassedOverByLimit int `json:"passed_over_by_limit"`
	// FairShareError is the mean, over the minutes sampled while every
	// account has work waiting, of the largest gap between an account's
	// share of the decayed usage and its normalised share (0 is exact).
	FairShareError float64 `json:"fair_share_error"`
	// Gangs8 counts the 8-node gang attempts started (packed by rack),
	// Gangs8OneRack those that landed in one rack.
	Gangs8        int `json:"gangs8"`
	Gangs8OneRack int `json:"gangs8_one_rack"`
	// Utilisation is the share of CPUs and GPUs in use, sampled over the
	// run.
	Utilisation []Sample `json:"utilisation"`
}

// Sample is the fleet's use at one moment.
type Sample struct {
	AtS  float64 `json:"at_s"`
	CPUs float64 `json:"cpus"`
	GPUs float64 `json:"gpus"`
}

// committer takes each round's batch, as the server's store does.
type committer interface {
	Commit(*store.Batch) error
}

// memory is the in-memory fake store: it takes the batch and keeps
// nothing.
type memory struct{}

func (memory) Commit(*store.Batch) error { return nil }

// node is a rank of a job attempt running on a simulated worker.
type node struct {
	id     int64 // the job's
	worker string
	task   string
	cpus   int32
	mem    int64
	gpus   []int32
	ended  bool
}

// end is when a node ends, as its worker reports it.
type end struct {
	at    time.Time
	n     *node
	state string
}

type ends []end

func (e ends) Len() int           { return len(e) }
func (e ends) Less(i, j int) bool { return e[i].at.Before(e[j].at) }
func (e ends) Swap(i, j int)      { e[i], e[j] = e[j], e[i] }
func (e *ends) Push(x any)        { *e = append(*e, x.(end)) }
func (e *ends) Pop() any {
	old := *e
	n := old[len(old)-1]
	*e = old[:len(old)-1]
	return n
}

// simWorker is what the simulation knows of a worker, to check that the
// core never over-commits it.
type simWorker struct {
	info      sched.WorkerInfo
	cpus      int32
	mem       int64
	slots     int
	gpuHolder map[int32]string
}

// rack is the worker's rack label.
func (w *simWorker) rack() string {
	for _, p := range w.info.Properties {
		if r, ok := strings.CutPrefix(p, "rack="); ok {
			return r
		}
	}
	return ""
}

// gangState follows the ranks of one gang attempt.
type gangState struct {
	want     int
	assigned int
	kind     kind
	racks    map[string]bool // those its ranks run in
}

// sim is one simulation.
type sim struct {
	cfg     Config
	now     time.Time
	start   time.Time
	core    *sched.Core
	store   committer
	work    *workload
	workers map[string]*simWorker
	running map[string]*node // by worker/task
	ends    ends
	// meta holds what the simulation decided of each job: its kind and
	// how long it runs.
	meta    map[int64]jobMeta
	gangs   map[string]*gangState // by task
	started []string              // worker/task of gangs' ranks 0 to report
	// submitted is when each job id was submitted; waits collects the
	// wait of each job attempt at its start.
	submitted map[int64]time.Time
	// after holds, for each job of a chain but the last, the job that
	// waits on it.
	after    map[int64]int64
	waits    []wait
	res      Result
	rounds   []time.Duration
	totalCPU float64
	totalGPU float64
	usedCPU  float64
	usedGPU  float64
	// fairErrors are the fair-share errors sampled (see fairShareError);
	// pendingIn counts each account's jobs not yet started.
	fairErrors []float64
	pendingIn  [accounts]int
	// alike holds the single jobs waiting, by what they ask (see
	// PassedOver), in submission order.
	alike map[asks][]int64
}

// asks is what a single job asks of the scheduler that orders it among
// jobs alike: its user's fair share, queue, priority and shape.
type asks struct {
	user, queue, platform, container string
	priority, cpus, gpus             int32
	memory                           int64
}

// asksOf is what sp asks.
func asksOf(sp *jobspb.JobSpec) asks {
	return asks{user: sp.User, queue: sp.Queue, platform: sp.Platform, container: sp.Container,
		priority: sp.Priority, cpus: sp.Cpus, gpus: sp.Gpus, memory: sp.MemoryBytes}
}

type jobMeta struct {
	kind     kind
	account  int
	duration time.Duration
	nodes    int
	priority int32
	queue    string
	asks     asks
	limitMs  int64
	// requeued says it was preempted: its later starts wait from the
	// requeue.
	requeued bool
}

type wait struct {
	kind  kind
	group group
	user  string
	d     time.Duration
	at    time.Duration // since the start, when it started
	size  size
	// restart says the start follows a preemption.
	restart bool
}

// group is a job's queue, priority and account.
type group struct {
	queue    string
	priority int32
	account  int
}

// size is what a job asks of the fleet that decides how soon room frees
// for it: its CPUs, GPUs and nodes.
type size struct{ cpus, gpus, nodes int32 }

// Run runs a simulation.
func Run(cfg Config) (*Result, error) {
	if cfg.Mix != "simple" && cfg.Mix != "full" {
		return nil, fmt.Errorf("--mix %q: want simple or full", cfg.Mix)
	}
	if cfg.Workers <= 0 || cfg.Jobs <= 0 {
		return nil, fmt.Errorf("--workers %d and --jobs %d must be positive", cfg.Workers, cfg.Jobs)
	}
	if cfg.Round <= 0 {
		cfg.Round = defaults().Round
	}
	s := &sim{cfg: cfg, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), workers: map[string]*simWorker{},
		running: map[string]*node{}, meta: map[int64]jobMeta{}, gangs: map[string]*gangState{}, submitted: map[int64]time.Time{}, after: map[int64]int64{}, alike: map[asks][]int64{}}
	s.start = s.now
	s.res = Result{Workers: cfg.Workers, Jobs: cfg.Jobs, Mix: cfg.Mix, Store: cfg.Store}
	switch cfg.Store {
	case "memory":
		s.store = memory{}
	case "sqlite":
		dir, err := os.MkdirTemp("", "rbs-sim-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		st, err := store.Open(dir)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		s.store = st
	default:
		return nil, fmt.Errorf("--store %q: want memory or sqlite", cfg.Store)
	}
	infos := fleet(cfg)
	heapPerJob, err := heapPerPendingJob(cfg, infos)
	if err != nil {
		return nil, err
	}
	s.res.HeapBytesPerJob = heapPerJob
	if err := s.run(infos); err != nil {
		return nil, err
	}
	return &s.res, nil
}

// schedConfig is the cluster's configuration: 8 queues of rising
// priority, fair share over 5 accounts with shares 1 to 5, the users
// dealt among them in turn, and a job spared preemption for its first 5
// minutes after each start (serve's --preempt-exempt), as a site whose
// lowest queue is preemptible sets it.
func schedConfig(now func() time.Time) sched.Config {
	cfg := sched.Config{Now: now, FairShare: sched.DefaultFairShare(), PreemptExempt: 5 * time.Minute}
	cfg.FairShare.HalfLife = time.Hour
	for q := range queues {
		cfg.Queues = append(cfg.Queues, sched.Queue{Name: fmt.Sprintf("q%d", q), Priority: int32(10 * q), Default: q == 1})
	}
	for a := range accounts {
		acct := sched.Account{Name: fmt.Sprintf("a%d", a), Shares: int64(a + 1), Users: map[string]int64{}}
		for u := a; u < users; u += accounts {
			acct.Users[userName(u)] = 1
		}
		cfg.FairShare.Accounts = append(cfg.FairShare.Accounts, acct)
	}
	return cfg
}

// accountOf is the account the workload's user is in (see schedConfig).
func accountOf(user string) int {
	u, _ := strconv.Atoi(strings.TrimPrefix(user, "u"))
	return u % accounts
}

// fairShareError is how far the accounts' decayed usage is from their
// shares: the largest difference between an account's share of the usage
// and its normalised share.
func fairShareError(core *sched.Core) float64 {
	worst := 0.0
	for _, a := range core.Shares().Accounts {
		worst = max(worst, math.Abs(a.Usage-a.Share))
	}
	return worst
}

// heapPerPendingJob measures the core's heap per pending job: a core with
// no worker is given the workload's first jobs (at most 100,000), and the
// heap it holds then is divided among them.
func heapPerPendingJob(cfg Config, infos []sched.WorkerInfo) (float64, error) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sample := cfg
	sample.Jobs = min(cfg.Jobs, 100000)
	w := newWorkload(sample, infos)
	var subs []submission
	for {
		sub, ok := w.Next()
		if !ok {
			break
		}
		subs = append(subs, sub)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	core, err := sched.New(schedConfig(func() time.Time { return now }), nil)
	if err != nil {
		return 0, err
	}
	tasks := 0
	for _, sub := range subs {
		if _, err := submit(core, sub); err != nil {
			return 0, err
		}
		tasks += sub.tasks
	}
	core.Flush()
	subs = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(core)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(tasks), nil
}

// submit submits a submission's jobs, each of a chain depending on the one
// before, and returns their ids.
func submit(core *sched.Core, sub submission) ([]int64, error) {
	var ids []int64
	for _, j := range sub.jobs {
		if len(ids) > 0 {
			j.Spec.Deps = []*jobspb.Dependency{{Kind: "afterok", JobId: ids[len(ids)-1], Index: -1}}
		}
		id, err := core.Submit(j)
		if err != nil {
			return nil, fmt.Errorf("submitting a %s job: %w", kindNames[sub.kind], err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// run runs the fleet until every job has ended.
func (s *sim) run(infos []sched.WorkerInfo) error {
	core, err := sched.New(schedConfig(func() time.Time { return s.now }), nil)
	if err != nil {
		return err
	}
	s.core = core
	for _, info := range infos {
		core.WorkerUp(info, sched.Report{Lost: func(string) bool { return true }})
		s.workers[info.Name] = &simWorker{info: info, gpuHolder: map[int32]string{}}
		s.totalCPU += float64(info.CPUs)
		s.totalGPU += float64(len(info.GPUs))
	}
	core.Flush()
	s.work = newWorkload(s.cfg, infos)
	next, more := s.work.Next()
	lastTick, lastSample := s.now, s.now
	for round := 1; ; round++ {
		// The next round is the first in which something happens: time
		// alone starts nothing.
		s.now = s.now.Add(s.cfg.Round)
		if len(s.started) == 0 {
			soonest := s.now.Add(365 * 24 * time.Hour)
			if more {
				soonest = s.start.Add(next.at)
			}
			if len(s.ends) > 0 && s.ends[0].at.Before(soonest) {
				soonest = s.ends[0].at
			}
			if soonest.After(s.now) {
				s.now = s.start.Add(soonest.Sub(s.start).Truncate(s.cfg.Round) + s.cfg.Round)
			}
		}
		// Scheduler time is the core's calls alone: not the workload's
		// making of the jobs, nor the simulation's bookkeeping.
		var coreTime time.Duration
		for more && !s.start.Add(next.at).After(s.now) {
			t0 := time.Now()
			ids, err := submit(core, next)
			coreTime += time.Since(t0)
			if err != nil {
				return err
			}
			for i, id := range ids {
				acct := accountOf(next.jobs[i].Spec.User)
				s.pendingIn[acct] += next.tasks / len(ids)
				sp := next.jobs[i].Spec
				s.meta[id] = jobMeta{kind: next.kind, duration: next.runs[i], nodes: max(int(next.jobs[0].Spec.Nodes), 1), account: acct,
					priority: next.jobs[0].Spec.Priority, queue: next.jobs[0].Spec.Queue, asks: asksOf(sp), limitMs: sp.TimeLimitMs}
				s.submitted[id] = s.now
				s.waitAlike(id)
				if i > 0 {
					s.after[ids[i-1]] = id
				}
			}
			next, more = s.work.Next()
		}
		t0 := time.Now()
		for _, key := range s.started {
			worker, task, _ := strings.Cut(key, "/")
			core.Started(worker, &workerpb.JobStarted{TaskId: task, MasterPort: 29500})
		}
		coreTime += time.Since(t0)
		justStarted := s.started
		s.started = nil
		for len(s.ends) > 0 && !s.ends[0].at.After(s.now) {
			e := heap.Pop(&s.ends).(end)
			if e.n.ended {
				continue
			}
			s.free(e.n)
			switch e.state {
			case "CANCELLED":
				s.requeued(e.n)
			case "COMPLETED":
				// The job that waits on it may start from now on: its
				// wait is counted from here.
				if next, ok := s.after[e.n.id]; ok {
					s.submitted[next] = s.now
					delete(s.after, e.n.id)
				}
			}
			t0 := time.Now()
			core.Ended(e.n.worker, &workerpb.JobEnded{TaskId: e.n.task, State: e.state})
			coreTime += time.Since(t0)
		}
		t0 = time.Now()
		if s.now.Sub(lastTick) >= 10*time.Second {
			core.Tick()
			lastTick = s.now
		}
		t2 := time.Now()
		core.Schedule()
		s.res.ScheduleS += time.Since(t2).Seconds()
		batch, out := core.Flush()
		core.Publish(false)
		coreTime += time.Since(t0)
		t1 := time.Now()
		if err := s.store.Commit(batch); err != nil {
			return fmt.Errorf("committing round %d: %w", round, err)
		}
		commitTime := time.Since(t1)
		s.res.SchedulerS += (coreTime + commitTime).Seconds()
		s.res.CommitS += commitTime.Seconds()
		s.rounds = append(s.rounds, coreTime+commitTime)
		if err := s.deliver(out); err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		for _, key := range justStarted {
			_, task, _ := strings.Cut(key, "/")
			if g := s.gangs[task]; g != nil && g.assigned != g.want {
				return fmt.Errorf("gang attempt %s: %d of its %d ranks started: not all-or-nothing", task, g.assigned, g.want)
			} else if g != nil && g.kind == gang8 && g.want == 8 {
				s.res.Gangs8++
				if len(g.racks) == 1 {
					s.res.Gangs8OneRack++
				}
			}
			delete(s.gangs, task)
		}
		if s.now.Sub(lastSample) >= time.Minute {
			lastSample = s.now
			if s.cfg.Progress != nil && int(s.now.Sub(s.start).Minutes())%10 == 0 {
				counts := core.Counts()
				fmt.Fprintf(s.cfg.Progress, "%7.0f s simulated: %d placed in %.2f s of scheduler time (%.0f/s), %d pending, %d running, %d completed\n",
					s.now.Sub(s.start).Seconds(), s.res.Placements, s.res.SchedulerS, float64(s.res.Placements)/s.res.SchedulerS,
					counts["PENDING"], counts["RUNNING"], counts["COMPLETED"])
			}
			s.res.Utilisation = append(s.res.Utilisation, Sample{AtS: s.now.Sub(s.start).Seconds(), CPUs: s.usedCPU / s.totalCPU, GPUs: s.usedGPU / max(s.totalGPU, 1)})
			// Fair share is judged while every account has work waiting,
			// after the first hour (a half-life) of usage.
			if !slices.ContainsFunc(s.pendingIn[:], func(n int) bool { return n <= 0 }) && s.now.Sub(s.start) > time.Hour {
				s.fairErrors = append(s.fairErrors, fairShareError(core))
			}
		}
		if round%500 == 0 {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			s.res.PeakHeapBytes = max(s.res.PeakHeapBytes, m.HeapAlloc)
		}
		if !more && len(s.running) == 0 {
			counts := core.Counts()
			if counts["PENDING"] > 0 || counts["RUNNING"] > 0 {
				return fmt.Errorf("every worker is idle, yet %d jobs are pending and %d running", counts["PENDING"], counts["RUNNING"])
			}
			s.res.JobsCompleted = counts["COMPLETED"]
			var total int64
			for _, n := range counts {
				total += n
			}
			if total != int64(s.cfg.Jobs) || s.res.JobsCompleted != total {
				return fmt.Errorf("%d jobs ended, %d of them COMPLETED; want all %d completed (%v)", total, s.res.JobsCompleted, s.cfg.Jobs, counts)
			}
			break
		}
		if s.now.Sub(s.start) > 365*24*time.Hour {
			return fmt.Errorf("after a simulated year, %d jobs still run", len(s.running))
		}
	}
	s.finish()
	return nil
}

// deliver plays the workers' part for what a round sent them: an
// assignment starts a node, checked against what the worker has free; a
// cancellation ends one, a second later.
func (s *sim) deliver(out []sched.Outbound) error {
	for _, o := range out {
		switch k := o.Msg.Kind.(type) {
		case *workerpb.ServerMessage_AssignJob:
			if err := s.assign(o.Worker, k.AssignJob); err != nil {
				return err
			}
		case *workerpb.ServerMessage_Cancel:
			if n := s.running[o.Worker+"/"+k.Cancel.TaskId]; n != nil {
				heap.Push(&s.ends, end{at: s.now.Add(time.Second), n: n, state: "CANCELLED"})
			}
		}
	}
	return nil
}

// assign starts a node of an attempt on worker.
func (s *sim) assign(worker string, a *workerpb.AssignJob) error {
	w := s.workers[worker]
	if w == nil {
		return fmt.Errorf("job %s assigned to %s, which is no worker", a.JobId, worker)
	}
	key := worker + "/" + a.TaskId
	if s.running[key] != nil {
		return fmt.Errorf("attempt %s assigned twice to %s", a.TaskId, worker)
	}
	if w.cpus+a.Cpus > w.info.CPUs || w.mem+a.MemoryBytes > w.info.Memory || w.slots+1 > w.info.JobSlots {
		return fmt.Errorf("worker %s over-committed by %s: %d+%d of %d CPUs, %d+%d of %d bytes, %d+1 of %d slots",
			worker, a.TaskId, w.cpus, a.Cpus, w.info.CPUs, w.mem, a.MemoryBytes, w.info.Memory, w.slots, w.info.JobSlots)
	}
	for _, g := range a.GpuIndices {
		if holder := w.gpuHolder[g]; holder != "" {
			return fmt.Errorf("GPU %d of %s given to %s while %s holds it", g, worker, a.TaskId, holder)
		}
		if int(g) >= len(w.info.GPUs) || g < 0 {
			return fmt.Errorf("GPU %d given to %s: %s has %d", g, a.TaskId, worker, len(w.info.GPUs))
		}
		w.gpuHolder[g] = a.TaskId
	}
	w.cpus += a.Cpus
	w.mem += a.MemoryBytes
	w.slots++
	s.usedCPU += float64(a.Cpus)
	s.usedGPU += float64(len(a.GpuIndices))
	id, err := strconv.ParseInt(strings.SplitN(a.JobId, "_", 2)[0], 10, 64)
	if err != nil {
		return fmt.Errorf("assignment of job %q: %v", a.JobId, err)
	}
	m := s.meta[id]
	n := &node{id: id, worker: worker, task: a.TaskId, cpus: a.Cpus, mem: a.MemoryBytes, gpus: a.GpuIndices}
	s.running[key] = n
	heap.Push(&s.ends, end{at: s.now.Add(m.duration), n: n, state: "COMPLETED"})
	// A gang's other ranks are the attempt's task id and ".RANK".
	if attempt, _, rank := strings.Cut(a.TaskId, "."); rank {
		g := s.gangs[attempt]
		if g == nil {
			return fmt.Errorf("rank %s of gang attempt %s started before its rank 0", a.TaskId, attempt)
		}
		g.assigned++
		g.racks[w.rack()] = true
		return nil
	}
	if a.PickMasterPort {
		s.gangs[a.TaskId] = &gangState{want: m.nodes, assigned: 1, racks: map[string]bool{w.rack(): true}, kind: m.kind}
		s.started = append(s.started, key)
	}
	s.res.Placements++
	s.pendingIn[m.account]--
	s.startAlike(id)
	s.waits = append(s.waits, wait{kind: m.kind, group: group{m.queue, m.priority, m.account}, user: m.asks.user, d: s.now.Sub(s.submitted[id]), at: s.now.Sub(s.start),
		size: size{a.Cpus, int32(len(a.GpuIndices)), int32(m.nodes)}, restart: m.requeued})
	return nil
}

// free ends node n and gives back what it held.
func (s *sim) free(n *node) {
	n.ended = true
	w := s.workers[n.worker]
	w.cpus -= n.cpus
	w.mem -= n.mem
	w.slots--
	for _, g := range n.gpus {
		delete(w.gpuHolder, g)
	}
	s.usedCPU -= float64(n.cpus)
	s.usedGPU -= float64(len(n.gpus))
	delete(s.running, n.worker+"/"+n.task)
}

// requeued counts a preempted job, whose node n ended, as waiting again
// from now: the wait of its next start is the time since, not the time
// it ran. (Only preemption cancels a node in the simulation.)
func (s *sim) requeued(n *node) {
	if strings.Contains(n.task, ".") {
		return // a gang's other ranks: rank 0 counts the job
	}
	s.submitted[n.id] = s.now
	m := s.meta[n.id]
	m.requeued = true
	s.meta[n.id] = m
	s.pendingIn[m.account]++
	s.waitAlike(n.id)
}

// waitAlike records that job id waits, if it is a single job (not an
// array, a gang or a link of a chain), among the jobs that ask what it
// asks, at its place by submission (a requeued job keeps its first
// submission's place, as the scheduler ranks it).
func (s *sim) waitAlike(id int64) {
	m := s.meta[id]
	if m.kind == array || m.kind == chain || m.nodes > 1 {
		return
	}
	a := m.asks
	ids := s.alike[a]
	i, _ := slices.BinarySearch(ids, id)
	s.alike[a] = slices.Insert(ids, i, id)
}

// startAlike records that job id started, counting the jobs alike
// submitted before it that still wait (PassedOver).
func (s *sim) startAlike(id int64) {
	m := s.meta[id]
	ids := s.alike[m.asks]
	i, found := slices.BinarySearch(ids, id)
	if !found {
		return // not a single job
	}
	for _, before := range ids[:i] {
		s.res.PassedOver++
		if s.meta[before].limitMs > m.limitMs {
			s.res.PassedOverByLimit++
		}
	}
	if len(ids) == 1 {
		delete(s.alike, m.asks)
	} else {
		s.alike[m.asks] = slices.Delete(ids, i, i+1)
	}
}

// finish works out the figures of the run.
func (s *sim) finish() {
	r := &s.res
	r.Rounds = len(s.rounds)
	r.SimulatedS = s.now.Sub(s.start).Seconds()
	if r.SchedulerS > 0 {
		r.PlacementsPerS = float64(r.Placements) / r.SchedulerS
	}
	if r.ScheduleS > 0 {
		r.DecidedPerS = float64(r.Placements) / r.ScheduleS
	}
	slices.Sort(s.rounds)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	if len(s.rounds) > 0 {
		r.P50RoundMs = ms(s.rounds[len(s.rounds)/2])
		r.P99RoundMs = ms(s.rounds[len(s.rounds)*99/100])
		r.MaxRoundMs = ms(s.rounds[len(s.rounds)-1])
	}
	gangGroups := map[group]bool{}
	for _, w := range s.waits {
		if w.kind == gang8 || w.kind == gang64 {
			gangGroups[w.group] = true
			r.LongestGangWaitS = max(r.LongestGangWaitS, w.d.Seconds())
		}
	}
	for _, w := range s.waits {
		if w.kind == single && gangGroups[w.group] {
			r.LongestSingleWaitS = max(r.LongestSingleWaitS, w.d.Seconds())
		}
	}
	r.Starved, r.WorstWaitRatio = fairness(s.waits, true)
	r.StarvedAnySize, r.WorstAnySize = fairness(s.waits, false)
	for _, e := range s.fairErrors {
		r.FairShareError += e / float64(len(s.fairErrors))
	}
	r.Utilisation = thin(r.Utilisation, 40)
}

// fairness counts the starts that waited more than 3x their ideal wait: the
// median wait of the starts of the same kind, queue, priority and user
// (whose own fair-share factor orders their jobs among their account's),
// and of the same size if bySize, that started in the same ten minutes,
// first starts and restarts after preemption apart, plus a minute; and
// returns the worst ratio of a wait to its ideal. A job's wait is from its
// submission, from when the job it depends on completed, or from when it
// was requeued after preemption: from when it could start. A requeued job
// keeps its place by first submission, so it starts again ahead of the
// jobs submitted after it: its wait from the requeue is no measure of a
// first start's. Jobs of one group but of different sizes wait differently
// by nature when the fleet is full: a hole that frees fits a small job
// sooner than a large one, and backfill starts the small job there.
func fairness(waits []wait, bySize bool) (starved int, worst float64) {
	type bucket struct {
		kind    kind
		group   group
		user    string
		size    size
		at      int64
		restart bool
	}
	bucketOf := func(w wait) bucket {
		b := bucket{kind: w.kind, group: w.group, user: w.user, at: int64(w.at / (10 * time.Minute)), restart: w.restart}
		if bySize {
			b.size = w.size
		}
		return b
	}
	by := map[bucket][]time.Duration{}
	for _, w := range waits {
		b := bucketOf(w)
		by[b] = append(by[b], w.d)
	}
	ideal := map[bucket]time.Duration{}
	for b, ds := range by {
		slices.Sort(ds)
		ideal[b] = ds[len(ds)/2] + time.Minute
	}
	for _, w := range waits {
		i := ideal[bucketOf(w)]
		ratio := float64(w.d) / float64(i)
		worst = max(worst, ratio)
		if ratio > 3 {
			starved++
		}
	}
	return starved, worst
}

// thin keeps at most n samples, evenly spread.
func thin(samples []Sample, n int) []Sample {
	if len(samples) <= n {
		return samples
	}
	out := make([]Sample, 0, n)
	for i := range n {
		out = append(out, samples[i*len(samples)/n])
	}
	return out
}

// print writes the figures for people.
func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "rbs scheduler simulation: %d workers, %d jobs (%s mix), store %s\n", r.Workers, r.Jobs, r.Mix, r.Store)
	fmt.Fprintf(w, "  placements            %d in %.2f s of scheduler time (commits %.2f s): %.0f/s; deciding alone %.2f s: %.0f/s\n",
		r.Placements, r.SchedulerS, r.CommitS, r.PlacementsPerS, r.ScheduleS, r.DecidedPerS)
	fmt.Fprintf(w, "  rounds                %d: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n", r.Rounds, r.P50RoundMs, r.P99RoundMs, r.MaxRoundMs)
	fmt.Fprintf(w, "  core heap             %.0f bytes per pending job; peak heap %d MiB\n", r.HeapBytesPerJob, r.PeakHeapBytes>>20)
	fmt.Fprintf(w, "  completed             %d jobs in %.0f simulated s\n", r.JobsCompleted, r.SimulatedS)
	fmt.Fprintf(w, "  longest wait          gangs %.0f s, singles of the same queues and priorities %.0f s\n", r.LongestGangWaitS, r.LongestSingleWaitS)
	fmt.Fprintf(w, "  fairness              %d starts waited over 3x their ideal wait (worst %.1fx); %d against jobs of every size (worst %.1fx)\n",
		r.Starved, r.WorstWaitRatio, r.StarvedAnySize, r.WorstAnySize)
	fmt.Fprintf(w, "  order                 %d jobs passed over by a later one asking the same, %d of them asking a longer time limit (backfill)\n",
		r.PassedOver, r.PassedOverByLimit)
	fmt.Fprintf(w, "  fair share            mean error %.3f (an account's share of the usage against its share)\n", r.FairShareError)
	if r.Gangs8 > 0 {
		fmt.Fprintf(w, "  topology              %d of %d 8-node gangs (packed by rack) in one rack (%.1f%%)\n", r.Gangs8OneRack, r.Gangs8, 100*float64(r.Gangs8OneRack)/float64(r.Gangs8))
	}
	fmt.Fprintln(w, "  utilisation (CPUs, GPUs) over simulated time:")
	for _, s := range r.Utilisation {
		fmt.Fprintf(w, "    %7.0f s  %5.1f%%  %5.1f%%  %s\n", s.AtS, 100*s.CPUs, 100*s.GPUs, strings.Repeat("#", int(40*s.CPUs)))
	}
}
