// Package accounting works out what ended jobs used, as Slurm's sacct and
// seff report it: per job its wall time, CPU time and CPU efficiency (CPU
// time over the CPUs allocated times the wall time), its peak memory
// against its request and the GPU-hours allocated to it; and totals per
// queue and per user, with the jobs that used their CPUs worst.
//
// Every figure is of a job's last attempt, the one its record holds; a gang
// counts the CPUs, GPUs and CPU time of all its nodes.
package accounting

import (
	"cmp"
	"slices"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// Usage is what one ended job used.
type Usage struct {
	ID    string
	Name  string
	User  string
	Queue string
	State string
	Nodes int32
	// CPUs and GPUs are those allocated, on all nodes.
	CPUs, GPUs int32
	Wall       time.Duration
	CPUTime    time.Duration
	// Efficiency is CPUTime over CPUs × Wall, from 0 to 1 (or above, for a
	// job that used more than it asked for); -1 when it never ran.
	Efficiency float64
	// PeakMemory is the largest peak of its nodes; MemoryRequest what each
	// node asked for (0: none given).
	PeakMemory, MemoryRequest int64
	GPUHours                  float64
}

// Total adds up the jobs of a queue or a user.
type Total struct {
	Name     string
	Jobs     int
	Wall     time.Duration
	CPUTime  time.Duration
	CPUWall  time.Duration // CPUs × wall time allocated, what CPUTime is measured against
	GPUHours float64
	// Efficiency is CPUTime over CPUWall; -1 when none of the jobs ran.
	Efficiency float64
}

// Report is the accounting of a set of ended jobs.
type Report struct {
	Jobs   []Usage // in the order given
	Queues []Total // by name
	Users  []Total // by name
	// Worst are the jobs that ran with the lowest CPU efficiency, worst
	// first.
	Worst []Usage
}

// Of works out the usage of one ended job.
func Of(j *jobspb.JobInfo) Usage {
	r, s := j.Record, j.Record.Spec
	nodes := max(int32(len(r.Nodes)), 1)
	u := Usage{
		ID: j.Id, Name: s.GetName(), User: s.GetUser(), Queue: s.GetQueue(), State: r.State, Nodes: nodes,
		CPUs: max(s.GetCpus(), 1) * nodes, GPUs: s.GetGpus() * nodes,
		CPUTime:    time.Duration(r.CpuTimeMs) * time.Millisecond,
		PeakMemory: r.PeakMemoryBytes, MemoryRequest: s.GetMemoryBytes(), Efficiency: -1,
	}
	if r.StartUnixMs > 0 && r.EndUnixMs >= r.StartUnixMs {
		u.Wall = time.Duration(r.EndUnixMs-r.StartUnixMs) * time.Millisecond
	}
	if u.Wall > 0 {
		u.Efficiency = u.CPUTime.Seconds() / (float64(u.CPUs) * u.Wall.Seconds())
		u.GPUHours = float64(u.GPUs) * u.Wall.Hours()
	}
	return u
}

// New reports on jobs, keeping the worst jobs by CPU efficiency.
func New(jobs []*jobspb.JobInfo, worst int) *Report {
	rep := &Report{}
	queues, users := map[string]*Total{}, map[string]*Total{}
	add := func(m map[string]*Total, name string, u Usage) {
		t := m[name]
		if t == nil {
			t = &Total{Name: name}
			m[name] = t
		}
		t.Jobs++
		t.Wall += u.Wall
		t.CPUTime += u.CPUTime
		t.CPUWall += time.Duration(u.CPUs) * u.Wall
		t.GPUHours += u.GPUHours
	}
	for _, j := range jobs {
		u := Of(j)
		rep.Jobs = append(rep.Jobs, u)
		add(queues, u.Queue, u)
		add(users, u.User, u)
	}
	rep.Queues, rep.Users = totals(queues), totals(users)
	for _, u := range rep.Jobs {
		if u.Efficiency >= 0 {
			rep.Worst = append(rep.Worst, u)
		}
	}
	slices.SortStableFunc(rep.Worst, func(a, b Usage) int { return cmp.Compare(a.Efficiency, b.Efficiency) })
	rep.Worst = rep.Worst[:min(len(rep.Worst), worst)]
	return rep
}

func totals(m map[string]*Total) []Total {
	out := make([]Total, 0, len(m))
	for _, t := range m {
		t.Efficiency = -1
		if t.CPUWall > 0 {
			t.Efficiency = t.CPUTime.Seconds() / t.CPUWall.Seconds()
		}
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Total) int { return cmp.Compare(a.Name, b.Name) })
	return out
}
