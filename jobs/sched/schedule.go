package sched

import (
	"container/heap"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// priorityOf breaks down a job's priority: its own, its queue's, and the
// bonus it has gained by waiting.
func (c *Core) priorityOf(j *job, now time.Time) *jobspb.Priority {
	p := &jobspb.Priority{Base: int64(j.spec.Priority), Queue: int64(c.queues[j.spec.Queue].Priority)}
	if j.state() == Pending {
		waited := time.Duration(now.UnixMilli()-j.rec.SubmitUnixMs) * time.Millisecond
		p.Age = min(int64(waited/c.cfg.AgeInterval)*c.cfg.AgeWeight, c.cfg.AgeCap)
	}
	p.Total = p.Base + p.Queue + p.Age
	return p
}

// depsState says whether a job's dependencies allow it to start: "" when
// they do, else the pending reason.
func (c *Core) depsState(j *job) string {
	reason := ""
	for _, d := range j.spec.Deps {
		for _, t := range c.depTargets(Key{d.JobId, d.Index}) {
			s := t.state()
			switch spec.DepKind(d.Kind) {
			case spec.AfterOK:
				if s.Terminal() && s != Completed {
					return ReasonDependencyNeverSatisfied
				}
				if s != Completed {
					reason = ReasonDependency
				}
			case spec.AfterNotOK:
				if s == Completed {
					return ReasonDependencyNeverSatisfied
				}
				if !s.Terminal() {
					reason = ReasonDependency
				}
			case spec.AfterAny:
				if !s.Terminal() {
					reason = ReasonDependency
				}
			}
		}
	}
	return reason
}

// reservation is the start promised to the highest-priority job that cannot
// start now (EASY backfill): lower-priority jobs may only start where they
// do not delay it.
type reservation struct {
	worker *worker
	at     time.Time // zero: never, as far as time limits tell
	need   capacity
	// extra is what the reserved worker has beyond the reserved job's needs
	// at the reserved time.
	extra capacity
}

// endOf is when a running job will have ended at the latest; the zero time
// when it has no limit.
func endOf(j *job) time.Time {
	if j.rec.TimeLimitMs == 0 {
		return time.Time{}
	}
	return time.UnixMilli(j.rec.StartUnixMs + j.rec.TimeLimitMs)
}

// reserve finds the worker and time at which j could start the earliest.
func (c *Core) reserve(j *job) *reservation {
	n := need(j.spec)
	var best *reservation
	for _, w := range c.sortedWorkers() {
		if !w.connected || !w.total().fits(n) || !w.runsPlatform(j.spec) {
			continue
		}
		running := make([]*job, 0, len(w.running))
		for _, r := range w.running {
			running = append(running, r)
		}
		sort.Slice(running, func(a, b int) bool { return before(endOf(running[a]), endOf(running[b])) })
		free := w.free()
		var at time.Time
		ok := free.fits(n)
		for _, r := range running {
			if ok {
				break
			}
			at = endOf(r)
			if at.IsZero() {
				break // the rest never end, as far as limits tell
			}
			free = free.plus(need(r.spec))
			ok = free.fits(n)
		}
		if !ok {
			at = time.Time{}
			free = w.total() // even eventually, only if all end
		}
		r := &reservation{worker: w, at: at, need: n, extra: free.minus(n)}
		if best == nil || before(r.at, best.at) {
			best = r
		}
	}
	return best
}

// before orders times with the zero time meaning "never".
func before(a, b time.Time) bool {
	if a.IsZero() {
		return false
	}
	return b.IsZero() || a.Before(b)
}

// allows reports whether starting j on w now keeps the reservation's promise.
func (r *reservation) allows(j *job, w *worker, now time.Time) bool {
	if r == nil || w != r.worker {
		return true
	}
	if j.rec.TimeLimitMs > 0 && !r.at.IsZero() && !now.Add(time.Duration(j.rec.TimeLimitMs)*time.Millisecond).After(r.at) {
		return true // it ends before the reserved start
	}
	return r.extra.fits(need(j.spec))
}

func (c *Core) sortedWorkers() []*worker {
	ws := make([]*worker, 0, len(c.workers))
	for _, w := range c.workers {
		ws = append(ws, w)
	}
	sort.Slice(ws, func(a, b int) bool { return ws[a].name < ws[b].name })
	return ws
}

// Schedule starts what can start, in priority order with backfill, and
// records why the rest waits. It works only after a change that can let a
// job start: time passing alone cannot (a waiting job's age changes the
// order, not whether anything fits).
func (c *Core) Schedule() {
	if !c.reschedule {
		return
	}
	defer func() { c.reschedule = false }()
	now := c.cfg.Now()
	queue := make(waiting, 0, len(c.pending))
	for _, j := range c.pending {
		queue = append(queue, ranked{j, c.priorityOf(j, now).Total})
	}
	heap.Init(&queue)
	runningInArray := map[int64]int{}
	for _, j := range c.byTask {
		if j.key.Index >= 0 {
			runningInArray[j.key.ID]++
		}
	}
	workers := c.sortedWorkers()
	free := map[*worker]capacity{}
	for _, w := range workers {
		if w.connected {
			free[w] = w.free()
		}
	}
	// Tasks of one array ask alike: a fit found (or not) for one holds for
	// the next until a job starts or the reservation is made.
	fits := map[fitQuery]*worker{}
	fit := func(j *job, res *reservation) *worker {
		q := fitQuery{need(j.spec), j.spec.Platform, j.rec.TimeLimitMs, res != nil}
		w, ok := fits[q]
		if !ok {
			w = c.bestFit(j, workers, free, res, now)
			fits[q] = w
		}
		return w
	}
	room := 0 // free job slots on connected workers
	for _, f := range free {
		room += max(f.slots, 0)
	}
	var res *reservation
	for queue.Len() > 0 {
		if room == 0 {
			// Nothing more can start: the rest wait for resources, or
			// for their own reasons, in any order.
			for _, r := range queue {
				reason := c.blocked(r.job, runningInArray, workers)
				if reason == "" {
					reason = ReasonResources
				}
				r.job.rec.PendingReason = reason
			}
			break
		}
		j := heap.Pop(&queue).(ranked).job
		reason := c.blocked(j, runningInArray, workers)
		if reason == "" {
			if w := fit(j, res); w != nil {
				c.start(j, w, now)
				free[w] = free[w].minus(need(j.spec))
				room--
				clear(fits)
				if j.key.Index >= 0 {
					runningInArray[j.key.ID]++
				}
				continue
			}
			if res == nil {
				res = c.reserve(j)
				clear(fits)
				reason = ReasonResources
			} else if fit(j, nil) != nil {
				reason = ReasonPriority
			} else {
				reason = ReasonResources
			}
		}
		// A pending reason is worked out again every round, so a change of
		// reason alone is not written: it reaches the store with the job's
		// next change of state, and a restarted server recomputes it. (With
		// a large array waiting, reasons flip as slots free and fill; writing
		// each flip would rewrite every waiting task round after round.)
		j.rec.PendingReason = reason
	}
}

// blocked says why j cannot start however much room there is: its
// dependencies, its array's cap, or no worker ever fitting it; "" when
// none of these holds.
func (c *Core) blocked(j *job, runningInArray map[int64]int, workers []*worker) string {
	if reason := c.depsState(j); reason != "" {
		return reason
	}
	if a := j.spec.Array; a != nil && a.Limit > 0 && runningInArray[j.key.ID] >= int(a.Limit) {
		return ReasonArrayTaskLimit
	}
	return c.placeable(j, workers)
}

// ranked is a waiting job and its priority in this round.
type ranked struct {
	job  *job
	prio int64
}

// waiting is a heap of the waiting jobs in the order a round considers
// them: higher priority first, then earlier submitted, then by id and
// array index. A round takes only as many off it as there is room for.
type waiting []ranked

func (q waiting) Len() int { return len(q) }

func (q waiting) Less(a, b int) bool {
	ja, jb := q[a].job, q[b].job
	switch {
	case q[a].prio != q[b].prio:
		return q[a].prio > q[b].prio
	case ja.rec.SubmitUnixMs != jb.rec.SubmitUnixMs:
		return ja.rec.SubmitUnixMs < jb.rec.SubmitUnixMs
	case ja.key.ID != jb.key.ID:
		return ja.key.ID < jb.key.ID
	}
	return ja.key.Index < jb.key.Index
}

func (q waiting) Swap(a, b int) { q[a], q[b] = q[b], q[a] }

func (q *waiting) Push(x any) { *q = append(*q, x.(ranked)) }

func (q *waiting) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// placeable returns a pending reason when no registered worker could ever
// run j.
func (c *Core) placeable(j *job, workers []*worker) string {
	n := need(j.spec)
	any, ofPlatform := false, false
	for _, w := range workers {
		if w.jobSlots == 0 {
			continue
		}
		any = true
		if !w.runsPlatform(j.spec) {
			continue
		}
		ofPlatform = true
		if w.total().fits(n) {
			return ""
		}
	}
	switch {
	case !any:
		return ReasonNoWorkers
	case !ofPlatform:
		return ReasonNoWorkerOfPlatform
	}
	return ReasonNoWorkerFits
}

// runsPlatform reports whether w is of the platform s was built for.
func (w *worker) runsPlatform(s *jobspb.JobSpec) bool {
	return s.Platform == "" || s.Platform == w.platform
}

// fitQuery is what bestFit's answer depends on besides the workers' room.
type fitQuery struct {
	need     capacity
	platform string
	limitMs  int64
	reserved bool
}

// bestFit picks, among the connected workers (the keys of room, which holds
// what each has free), the one j fits on now that leaves the least room
// (packing jobs tightly), respecting the reservation.
func (c *Core) bestFit(j *job, workers []*worker, room map[*worker]capacity, res *reservation, now time.Time) *worker {
	n := need(j.spec)
	var best *worker
	bestLeft := int64(math.MaxInt64)
	for _, w := range workers {
		free, ok := room[w]
		if !ok || !free.fits(n) || !w.runsPlatform(j.spec) || !res.allows(j, w, now) {
			continue
		}
		left := int64(free.cpus-n.cpus)<<32 + int64(free.gpus-n.gpus)<<16 + int64(free.slots-n.slots)
		if left < bestLeft {
			best, bestLeft = w, left
		}
	}
	return best
}

// start runs j on w: it picks GPUs, records the attempt and sends it.
func (c *Core) start(j *job, w *worker, now time.Time) {
	_, _, usedGPUs := w.used()
	var gpus []int32
	for _, g := range w.gpus {
		if len(gpus) == int(j.spec.Gpus) {
			break
		}
		if !usedGPUs[g] {
			gpus = append(gpus, g)
		}
	}
	c.move(j, Running)
	j.rec.PendingReason = ""
	j.rec.StartUnixMs = now.UnixMilli()
	j.rec.Attempts++
	j.rec.Worker = w.name
	j.rec.GpuIndices = gpus
	j.task = taskID(j)
	j.rec.OutputBytes, j.rec.OutputDroppedBytes, j.rec.OutputUnmarkedBytes = 0, 0, 0
	j.rec.ExitCode = 0 // none yet: an attempt lost goes into the history without one
	w.running[j.key] = j
	c.byTask[j.task] = j
	c.touch(j)

	s := j.spec
	env := map[string]string{}
	for k, v := range s.Env {
		env[k] = v
	}
	env["RBS_JOB_ID"] = strconv.FormatInt(j.key.ID, 10)
	env["RBS_JOB_NAME"] = s.Name
	env["RBS_QUEUE"] = s.Queue
	env["RBS_ATTEMPT"] = strconv.Itoa(int(j.rec.Attempts))
	if j.key.Index >= 0 {
		env["RBS_ARRAY_INDEX"] = strconv.Itoa(int(j.key.Index))
	}
	c.send(w, &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_AssignJob{AssignJob: &workerpb.AssignJob{
		TaskId:         j.task,
		JobId:          j.key.String(),
		Command:        s.Command,
		Script:         s.Script,
		Env:            env,
		Cpus:           cpusOf(s),
		MemoryBytes:    s.MemoryBytes,
		GpuIndices:     gpus,
		TimeLimitMs:    j.rec.TimeLimitMs,
		MaxOutputBytes: c.cfg.MaxJobOutput,
		InputRoot:      s.InputRoot,
		Outputs:        s.Outputs,
		CheckpointDir:  s.CheckpointDir,
		CheckpointRoot: j.rec.CheckpointRoot,
		Interactive:    s.Interactive,
	}}})
	if s.Interactive {
		c.startStdin(j, w)
	}
	if j.rec.Attempts > 1 {
		c.logs = append(c.logs, logLine(j, fmt.Sprintf("[rbs] attempt %d on worker %s\n", j.rec.Attempts, w.name)))
	}
}
