// Package sched is the batch scheduler's core: the job state machine,
// queues and priority with an age bonus, dependencies, arrays with a
// concurrency cap, placement of jobs on workers' job slots by bin-packing
// CPUs, memory and GPUs, EASY backfill, pending reasons, and requeue of the
// jobs of lost workers.
//
// Core is single-threaded and does no I/O: its owner (Service) feeds it
// events, then collects the changed records, output and worker messages with
// Flush, commits them, and only then acknowledges anything. The clock is
// injected, so tests script timelines without sleeping.
package sched

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Queue is a configured job queue.
type Queue struct {
	Name     string
	Priority int32
	// MaxTime caps the time limit of the queue's jobs and is the limit of
	// jobs that give none; 0 for no cap.
	MaxTime time.Duration
	Default bool
	// UsageFactor weighs the usage of the queue's jobs for fair share (0:
	// as 1).
	UsageFactor float64
	// Quota, when set, bounds what the queue's running jobs take together;
	// with a Cohort, the queue may borrow past it what the cohort's other
	// queues leave idle, up to BorrowingLimit (nil: no limit).
	Quota          *Resources
	BorrowingLimit *Resources
	Cohort         string
	// Cache turns the job cache on for the queue's jobs that do not say.
	Cache bool
}

// DefaultQueues is the configuration when none is given: one "batch" queue.
var DefaultQueues = []Queue{{Name: "batch", Default: true}}

// Config holds the Core's injected clock and its policies.
type Config struct {
	Now    func() time.Time
	Queues []Queue
	// AgeWeight is the priority a job gains per AgeInterval of waiting (by
	// default one per minute), up to AgeCap, so that nothing starves.
	AgeWeight   int64
	AgeInterval time.Duration
	AgeCap      int64
	// FairShare, when set, puts each user's fair-share factor in their
	// jobs' priority.
	FairShare *FairShare
	// LostAfter is how long, after the server starts, the jobs of a worker
	// the store names wait for it to register before they are requeued (or
	// end as NODE_FAIL). A worker that has registered is lost when the
	// owner of worker liveness says so (WorkerLost).
	LostAfter time.Duration
	// LimitGrace is how long past its time limit the server waits for a
	// worker's report before ending a job as TIMEOUT itself.
	LimitGrace time.Duration
	// Retention is how long after it ends a job (an array: its last task)
	// is kept, output included; 0 keeps jobs for ever.
	Retention time.Duration
	// PreemptGrace is how long a preempted job has between SIGTERM and
	// SIGKILL (by default 30 s).
	PreemptGrace time.Duration
	// PreemptExempt is how long a job runs before it may be preempted
	// (Slurm's PreemptExemptTime); 0: from its start. A requeued job is
	// exempt again for as long from its next start, so that it is not
	// stopped over and over while room comes and goes.
	PreemptExempt time.Duration
	// MaxJobOutput caps the output stored of each attempt of a job, in
	// bytes; 0 for no cap. Workers are told it with each assignment and
	// send the first half as it is written and the last half at the end.
	MaxJobOutput int64
	// Lookback is how many waiting jobs a round considers for backfill
	// once one that could start cannot (by default 10,000), as Slurm's
	// bf_max_job_test: the rest keep the reason they had, and one not yet
	// considered gets its own reason if it has one, else Priority. A round
	// also passes over at most sweepPerLookback times as many in all, and
	// the next goes on from there.
	Lookback int
	// Waited, when set, is told how long each job waited from its
	// submission until an attempt started, as it starts.
	Waited func(queue string, waited time.Duration)
}

// sweepPerLookback bounds, in Lookbacks, how many jobs a round takes off
// its queue past the first that did not start for room, trying them or
// passing over them.
const sweepPerLookback = 10

// Key names a job or an array task.
type Key struct {
	ID    int64
	Index int32 // -1 for a plain job
}

// Compare orders keys by id, then index.
func (k Key) Compare(o Key) int {
	if c := cmp.Compare(k.ID, o.ID); c != 0 {
		return c
	}
	return cmp.Compare(k.Index, o.Index)
}

func (k Key) String() string { return string(k.append(make([]byte, 0, 24))) }

// append appends k's String form to b.
func (k Key) append(b []byte) []byte {
	b = strconv.AppendInt(b, k.ID, 10)
	if k.Index >= 0 {
		b = strconv.AppendInt(append(b, '_'), int64(k.Index), 10)
	}
	return b
}

type job struct {
	rec  *jobspb.JobRecord // without its spec, which is stored apart
	spec *jobspb.JobSpec   // shared by an array's tasks; never changes
	key  Key
	task string // current attempt's task id: rank 0's
	// base is its priority before the age bonus: its own and its queue's.
	base int64
	// user is its user's place in the live Core's fairSlots, counting
	// from 1; 0 until a round asks.
	user int32
	// submit is rec's SubmitUnixMs, which rounds order by without reading
	// the record.
	submit int64
	// copy is the job's copy in the View's replica, once published.
	copy *job
	// class is the waitClass it is kept in, while pending and until a
	// round after it left pending or was parked.
	class *waitClass
	// parked says it waits, out of its class, on its dependencies or its
	// array's cap (see park).
	parked bool
	// waited says what it is pending for, of what a round tells without
	// the record; set it with setWaited, which keeps its class's copy.
	waited waitedFor
	// at is its place in class.jobs, counted from the class's first job
	// ever (see place), while class is set.
	at int
	// query is its spec's interned fitQuery, while queryEpoch is the
	// Core's (see interns).
	query      *fitQuery
	queryEpoch uint32
	// checking says the job waits on a CacheCheck.
	checking bool
}

// node returns the node of j's running attempt with the task id, or nil.
func (j *job) node(task string) *jobspb.Node {
	for _, n := range j.rec.Nodes {
		if n.TaskId == task {
			return n
		}
	}
	return nil
}

func (j *job) state() State { return State(j.rec.State) }

// waitedFor is what a pending job waits for, of what a round's sweep
// reads without the job (see passes in Schedule): room (its reason is
// Resources), or its turn, kept off what room there is by a reservation
// (Priority).
type waitedFor uint8

const (
	waitedOther waitedFor = iota
	waitedRoom
	waitedTurn
)

// setWaited sets j.waited from j's pending reason, and the copy its class
// keeps for the sweep.
func (c *Core) setWaited(j *job, reason string) {
	var v waitedFor
	switch reason {
	case ReasonResources:
		v = waitedRoom
	case ReasonPriority:
		v = waitedTurn
	}
	j.waited = v
	if cl := j.class; cl != nil {
		if sk := &cl.skips[j.place()]; sk.waited != v {
			sk.waited = v
			if r := &c.fronts[cl.front].run; r.from <= j.at && j.at < r.end {
				c.dropRun(cl)
			}
		}
	}
}

type worker struct {
	name     string
	address  string // where the other ranks of a gang reach it
	cpus     int32
	memory   int64
	dev      devices
	jobSlots int
	platform string // OS-ARCH; "" when the worker offers none
	// containerRuntime is the worker's podman or docker; "" for none.
	containerRuntime string
	// properties are the platform properties it offers, "NAME=VALUE";
	// labels holds them by NAME (the first given of a NAME), which
	// topology labels are read from.
	properties map[string]bool
	labels     map[string]string
	connected  bool
	// registered says the worker has registered since the Core started;
	// the jobs of one known only from the store, which never did, are
	// requeued after LostAfter.
	registered bool
	downSince  time.Time
	running    map[Key]*job // each with one node here; changed by add and remove
	// byEnd holds the jobs of running by when their time limits end them,
	// soonest first, those without a limit last; preemptible those that
	// may be preempted, in the same order.
	byEnd, preemptible []placed
	// usedCPUs and usedMem are what the jobs in running take.
	usedCPUs int32
	usedMem  int64
	// openAt is the worker's place in the Core's open set, counting from
	// 1 (0: not in it); openRoom the free slots it counts there.
	openAt, openRoom int
	// stamp marks the worker as met in one pass over the change log
	// (kept.catchUp), which numbers its passes; victimPass likewise in a
	// pass over the victim index (youngestVictim).
	stamp, victimPass uint64
	// soonestAt is its place in the Core's soonest heap, counting from 1
	// (0: not in it).
	soonestAt int
}

func (w *worker) used() (cpus int32, mem int64) { return w.usedCPUs, w.usedMem }

// addRunning records that j runs a node on w, and keeps a preemptible job in
// the Core's victim index too.
func (c *Core) addRunning(w *worker, j *job) {
	if _, ok := w.running[j.key]; !ok {
		w.usedCPUs += cpusOf(j.spec)
		w.usedMem += j.spec.MemoryBytes
		p := placed{j: j, id: j.key.ID, endMs: endMs(j), startMs: j.rec.StartUnixMs, submit: j.submit, base: j.base, need: need(j.spec), user: c.slotOf(j)}
		i, _ := slices.BinarySearchFunc(w.byEnd, p, byEnd)
		w.byEnd = slices.Insert(w.byEnd, i, p)
		if j.spec.Preemptible {
			i, _ := slices.BinarySearchFunc(w.preemptible, p, byEnd)
			w.preemptible = slices.Insert(w.preemptible, i, p)
			c.victims.add(w, p)
		}
		c.soonest.fix(w)
	}
	w.running[j.key] = j
}

// removeRunning records that the job of key no longer runs on w.
func (c *Core) removeRunning(w *worker, k Key) {
	if j, ok := w.running[k]; ok {
		w.usedCPUs -= cpusOf(j.spec)
		w.usedMem -= j.spec.MemoryBytes
		delete(w.running, k)
		gone := func(p placed) bool { return p.j == j }
		w.byEnd = slices.DeleteFunc(w.byEnd, gone)
		if i := slices.IndexFunc(w.preemptible, gone); i >= 0 {
			c.victims.remove(w, w.preemptible[i])
			w.preemptible = slices.Delete(w.preemptible, i, i+1)
		}
		c.soonest.fix(w)
	}
}

// stopping marks j, preempted, as stopping on w: it is no victim again.
func (c *Core) stopping(w *worker, j *job) {
	if i := slices.IndexFunc(w.preemptible, func(p placed) bool { return p.j == j }); i >= 0 {
		w.preemptible[i].stopping = true
		c.victims.stopping(w, w.preemptible[i])
	}
}

// placed is a job running on a worker as the worker's lists keep it: what
// reserving and preempting read of the job, held inline, so that a pass
// over a worker's jobs reads no job record.
type placed struct {
	j        *job
	id       int64 // j's id, which breaks ties
	endMs    int64 // endMs(j)
	startMs  int64
	submit   int64 // j.submit
	base     int64 // j.base
	need     capacity
	user     int32 // j's fair-share slot
	stopping bool  // preempted, and stopping
}

func cpusOf(s *jobspb.JobSpec) int32 {
	if s.Cpus <= 0 {
		return 1
	}
	return s.Cpus
}

// capacity is what a worker has or a job needs.
type capacity struct {
	cpus  int32
	mem   int64
	gpus  int
	slots int
}

func need(s *jobspb.JobSpec) capacity {
	return capacity{cpus: cpusOf(s), mem: s.MemoryBytes, gpus: int(s.Gpus), slots: 1}
}

func (c capacity) fits(n capacity) bool {
	return n.cpus <= c.cpus && n.mem <= c.mem && n.gpus <= c.gpus && n.slots <= c.slots
}

func (c capacity) minus(n capacity) capacity {
	return capacity{c.cpus - n.cpus, c.mem - n.mem, c.gpus - n.gpus, c.slots - n.slots}
}

func (c capacity) plus(n capacity) capacity {
	return capacity{c.cpus + n.cpus, c.mem + n.mem, c.gpus + n.gpus, c.slots + n.slots}
}

func (w *worker) total() capacity {
	return capacity{cpus: w.cpus, mem: w.memory, gpus: len(w.dev.gpus), slots: w.jobSlots}
}

func (w *worker) free() capacity {
	cpus, mem := w.used()
	return capacity{w.cpus - cpus, w.memory - mem, w.dev.free(), w.jobSlots - len(w.running)}
}

// Outbound is a message for a worker's stream.
type Outbound struct {
	Worker string
	Msg    *workerpb.ServerMessage
}

// Core is the scheduler's state. It is not safe for concurrent use.
type Core struct {
	cfg     Config
	queues  map[string]Queue
	defQ    string
	nextID  int64
	idDirty bool
	jobs    map[Key]*job
	pending map[Key]*job     // the PENDING jobs, so rounds need not scan ended ones
	counts  map[State]int64  // how many jobs are in each state
	arrays  map[int64][]*job // tasks of each array, by id
	byTask  map[string]*job  // running attempts by task id; see setTask
	// arrayNodes counts the running nodes (byTask) of each array's tasks.
	arrayNodes map[int64]int
	// resume, when a round stopped passing over waiting jobs (see
	// sweepPerLookback), is the rank it stopped at.
	resume *standing
	// unregistered counts the workers known only from the store that have
	// not registered since.
	unregistered int
	workers      map[string]*worker
	stdins       map[Key]*stdin // of interactive jobs that have not ended
	// windows are the maintenance windows by name; windowsDirty the ones
	// changed since the last Flush (nil: removed).
	// specCache holds, in a round, the specReasons of each spec;
	// specLast the last asked, as an array's tasks come one after another.
	specCache       map[*jobspb.JobSpec]specReasons
	specLast        *jobspb.JobSpec
	specLastReasons specReasons
	// never holds, in a round, whether the jobs of each spec met can never
	// start (neverStarts): what makes it so, a dependency that ended, does
	// not change in a round.
	never map[*jobspb.JobSpec]bool
	// keptFits keeps, from round to round, the tightest candidates of each
	// fitQuery asked (see kept); changes logs the workers whose room or
	// connection changed, which each kept takes in past its seen mark.
	keptFits  map[fitKey]*kept
	keptEpoch uint32 // the queryEpoch of keptFits's keys
	// victims indexes the preemptible jobs running (youngestVictim);
	// soonest the workers that run jobs by their first end (soonestWorker).
	victims victimIndex
	soonest soonest
	// lookedPast says the last round stopped at the Lookback.
	lookedPast bool
	// replica says the Core is a View's replica, which has no rounds.
	replica bool
	// ends logs, on a View's replica, the jobs each publication found done
	// with, for waiters to read what ended since they last looked
	// (EndedSince) rather than every job they wait on; endsBase is the
	// mark of ends[0].
	ends     []Key
	endsBase uint64
	// fresh holds the jobs that became pending since the last round,
	// which gives each a reason even if it does not consider it.
	fresh []*job
	// classes are the pending jobs by class, which rounds merge (see
	// queue), and fronts their first jobs; merge is the room of a
	// round's merge, kept from round to round (it was most of what a
	// round allocated); shrunk the classes that jobs left since the last
	// round; entering the jobs that became pending during a round, for
	// the next to take in.
	classes map[classKey]*waitClass
	fronts  []front
	merge   queue
	// skipped marks, by place in fronts, the classes whose first jobs a
	// resumed round left out (see queueFrom and rewind).
	skipped  []bool
	shrunk   []*waitClass
	entering []*job
	inRound  bool
	// waitsOn holds the parked jobs by the ids of the jobs they depend on;
	// capped the parked tasks of each array, in the order rounds consider
	// them.
	waitsOn map[int64][]*job
	capped  map[int64][]*job
	// queries holds the fitQuery of each pending spec met (see query),
	// one copy of each in interned, so that a round can tell them apart by
	// address.
	queries    map[*jobspb.JobSpec]*fitQuery
	interned   map[fitAsk]*fitQuery
	queryEpoch uint32 // counts the times queries was made anew
	// bitsGiven counts the bits given to interned queries (fitQuery.bit)
	// since queries was made anew; noRoomBits holds those of the queries
	// that found no room in the round (fitQuery.noRoom).
	bitsGiven  int
	noRoomBits queryBits
	// quotas says some queue has a quota.
	quotas bool
	// replan is what rounds worked out for the job heading those waiting
	// (see replanEvery); workerEpoch counts workers joining and leaving.
	replan      replan
	workerEpoch int64
	// deadlines are when running attempts' time limits are up.
	deadlines deadlines
	// openWorkers is the last round's open workers (see openSet); nil
	// when it must be made anew.
	openWorkers *openSet
	// keptWindowed says the last round had maintenance windows, whose
	// candidates are not kept past it.
	keptWindowed bool
	changes      []*worker
	// stamps numbers the passes over changes that meet each worker once;
	// since is the buffer of the workers one such pass met.
	stamps uint64
	since  []*worker
	// round numbers the rounds that worked (see fitQuery).
	round uint64
	// places carries the place reasons of specReasons from round to round
	// for the specs still waiting: they change only when a worker
	// registers (WorkerUp clears them).
	places map[*jobspb.JobSpec]string
	// preempting holds, for each job that preempted others, its victims
	// while they stop.
	preempting map[Key][]*job

	// usage is each user's fair-share usage, usageDirty the users whose
	// usage changed since the last Flush; fair is the share table of the
	// last round, one of shareTables (see refreshShares).
	usage       map[string]*usage
	usageDirty  map[string]bool
	fair        *shareTable
	shareTables [3]*shareTable
	// fairSlots hold the live Core's fair-share priority of each user
	// (userSlot names their places) as of the round they were worked out
	// in; fairRound counts rounds.
	fairSlots []fairPrio
	userSlot  map[string]int32
	fairRound int64
	// queueUsed is what the running jobs of each queue take; cohorts the
	// queues of each cohort.
	queueUsed map[string]amounts
	cohorts   map[string][]Queue
	// noLenders holds, in a round, the cohorts where no job borrows, so
	// that no other job of them looks for one to reclaim.
	noLenders map[string]bool

	windows      map[string]*jobspb.Reservation
	windowsDirty map[string]*jobspb.Reservation
	lastTick     time.Time

	// reschedule is set by every change that can let a job start (a
	// submission, a job's change of state, a worker joining); Schedule
	// does nothing without it, so rounds that only carry output or
	// queries cost nothing however many jobs wait.
	reschedule bool

	open   map[int64]int // parts of each job id that have not ended
	ended  []ended       // jobs with every part ended, oldest first
	forget []int64       // job ids to delete from the store

	dirty map[Key]*job
	// seen holds the jobs changed since the last Publish, and the ones
	// forgotten; reasoned those whose pending reason changed, which, when
	// nothing else of them did, is all Publish copies of them. (In a
	// backlog, most of the jobs a round changes are those whose reason
	// flips.) view is what readers see.
	seen     map[Key]bool
	reasoned []*job
	view     *View
	newSpecs map[int64]*jobspb.JobSpec
	logs     []store.LogChunk
	out      []Outbound
	// sorted holds the workers by name (sortedWorkers); nil once one is
	// added.
	sorted []*worker
	// workersSeen holds the workers whose own state (registration,
	// connection) changed since the last Publish; those whose jobs
	// changed are found from seen.
	workersSeen map[string]bool
	// submits are the ids of submissions by their idempotency keys, and
	// keyOf each such submission's key by its last job id, which forgets
	// it; newSubmits are those taken since the last Flush.
	submits    map[string][]int64
	keyOf      map[int64]string
	newSubmits []store.Submit
	// cache holds the job cache's entries: the job that made each key
	// (memo.go); resolving the jobs to resolve at the next round, and
	// checks the CacheChecks asked since CacheChecks was last called.
	cache     map[string]Key
	resolving []*job
	checks    []CacheCheck
}

// New returns a Core holding the state read from the store (nil for
// none).
func New(cfg Config, st *store.State) (*Core, error) {
	if st == nil {
		st = &store.State{}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Queues) == 0 {
		cfg.Queues = DefaultQueues
	}
	if cfg.AgeWeight == 0 {
		cfg.AgeWeight = 1
	}
	if cfg.AgeInterval <= 0 {
		cfg.AgeInterval = time.Minute
	}
	if cfg.AgeCap == 0 {
		cfg.AgeCap = 10000
	}
	if cfg.Lookback <= 0 {
		cfg.Lookback = 10000
	}
	if cfg.LostAfter == 0 {
		cfg.LostAfter = 15 * time.Second
	}
	if cfg.LimitGrace == 0 {
		cfg.LimitGrace = time.Minute
	}
	if cfg.PreemptGrace == 0 {
		cfg.PreemptGrace = 30 * time.Second
	}
	c := emptyCore(cfg)
	c.nextID = max(st.NextID, 1)
	c.stdins, c.dirty, c.seen, c.workersSeen = map[Key]*stdin{}, map[Key]*job{}, map[Key]bool{}, map[string]bool{}
	c.preempting, c.windowsDirty = map[Key][]*job{}, map[string]*jobspb.Reservation{}
	c.usageDirty, c.queueUsed, c.cohorts = map[string]bool{}, map[string]amounts{}, map[string][]Queue{}
	c.submits, c.keyOf = map[string][]int64{}, map[int64]string{}
	for key, ids := range st.Submits {
		c.submits[key], c.keyOf[ids[len(ids)-1]] = ids, key
	}
	for _, r := range st.Reservations {
		c.windows[r.Name] = r
	}
	c.lastTick = cfg.Now()
	for _, q := range cfg.Queues {
		if _, dup := c.queues[q.Name]; dup {
			return nil, fmt.Errorf("queue %q is defined twice", q.Name)
		}
		c.queues[q.Name] = q
		c.quotas = c.quotas || q.Quota != nil
		if q.Cohort != "" {
			if q.Quota == nil {
				return nil, fmt.Errorf("queue %q: a cohort is for queues with a quota", q.Name)
			}
			c.cohorts[q.Cohort] = append(c.cohorts[q.Cohort], q)
		}
		if q.Default || c.defQ == "" && len(cfg.Queues) == 1 {
			c.defQ = q.Name
		}
	}
	if c.defQ == "" {
		c.defQ = cfg.Queues[0].Name
	}
	now := cfg.Now()
	for _, rec := range st.Jobs {
		j := &job{rec: rec, spec: st.Specs[rec.Id], key: Key{rec.Id, rec.Index}}
		if j.spec == nil || rec.Spec != nil {
			return nil, fmt.Errorf("job %s: its spec must be given apart from its record", j.key)
		}
		c.add(j)
		if j.state() == Running {
			// Its workers have until LostAfter to reconnect and claim it.
			j.task = taskID(j)
			if len(rec.Nodes) == 0 {
				rec.Nodes = []*jobspb.Node{{Worker: rec.Worker, TaskId: j.task, GpuIndices: rec.GpuIndices, Assigned: true}}
			}
			for _, n := range rec.Nodes {
				c.setTask(n.TaskId, j)
				w := c.workers[n.Worker]
				if w == nil {
					w = &worker{name: n.Worker, downSince: now, running: map[Key]*job{}, dev: devices{held: map[string]Key{}}}
					c.workers[n.Worker] = w
					c.sorted = nil
					c.unregistered++
				}
				c.addRunning(w, j)
			}
		}
		if rec.Id >= c.nextID {
			c.nextID = rec.Id + 1
		}
		switch {
		case j.state() == Completed:
			if o := c.entry(rec.CacheKey); o == nil || o.rec.EndUnixMs <= rec.EndUnixMs {
				c.remember(j)
			}
		case j.state() == Pending && rec.PendingReason == ReasonCacheCheck:
			// Its check was lost with the server that asked: ask again.
			rec.CacheKey, rec.PendingReason = "", ""
			c.resolving = append(c.resolving, j)
		case j.state() == Pending && unkeyed(j):
			c.resolving = append(c.resolving, j)
		}
	}
	// Usage was written when it last changed: since then it has grown by
	// what runs now, whose nodes setTask has just charged.
	for _, r := range st.Usage {
		u := c.usage[r.User]
		if u == nil {
			u = &usage{}
			c.usage[r.User] = u
		}
		u.v, u.at = [3]float64{r.CPU, r.Memory, r.GPU}, time.UnixMilli(r.AtUnixMs)
		u.advance(now, c.halfLife())
		c.usageDirty[r.User] = true
	}
	c.queueEnded()
	c.reschedule = true
	c.view = newView(c)
	for k := range c.jobs {
		c.seen[k] = true
	}
	c.Publish(true)
	return c, nil
}

// emptyCore is a Core holding no job, worker or window yet: what New fills
// from the store, and what a View's replica starts from.
func emptyCore(cfg Config) *Core {
	return &Core{
		cfg:        cfg,
		queues:     map[string]Queue{},
		jobs:       map[Key]*job{},
		pending:    map[Key]*job{},
		classes:    map[classKey]*waitClass{},
		waitsOn:    map[int64][]*job{},
		capped:     map[int64][]*job{},
		counts:     map[State]int64{},
		open:       map[int64]int{},
		arrays:     map[int64][]*job{},
		byTask:     map[string]*job{},
		arrayNodes: map[int64]int{},
		workers:    map[string]*worker{},
		windows:    map[string]*jobspb.Reservation{},
		usage:      map[string]*usage{},
		cache:      map[string]Key{},
	}
}

func (c *Core) add(j *job) {
	j.base = int64(j.spec.Priority) + int64(c.queues[j.spec.Queue].Priority)
	j.submit = j.rec.SubmitUnixMs
	if j.state() == Pending {
		c.setWaited(j, j.rec.PendingReason)
	}
	c.jobs[j.key] = j
	c.counts[j.state()]++
	if j.state() == Pending {
		c.pending[j.key] = j
		c.freshen(j)
	}
	if j.key.Index >= 0 {
		c.arrays[j.key.ID] = append(c.arrays[j.key.ID], j)
	}
	if !j.state().Terminal() {
		c.open[j.key.ID]++
	}
}

// setTask records that task is a node of j's running attempt.
// Each node charges its user's usage and its queue's quota while it runs.
func (c *Core) setTask(task string, j *job) {
	if _, ok := c.byTask[task]; !ok {
		if j.key.Index >= 0 {
			c.arrayNodes[j.key.ID]++
		}
		c.charge(j, 1)
		c.quotaUse(j, 1)
		if task == j.task && j.rec.TimeLimitMs > 0 {
			c.deadlines.add(deadline{j.rec.StartUnixMs + j.rec.TimeLimitMs, j, task}, c.byTask)
		}
	}
	c.byTask[task] = j
}

// dropTask forgets task, a node of an attempt that has ended.
func (c *Core) dropTask(task string) {
	j, ok := c.byTask[task]
	if !ok {
		return
	}
	if j.key.Index >= 0 {
		if c.arrayNodes[j.key.ID]--; c.arrayNodes[j.key.ID] == 0 {
			delete(c.arrayNodes, j.key.ID)
		}
		c.unparkCapped(j.key.ID)
	}
	c.charge(j, -1)
	c.quotaUse(j, -1)
	delete(c.byTask, task)
}

func taskID(j *job) string {
	return string(strconv.AppendInt(append(j.key.append(make([]byte, 0, 32)), '#'), int64(j.rec.Attempts), 10))
}

func (c *Core) touch(j *job) {
	c.dirty[j.key] = j
	c.seen[j.key] = true
}

// setReason records why j waits. A change of reason alone is shown to
// readers but not written to the store (see Schedule).
func (c *Core) setReason(j *job, reason string) {
	if j.rec.PendingReason != reason {
		j.rec.PendingReason = reason
		c.reasoned = append(c.reasoned, j)
	}
	c.setWaited(j, reason)
}

func (c *Core) send(w *worker, m *workerpb.ServerMessage) {
	if w.connected {
		c.out = append(c.out, Outbound{Worker: w.name, Msg: m})
	}
}

// Flush returns the changes since the last Flush: the store batch to commit
// and the messages to send once it is committed.
func (c *Core) Flush() (*store.Batch, []Outbound) {
	b := &store.Batch{Specs: c.newSpecs, Logs: c.logs, Forget: c.forget, Submits: c.newSubmits, Usage: c.usageRecords()}
	c.newSpecs, c.forget, c.newSubmits = nil, nil, nil
	for _, j := range c.dirty {
		b.Jobs = append(b.Jobs, j.rec)
	}
	sort.Slice(b.Jobs, func(i, k int) bool {
		if b.Jobs[i].Id != b.Jobs[k].Id {
			return b.Jobs[i].Id < b.Jobs[k].Id
		}
		return b.Jobs[i].Index < b.Jobs[k].Index
	})
	if c.idDirty {
		b.NextID = c.nextID
	}
	for name, r := range c.windowsDirty {
		if r == nil {
			b.Unreserve = append(b.Unreserve, name)
		} else {
			b.Reservations = append(b.Reservations, r)
		}
	}
	clear(c.windowsDirty)
	out := c.out
	c.dirty, c.logs, c.out, c.idDirty = map[Key]*job{}, nil, nil, false
	return b, out
}

// Submit adds a job (an array: its tasks) as PENDING. It returns the new
// job id.
func (c *Core) Submit(j *manifest.Job) (int64, error) {
	ids, err := c.SubmitPipeline([]*manifest.Job{j})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// SubmitPipeline adds jobs, validated at the API edge, in order, or none:
// a dependency with pipeline_entry set names an earlier job of them and
// gets its new id. It checks what depends on the scheduler's state (the
// queue, its time cap, the jobs depended on) and returns the new ids, in
// order.
func (c *Core) SubmitPipeline(jobs []*manifest.Job) ([]int64, error) {
	limits := make([]time.Duration, len(jobs))
	for i, j := range jobs {
		limit, err := c.check(j.Spec)
		if err != nil {
			if len(jobs) > 1 {
				return nil, status.Errorf(status.Code(err), "entry %d (%s): %s", i+1, j.Spec.Name, status.Convert(err).Message())
			}
			return nil, err
		}
		limits[i] = limit
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		for _, d := range j.Spec.Deps {
			if d.PipelineEntry > 0 {
				d.JobId, d.PipelineEntry = ids[d.PipelineEntry-1], 0
			}
		}
		ids[i] = c.insert(j.Spec, limits[i], j.Indices)
	}
	return ids, nil
}

// SubmitOnce is SubmitPipeline for a submission with an idempotency key
// (none: ""): a key already taken returns the ids its jobs were given, and
// submits nothing, so that a client retrying a submission whose answer it
// lost (to a failover, say) makes no second job.
func (c *Core) SubmitOnce(key string, jobs []*manifest.Job) ([]int64, error) {
	if ids, ok := c.submits[key]; ok && key != "" {
		if len(ids) != len(jobs) {
			return nil, status.Errorf(codes.InvalidArgument, "submission key %q was taken by a submission of %d jobs, and this one has %d", key, len(ids), len(jobs))
		}
		return ids, nil
	}
	ids, err := c.SubmitPipeline(jobs)
	if err != nil || key == "" {
		return ids, err
	}
	c.submits[key], c.keyOf[ids[len(ids)-1]] = ids, key
	c.newSubmits = append(c.newSubmits, store.Submit{Key: key, IDs: ids})
	return ids, nil
}

// check holds a job to the scheduler's state and returns its time limit:
// its queue (the default one when it names none) must exist and allow its
// time limit, and the jobs it depends on must exist.
func (c *Core) check(s *jobspb.JobSpec) (time.Duration, error) {
	if s.Queue == "" {
		s.Queue = c.defQ
	}
	q, ok := c.queues[s.Queue]
	if !ok {
		return 0, status.Errorf(codes.InvalidArgument, "unknown queue %q (queues: %s)", s.Queue, strings.Join(c.queueNames(), ", "))
	}
	limit := time.Duration(s.TimeLimitMs) * time.Millisecond
	if q.MaxTime > 0 && limit > q.MaxTime {
		return 0, status.Errorf(codes.InvalidArgument, "time limit %s exceeds queue %s's maximum of %s", spec.FormatDuration(limit), q.Name, spec.FormatDuration(q.MaxTime))
	}
	if limit == 0 {
		limit = q.MaxTime
	}
	if s.Cache == jobspb.CachePolicy_CACHE_QUEUE_DEFAULT {
		s.Cache = jobspb.CachePolicy_CACHE_OFF
		if q.Cache && s.CacheKey != "" {
			s.Cache = jobspb.CachePolicy_CACHE_ON
		}
	}
	for _, d := range s.Deps {
		if d.PipelineEntry == 0 && len(c.depTargets(Key{d.JobId, d.Index})) == 0 {
			return 0, status.Errorf(codes.InvalidArgument, "dependency %s:%s: no such job", d.Kind, Key{d.JobId, d.Index})
		}
	}
	// As Slurm refuses a job no node's configuration can satisfy, a job
	// too large for every registered worker is refused, unless it is held
	// on purpose: it would only wait for a worker that may never come.
	if why := c.tooLarge(s); why != "" && !s.Hold {
		return 0, status.Errorf(codes.FailedPrecondition, "no worker can ever run this job: %s; ask for what a worker has, start a larger worker first, or submit it with --hold to keep it pending until then", why)
	}
	return limit, nil
}

// insert adds a checked spec's job, or its array's tasks, as PENDING and
// returns the new id.
func (c *Core) insert(s *jobspb.JobSpec, limit time.Duration, indices []int) int64 {
	id := c.nextID
	c.nextID++
	c.idDirty = true
	now := c.cfg.Now().UnixMilli()
	newJob := func(index int32) {
		j := &job{key: Key{id, index}, spec: s, rec: &jobspb.JobRecord{
			Id: id, Index: index, State: string(Pending),
			SubmitUnixMs: now, TimeLimitMs: limit.Milliseconds(), Held: s.Hold,
		}}
		c.add(j)
		c.touch(j)
	}
	if c.newSpecs == nil {
		c.newSpecs = map[int64]*jobspb.JobSpec{}
	}
	c.newSpecs[id] = s
	c.reschedule = true
	if s.Array == nil {
		newJob(-1)
	} else {
		for _, i := range indices {
			newJob(int32(i))
		}
	}
	if caches(s) {
		c.resolving = append(c.resolving, c.depTargets(Key{id, -1})...)
	}
	return id
}

func (c *Core) queueNames() []string {
	var names []string
	for n := range c.queues {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// depTargets returns the jobs a dependency or an id names: one job or task,
// or every task of an array.
func (c *Core) depTargets(k Key) []*job {
	if j, ok := c.jobs[k]; ok {
		return []*job{j}
	}
	if k.Index < 0 {
		return c.arrays[k.ID]
	}
	return nil
}

// Lookup resolves a user's id ("42", "42_7") to its jobs.
func (c *Core) Lookup(id string) ([]Key, error) {
	jid, err := spec.ParseJobID(id)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	targets := c.depTargets(Key{jid.ID, int32(jid.Index)})
	if len(targets) == 0 {
		return nil, status.Errorf(codes.NotFound, "job %s not found", id)
	}
	keys := make([]Key, len(targets))
	for i, j := range targets {
		keys[i] = j.key
	}
	return keys, nil
}

// Cancel cancels jobs: pending ones end at once; running ones are signalled
// and end as CANCELLED when their worker reports. It returns those that had
// already ended, which it leaves as they were.
func (c *Core) Cancel(keys []Key) (ended []Key) {
	now := c.cfg.Now().UnixMilli()
	for _, k := range keys {
		j := c.jobs[k]
		switch j.state() {
		case Pending:
			j.rec.Message = "cancelled while pending"
			c.end(j, Cancelled, now)
		case Running:
			w := c.workers[j.rec.Worker]
			if w == nil || !w.connected {
				j.rec.Message = "cancelled while its worker was unreachable"
				c.end(j, Cancelled, now)
				continue
			}
			if !j.rec.CancelRequested {
				j.rec.CancelRequested = true
				c.touch(j)
				c.stopNodes(j, func(n *jobspb.Node) bool { return true })
			}
		default:
			ended = append(ended, k)
		}
	}
	return ended
}

// Release lets the held pending jobs among keys be scheduled and returns
// them; none being held is an error that says what they are.
func (c *Core) Release(keys []Key) ([]Key, error) {
	var released []Key
	for _, k := range keys {
		if j := c.jobs[k]; j != nil && j.rec.Held && j.state() == Pending {
			j.rec.Held = false
			c.touch(j)
			released = append(released, k)
		}
	}
	if len(released) == 0 && len(keys) > 0 {
		j := c.jobs[keys[0]]
		state := string(j.state())
		if j.rec.PendingReason != "" {
			state += " (" + j.rec.PendingReason + ")"
		}
		return nil, status.Errorf(codes.FailedPrecondition, "job %s is not held: it is %s; only a job submitted with --hold can be released", keys[0], state)
	}
	c.reschedule = true
	return released, nil
}

// freshen records that j became pending, for the next round to give it a
// reason (reasonFresh); a View's replica has no rounds.
func (c *Core) freshen(j *job) {
	if !c.replica {
		c.fresh = append(c.fresh, j)
		c.enterClass(j)
	}
}

// move changes a job's state along the transition table; anything else is
// a bug in the Core.
func (c *Core) move(j *job, to State) {
	if !CanMove(j.state(), to) {
		panic(fmt.Sprintf("sched: job %s cannot go from %s to %s", j.key, j.state(), to))
	}
	c.counts[j.state()]--
	c.counts[to]++
	if to == Pending {
		c.pending[j.key] = j
		c.freshen(j)
	} else {
		if j.state() == Pending {
			c.leaveClass(j)
		}
		delete(c.pending, j.key)
		c.setWaited(j, "")
	}
	if to == Completed {
		c.remember(j)
	}
	if to.Terminal() {
		c.finished(j.key.ID)
		c.unparkDependents(j.key.ID)
		delete(c.stdins, j.key)
	}
	j.rec.State = string(to)
	c.reschedule = true
	c.touch(j)
}

// end moves a job to a terminal state and frees what it held; a running
// job's attempt goes into its history, with the record's exit code and
// message.
func (c *Core) end(j *job, s State, nowMs int64) {
	delete(c.preempting, j.key)
	c.markAllDropped(j)
	if j.state() == Running {
		c.endAttempt(j, s, j.rec.Message, nowMs)
	}
	c.move(j, s)
	j.rec.PendingReason = ""
	j.rec.EndUnixMs = nowMs
	c.touch(j)
}

// endAttempt appends j's running attempt, ended in state s with message
// msg, to its history and frees what it held.
func (c *Core) endAttempt(j *job, s State, msg string, nowMs int64) {
	a := &jobspb.Attempt{
		Attempt: j.rec.Attempts, Worker: j.rec.Worker, State: string(s), ExitCode: j.rec.ExitCode,
		StartUnixMs: j.rec.StartUnixMs, EndUnixMs: nowMs, Message: msg,
	}
	if len(j.rec.Nodes) > 1 {
		for _, n := range j.rec.Nodes {
			a.Workers = append(a.Workers, n.Worker)
		}
	}
	j.rec.History = append(j.rec.History, a)
	// The nodes still running are stopped: a gang ends as a whole.
	c.stopNodes(j, func(n *jobspb.Node) bool { return n.State == "" && n.Assigned })
	for _, n := range j.rec.Nodes {
		if w := c.workers[n.Worker]; w != nil {
			c.removeRunning(w, j.key)
			w.dev.release(j.key)
			c.changes = append(c.changes, w)
		}
		c.dropTask(n.TaskId)
	}
	c.touch(j)
}

// stopNodes sends a cancel to the nodes of j's running attempt that which
// selects, on the workers that are connected.
func (c *Core) stopNodes(j *job, which func(*jobspb.Node) bool) {
	for _, n := range j.rec.Nodes {
		if w := c.workers[n.Worker]; w != nil && which(n) {
			n.Stopped = true
			c.touch(j)
			c.send(w, &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Cancel{Cancel: &workerpb.Cancel{TaskId: n.TaskId}}})
		}
	}
}

// again sends j, whose running attempt ended in state s with message
// ended, back to PENDING with message msg and a line in its output.
func (c *Core) again(j *job, s State, ended, msg, line string) {
	c.markAllDropped(j)
	c.endAttempt(j, s, ended, c.cfg.Now().UnixMilli())
	j.rec.Message = msg
	c.move(j, Pending)
	j.rec.Worker = ""
	j.rec.GpuIndices = nil
	j.rec.Nodes = nil
	j.rec.MasterPort = 0
	j.rec.PreemptedBy = ""
	j.rec.StartUnixMs = 0
	c.logs = append(c.logs, logLine(j, line))
}

// requeue sends a running job whose worker was lost back to PENDING, or ends
// it as NODE_FAIL when it must not be requeued. A requeue uses none of the
// job's retries.
func (c *Core) requeue(j *job, why string) {
	if n := j.rec.Nodes; len(n) > 1 && n[0].State != "" {
		// Rank 0 has ended: the gang ends as it did, without the nodes lost.
		for _, m := range n {
			if m.State == "" && m.Assigned {
				m.State = string(NodeFail)
			}
		}
		c.endIfReported(j)
		return
	}
	if j.spec.NoRequeue || j.rec.CancelRequested {
		final := NodeFail
		if j.rec.CancelRequested {
			final = Cancelled
		}
		j.rec.Message = why
		c.end(j, final, c.cfg.Now().UnixMilli())
		return
	}
	c.again(j, NodeFail, why, "requeued: "+why, fmt.Sprintf("\n[rbs] attempt %d lost: %s; requeued\n", j.rec.Attempts, why))
}

// retryable reports whether an attempt that ended in s is run again while
// the job has retries left.
func retryable(s State) bool { return s == Failed || s == Timeout || s == OutOfMemory }

// retry sends j back to PENDING when its running attempt ended in s and it
// has a retry left, and reports whether it did. Its retries used are the
// retryable ends in its history.
func (c *Core) retry(j *job, s State) bool {
	if !retryable(s) || j.rec.CancelRequested {
		return false
	}
	used := 1
	for _, a := range j.rec.History {
		if retryable(State(a.State)) {
			used++
		}
	}
	if used > int(j.spec.MaxRetries) {
		return false
	}
	c.again(j, s, j.rec.Message, fmt.Sprintf("retrying: attempt %d ended %s", j.rec.Attempts, s),
		fmt.Sprintf("\n[rbs] attempt %d failed (%s); retrying (%d of %d)\n", j.rec.Attempts, s, used, j.spec.MaxRetries))
	return true
}

// WorkerInfo is what the Core needs of a registering worker.
type WorkerInfo struct {
	Name     string
	CPUs     int32
	Memory   int64
	GPUs     []*workerpb.Gpu
	JobSlots int
	// Address is where the other ranks of a gang reach the worker.
	Address string
	// ContainerRuntime is the worker's podman or docker; "" for none.
	ContainerRuntime string
	// Properties are the platform properties it offers, "NAME=VALUE".
	Properties []string
	// Platform is the worker's OS-ARCH, from its OSFamily and ISA.
	Platform string
}

// Report is what a worker reports holding of job attempts, at its
// registration or in a heartbeat.
type Report struct {
	// Running holds the attempts (task ids) it runs, each with the master
	// port it picked as a gang's rank 0 (0 for none).
	Running map[string]int32
	// Finished holds the attempts that have ended whose ends it has not
	// had acknowledged: their reports are on their way.
	Finished map[string]bool
	// Lost reports whether an attempt assigned to the worker is lost: the
	// report does not hold it, though the worker had had its assignment
	// when it made the report.
	Lost func(task string) bool
}

// WorkerUp registers (or re-registers) a worker, which reports holding
// holds: it is reconciled with them (Reconcile).
func (c *Core) WorkerUp(info WorkerInfo, holds Report) {
	w := c.workers[info.Name]
	if w == nil {
		w = &worker{name: info.Name, running: map[Key]*job{}}
		c.workers[info.Name] = w
		c.sorted = nil
	}
	c.places = nil
	c.workerEpoch++
	w.cpus, w.memory, w.jobSlots, w.platform, w.address = info.CPUs, info.Memory, info.JobSlots, info.Platform, info.Address
	w.containerRuntime = info.ContainerRuntime
	w.properties, w.labels = map[string]bool{}, map[string]string{}
	for _, p := range info.Properties {
		w.properties[p] = true
		if name, value, ok := strings.Cut(p, "="); ok {
			if _, dup := w.labels[name]; !dup {
				w.labels[name] = value
			}
		}
	}
	gpus := append([]*workerpb.Gpu(nil), info.GPUs...)
	sort.Slice(gpus, func(a, b int) bool { return gpus[a].Index < gpus[b].Index })
	w.dev = devices{gpus: gpus, held: map[string]Key{}}
	if !w.registered && w.downSince != (time.Time{}) {
		c.unregistered--
	}
	w.connected, w.registered, w.downSince = true, true, time.Time{}
	c.workersSeen[w.name] = true
	c.changes = append(c.changes, w)
	c.reschedule = true
	for _, j := range w.running {
		if n := j.nodeOn(w.name); n != nil {
			for i, index := range n.GpuIndices {
				g := &workerpb.Gpu{Index: index}
				if i < len(n.GpuUuids) {
					g.Uuid = n.GpuUuids[i]
				}
				w.dev.hold(j.key, deviceID(g))
			}
		}
	}
	c.reconcile(w, holds)
	c.resendStdin(w)
}

// Reconcile brings what the Core holds of a connected worker in line with
// what the worker reports holding: an attempt it runs that is not one the
// Core has running there (ended, requeued or never known) is stopped; one
// assigned there that it has lost is requeued; the master port a gang's
// rank 0 picked is taken, if the Core did not hear of it.
func (c *Core) Reconcile(name string, r Report) {
	if w := c.workers[name]; w != nil && w.connected {
		c.reconcile(w, r)
	}
}

func (c *Core) reconcile(w *worker, r Report) {
	for _, j := range w.running {
		n := j.nodeOn(w.name)
		if n != nil && n.Assigned && n.State == "" && r.Lost(n.TaskId) {
			c.requeue(j, fmt.Sprintf("worker %s no longer runs it", w.name))
		}
	}
	for t, port := range r.Running {
		j, n := c.attempt(w.name, t)
		switch {
		case j == nil:
			c.send(w, &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Cancel{Cancel: &workerpb.Cancel{TaskId: t}}})
		case port > 0 && n.Rank == 0 && j.rec.MasterPort == 0:
			c.Started(w.name, &workerpb.JobStarted{TaskId: t, MasterPort: port})
		}
	}
}

// WorkerLost records that a worker is lost, as the owner of worker
// liveness found it (gone or silent past the deadline): its jobs are
// requeued, or end as NODE_FAIL.
func (c *Core) WorkerLost(name, why string) {
	w := c.workers[name]
	if w == nil {
		return
	}
	w.connected = false
	c.workersSeen[name] = true
	c.changes = append(c.changes, w)
	c.workerEpoch++
	if w.downSince.IsZero() {
		w.downSince = c.cfg.Now()
	}
	for _, j := range w.running {
		c.requeue(j, why)
	}
	c.reschedule = true
}

// WorkerDown records that a worker's stream ended: it gets no new job, and
// its jobs wait for it to come back, until it is lost (WorkerLost).
func (c *Core) WorkerDown(name string) {
	if w := c.workers[name]; w != nil && w.connected {
		w.connected = false
		c.workersSeen[name] = true
		c.changes = append(c.changes, w)
		c.workerEpoch++
		w.downSince = c.cfg.Now()
		c.reschedule = true
	}
}

// attempt returns the running job, and its node, of a task a worker
// reports on; nil when it is not one the worker runs.
func (c *Core) attempt(workerName, task string) (*job, *jobspb.Node) {
	j, ok := c.byTask[task]
	if !ok || j.state() != Running {
		return nil, nil
	}
	n := j.node(task)
	if n == nil || n.Worker != workerName || n.State != "" {
		return nil, nil
	}
	return j, n
}

// nodeOn returns the node of j's running attempt on a worker, or nil.
func (j *job) nodeOn(worker string) *jobspb.Node {
	for _, n := range j.rec.Nodes {
		if n.Worker == worker {
			return n
		}
	}
	return nil
}

// counter is where the output of one node of an attempt is counted: the
// record's fields for rank 0, the node's for the others.
type counter struct{ bytes, dropped, unmarked *int64 }

func (j *job) counter(n *jobspb.Node) counter {
	if n == nil || n.Rank == 0 {
		return counter{&j.rec.OutputBytes, &j.rec.OutputDroppedBytes, &j.rec.OutputUnmarkedBytes}
	}
	return counter{&n.OutputBytes, &n.OutputDroppedBytes, &n.OutputUnmarkedBytes}
}

// Log takes output of a running attempt's node. offset is where data
// starts in the node's output, and skipped how many bytes before it the
// worker dropped over MaxJobOutput. Repeats are ignored; output past a gap
// (chunks lost with a broken stream) waits for the worker to send the gap
// again; no more than MaxJobOutput bytes of a node's attempt are stored,
// whatever the worker sends; and a line in the output says where bytes
// were dropped.
func (c *Core) Log(workerName, task string, offset, skipped int64, data []byte) {
	j, n := c.attempt(workerName, task)
	if j == nil {
		return
	}
	o := j.counter(n)
	if offset-skipped > *o.bytes || offset+int64(len(data)) <= *o.bytes {
		return
	}
	if gap := offset - *o.bytes; gap > 0 {
		*o.bytes += gap
		*o.dropped += gap
		*o.unmarked += gap
	}
	data = data[*o.bytes-offset:]
	keep := int64(len(data))
	if c.cfg.MaxJobOutput > 0 {
		keep = min(keep, max(c.cfg.MaxJobOutput-(*o.bytes-*o.dropped), 0))
	}
	if keep > 0 {
		c.markDropped(j, n)
		c.logs = append(c.logs, store.LogChunk{ID: j.key.ID, Index: j.key.Index, Rank: n.Rank, Data: append([]byte(nil), data[:keep]...)})
	}
	*o.bytes += int64(len(data))
	*o.dropped += int64(len(data)) - keep
	*o.unmarked += int64(len(data)) - keep
	c.touch(j)
}

// markDropped adds to a node's output the line that says how much of it
// was dropped there, if any was since the last such line; n nil for rank
// 0.
func (c *Core) markDropped(j *job, n *jobspb.Node) {
	o := j.counter(n)
	if *o.unmarked > 0 {
		line := logLine(j, fmt.Sprintf("\n[rbs: %d bytes of output dropped here: over --max-job-output]\n", *o.unmarked))
		if n != nil {
			line.Rank = n.Rank // dropped from that rank's output
		} else {
			line.Rank = 0
		}
		c.logs = append(c.logs, line)
		*o.unmarked = 0
		c.touch(j)
	}
}

// markAllDropped marks what was dropped of every node's output.
func (c *Core) markAllDropped(j *job) {
	c.markDropped(j, nil)
	for _, n := range j.rec.Nodes {
		if n.Rank > 0 {
			c.markDropped(j, n)
		}
	}
}

// OutputStored returns, for each attempt's node running on the worker, how
// much of its output is stored.
func (c *Core) OutputStored(workerName string) map[string]int64 {
	out := map[string]int64{}
	if w := c.workers[workerName]; w != nil {
		for _, j := range w.running {
			if n := j.nodeOn(workerName); n != nil {
				out[n.TaskId] = *j.counter(n).bytes
			}
		}
	}
	return out
}

// Started records that a node has started; rank 0 of a gang reports the
// master port it picked, and the other ranks are then sent the attempt.
func (c *Core) Started(workerName string, e *workerpb.JobStarted) {
	j, n := c.attempt(workerName, e.TaskId)
	if j == nil || n.Rank != 0 || len(j.rec.Nodes) < 2 || j.rec.MasterPort != 0 || e.MasterPort <= 0 || e.MasterPort > 65535 {
		return
	}
	j.rec.MasterPort = e.MasterPort
	for _, other := range j.rec.Nodes[1:] {
		c.assign(j, other)
	}
	c.touch(j)
}

// Ended records how a node of a worker's attempt ended. A gang is driven
// by rank 0: when it ends, the ranks still running are stopped; when
// another rank ends other than COMPLETED, all the others are. The attempt
// ends once every node sent has reported, with rank 0's exit code and
// outputs, or as the first rank that failed ended.
func (c *Core) Ended(workerName string, e *workerpb.JobEnded) {
	// Once this round is committed, the worker may forget the end.
	if w := c.workers[workerName]; w != nil {
		c.send(w, &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Ack{Ack: &workerpb.Ack{TaskIds: []string{e.TaskId}}}})
	}
	j, n := c.attempt(workerName, e.TaskId)
	if j == nil {
		return
	}
	s := State(e.State)
	if !s.Terminal() || !s.Valid() {
		s = Failed
	}
	n.State, n.ExitCode = string(s), e.ExitCode
	n.CpuTimeMs, n.PeakMemoryBytes = e.CpuTimeMs, e.PeakMemoryBytes
	j.rec.CpuTimeMs += e.CpuTimeMs
	j.rec.PeakMemoryBytes = max(j.rec.PeakMemoryBytes, e.PeakMemoryBytes)
	c.touch(j)
	running := func(m *jobspb.Node) bool { return m.State == "" && m.Assigned }
	if n.Rank != 0 {
		if s != Completed && !j.rec.CancelRequested {
			j.rec.Message = fmt.Sprintf("rank %d on %s ended %s (exit %d): %s", n.Rank, n.Worker, s, e.ExitCode, e.Message)
			c.stopNodes(j, running)
		}
		c.endIfReported(j)
		return
	}
	j.rec.ExitCode = e.ExitCode
	j.rec.OomKilled = e.OomKilled
	j.rec.Message = e.Message
	j.rec.OutputRoot, j.rec.Outputs = e.OutputRoot, nil
	for _, o := range e.Outputs {
		j.rec.Outputs = append(j.rec.Outputs, &jobspb.JobOutput{Path: o.Path, Kind: o.Kind, SizeBytes: o.SizeBytes})
	}
	if e.CheckpointRoot != "" {
		j.rec.CheckpointRoot = e.CheckpointRoot
	}
	c.stopNodes(j, running)
	c.endIfReported(j)
}

// endIfReported ends j's attempt once rank 0 and every other node sent it
// have reported their end: as rank 0 ended, unless rank 0 was stopped
// because another rank failed, then as that rank (the first in rank order
// that failed of itself) ended; as CANCELLED when it was cancelled.
func (c *Core) endIfReported(j *job) {
	for _, n := range j.rec.Nodes {
		if n.State == "" && (n.Assigned || n.Rank == 0) {
			return
		}
	}
	s := State(j.rec.Nodes[0].State)
	for _, m := range j.rec.Nodes[1:] {
		if !j.rec.Nodes[0].Stopped {
			break
		}
		if m.State != "" && State(m.State) != Completed && !m.Stopped {
			s, j.rec.ExitCode = State(m.State), m.ExitCode
			j.rec.Message = fmt.Sprintf("rank %d on %s ended %s (exit %d)", m.Rank, m.Worker, m.State, m.ExitCode)
			break
		}
	}
	switch {
	case j.rec.CancelRequested:
		s = Cancelled
	case j.rec.PreemptedBy != "" && s != Completed:
		c.preempted(j)
		return
	}
	if !c.retry(j, s) {
		c.end(j, s, c.cfg.Now().UnixMilli())
	}
}

// preempted ends j's attempt, stopped to make room, as PREEMPTED: the job
// goes back to PENDING, to resume from its checkpoint, or, when it must not
// be requeued, ends PREEMPTED.
func (c *Core) preempted(j *job) {
	by := j.rec.PreemptedBy
	msg := "preempted by job " + by
	if j.spec.NoRequeue {
		j.rec.Message = msg
		c.end(j, Preempted, c.cfg.Now().UnixMilli())
		return
	}
	c.again(j, Preempted, msg, "requeued: "+msg, fmt.Sprintf("\n[rbs] attempt %d preempted; requeued\n", j.rec.Attempts))
}

// Tick does the time-driven work: requeueing the jobs of workers gone longer
// than LostAfter, ending jobs far past their time limit, and forgetting
// jobs past Retention.
func (c *Core) Tick() {
	now := c.cfg.Now()
	c.forgetOld(now)
	c.tickWindows(now)
	c.closeUnattached(now)
	if c.replanDue(now) || c.lookedPast {
		c.reschedule = true
	}
	if c.unregistered > 0 { // not every worker known from the store has come back
		for _, w := range c.workers {
			if !w.registered && !w.downSince.IsZero() && now.Sub(w.downSince) >= c.cfg.LostAfter {
				for _, j := range w.running {
					c.requeue(j, fmt.Sprintf("worker %s did not come back after the server restarted", w.name))
				}
			}
		}
	}
	for len(c.deadlines) > 0 && now.After(time.UnixMilli(c.deadlines[0].atMs).Add(c.cfg.LimitGrace)) {
		d := heap.Pop(&c.deadlines).(deadline)
		if j := d.j; c.byTask[d.task] == j && j.task == d.task {
			j.rec.Message = "time limit exceeded; the worker did not report the end"
			if !c.retry(j, Timeout) {
				c.end(j, Timeout, now.UnixMilli())
			}
		}
	}
}

// deadline is when a running attempt's time limit is up: task is its rank
// 0's. One whose attempt has ended stays until it is due, and is passed
// over then.
type deadline struct {
	atMs int64
	j    *job
	task string
}

// deadlines is a heap of deadlines, the soonest on top.
type deadlines []deadline

// add pushes d; when more than half of those held are of attempts that have
// ended (not in byTask), they go first, so that the heap stays as large as
// what runs.
func (h *deadlines) add(d deadline, byTask map[string]*job) {
	if len(*h) > 2*len(byTask)+1024 {
		*h = slices.DeleteFunc(*h, func(e deadline) bool { return byTask[e.task] != e.j })
		heap.Init(h)
	}
	heap.Push(h, d)
}

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(a, b int) bool { return d[a].atMs < d[b].atMs }
func (d deadlines) Swap(a, b int)      { d[a], d[b] = d[b], d[a] }
func (d *deadlines) Push(x any)        { *d = append(*d, x.(deadline)) }
func (d *deadlines) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}
