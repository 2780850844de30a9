package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

const (
	gib       = int64(1) << 30
	rackSize  = 40
	queues    = 8
	users     = 50
	accounts  = 5
	arrayTask = 1000
	chainLen  = 5
)

// shape is a kind of simulated worker.
type shape struct {
	name      string
	cpus      int32
	memory    int64
	gpus      int
	slots     int
	platform  string
	container bool
}

// fleet returns the workers of the simulation: in the simple mix all
// CPU-only; in the full mix CPU-only and 8-GPU nodes, some with a
// container runtime, on two platforms, in racks of 40.
func fleet(cfg Config) []sched.WorkerInfo {
	cpu := shape{name: "cpu", cpus: 32, memory: 128 * gib, slots: 16, platform: "linux-x86_64"}
	gpu := shape{name: "gpu", cpus: 96, memory: 1024 * gib, gpus: 8, slots: 8, platform: "linux-x86_64"}
	arm := shape{name: "arm", cpus: 64, memory: 256 * gib, slots: 16, platform: "linux-arm64"}
	out := make([]sched.WorkerInfo, cfg.Workers)
	for i := range out {
		s := cpu
		if cfg.Mix == "full" {
			switch i % 20 {
			case 0, 1, 2, 3, 4: // a quarter: GPU nodes
				s = gpu
			case 5, 6: // a tenth: the other platform
				s = arm
			}
			s.container = i%3 == 0
		}
		w := sched.WorkerInfo{
			Name:     fmt.Sprintf("w%05d", i),
			CPUs:     s.cpus,
			Memory:   s.memory,
			JobSlots: s.slots,
			Address:  fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256),
			Platform: s.platform,
			Properties: []string{
				fmt.Sprintf("rack=r%03d", i/rackSize),
				"shape=" + s.name,
			},
		}
		for g := range s.gpus {
			w.GPUs = append(w.GPUs, &workerpb.Gpu{Index: int32(g), Uuid: fmt.Sprintf("GPU-%s-%d", w.Name, g)})
		}
		if s.container {
			w.ContainerRuntime = "podman"
		}
		out[i] = w
	}
	return out
}

// kind is a kind of job in the workload.
type kind int

const (
	single kind = iota
	array
	gpuJob
	gang8
	gang64
	chain
	armJob
	containerJob
)

var kindNames = [...]string{"single", "array", "gpu", "gang8", "gang64", "chain", "arm", "container"}

// submission is what arrives at once: one job, or an array, or a chain of
// jobs each depending on the one before.
type submission struct {
	kind  kind
	at    time.Duration // since the start
	jobs  []*manifest.Job
	tasks int // jobs counting array tasks
	// runs is how long each job runs (each task of an array alike).
	runs []time.Duration
}

// workload makes the submissions of the simulation, in arrival order.
type workload struct {
	cfg   Config
	rng   *rand.Rand
	left  int // tasks still to make
	every time.Duration
	next  time.Duration
	// bigGang is the size of the larger gangs: 64 nodes, or fewer on a
	// fleet with less than twice as many GPU nodes.
	bigGang int32
}

func newWorkload(cfg Config, workers []sched.WorkerInfo) *workload {
	// Arrivals come a little faster than the fleet can run them, so that
	// a queue builds up: the fleet's CPU over the mean job's CPU time.
	var cpus float64
	gpuNodes := 0
	for _, w := range workers {
		cpus += float64(w.CPUs)
		if len(w.GPUs) >= 8 {
			gpuNodes++
		}
	}
	meanCPUSeconds := 2.5 * meanDuration.Seconds()
	perSecond := 1.2 * cpus / meanCPUSeconds
	return &workload{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 1)), left: cfg.Jobs,
		every: time.Duration(float64(time.Second) / perSecond), bigGang: int32(min(64, max(gpuNodes/2, 2)))}
}

// pick returns the kind of the next submission.
func (w *workload) pick() kind {
	if w.cfg.Mix == "simple" {
		return single
	}
	// By share of the submissions: arrays, one in 3,300, are about a
	// fifth of the tasks.
	x := w.rng.Float64()
	switch {
	case x < 0.0003:
		return array
	case x < 0.0005:
		return gang64
	case x < 0.01:
		return gang8
	case x < 0.11:
		return gpuJob
	case x < 0.13:
		return chain
	case x < 0.16:
		return armJob
	case x < 0.19:
		return containerJob
	}
	return single
}

// meanDuration is about the mean duration of a single job.
const meanDuration = 8 * time.Minute

// duration draws how long a job runs: heavy-tailed (log-normal, σ 1.2),
// capped at a day; gangs run longer.
func (w *workload) duration(k kind) time.Duration {
	median := 4 * time.Minute
	if k == gang8 || k == gang64 {
		median = 30 * time.Minute
	}
	d := time.Duration(float64(median) * math.Exp(1.2*w.rng.NormFloat64()))
	return min(max(d, time.Second), 24*time.Hour)
}

// Next returns the next submission, or false when the workload is done.
func (w *workload) Next() (submission, bool) {
	if w.left <= 0 {
		return submission{}, false
	}
	k := w.pick()
	s := submission{kind: k, at: w.next}
	w.next += w.every
	q := w.rng.IntN(queues)
	base := func() *jobspb.JobSpec {
		return &jobspb.JobSpec{
			Queue:       fmt.Sprintf("q%d", q),
			User:        userName(w.rng.IntN(users)),
			Priority:    int32(w.rng.IntN(10)),
			Command:     []string{"train"},
			Cpus:        int32(1 + w.rng.IntN(4)),
			MemoryBytes: int64(1+w.rng.IntN(8)) * gib,
			Preemptible: q == 0,
		}
	}
	switch k {
	case array:
		n := min(arrayTask, w.left)
		sp := base()
		a, err := spec.ParseArray(fmt.Sprintf("0-%d%%%d", n-1, 200))
		if err != nil {
			panic(err)
		}
		sp.Array = &jobspb.ArraySpec{Text: a.String(), Limit: int32(a.Limit)}
		s.jobs = []*manifest.Job{{Spec: sp, Indices: a.Indices}}
		s.tasks = n
	case chain:
		for range min(chainLen, w.left) {
			s.jobs = append(s.jobs, &manifest.Job{Spec: base()})
		}
		s.tasks = len(s.jobs)
	default:
		sp := base()
		switch k {
		case gpuJob:
			sp.Gpus = int32(1 << w.rng.IntN(4)) // 1, 2, 4 or 8
			sp.Cpus = 4 * sp.Gpus
		case gang8, gang64:
			sp.Nodes = min(8, w.bigGang)
			if k == gang64 {
				sp.Nodes = w.bigGang
			}
			sp.Gpus, sp.Cpus, sp.MemoryBytes = 8, 64, 512*gib
			sp.Preemptible = false
			if k == gang8 {
				sp.Pack = "rack" // as few racks as it can
			}
		case armJob:
			sp.Platform = "linux-arm64"
		case containerJob:
			sp.Container = "localhost/train:1"
		}
		s.jobs = []*manifest.Job{{Spec: sp}}
		s.tasks = 1
	}
	// Each job runs for a heavy-tailed time, and asks for a time limit
	// of twice that, rounded up to a minute, as users who know their jobs
	// do: backfill plans by the limits.
	for _, j := range s.jobs {
		d := w.duration(k)
		s.runs = append(s.runs, d)
		j.Spec.TimeLimitMs = (2 * d).Truncate(time.Minute).Milliseconds() + time.Minute.Milliseconds()
	}
	w.left -= s.tasks
	return s, true
}

// userName names user u of the workload.
func userName(u int) string { return fmt.Sprintf("u%02d", u) }
