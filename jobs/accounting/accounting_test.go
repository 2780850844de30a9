package accounting

import (
	"math"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// ended is a job that ran for wall on nodes nodes of cpus CPUs and gpus
// GPUs each, and used cpu of CPU time in all.
func ended(id, user, queue string, cpus, gpus, nodes int32, wall, cpu time.Duration) *jobspb.JobInfo {
	start := int64(1_800_000_000_000)
	r := &jobspb.JobRecord{
		State: "COMPLETED", StartUnixMs: start, EndUnixMs: start + wall.Milliseconds(), CpuTimeMs: cpu.Milliseconds(),
		Spec: &jobspb.JobSpec{Name: id, User: user, Queue: queue, Cpus: cpus, Gpus: gpus, Nodes: nodes},
	}
	for n := int32(0); n < nodes; n++ {
		r.Nodes = append(r.Nodes, &jobspb.Node{Rank: n})
	}
	return &jobspb.JobInfo{Id: id, Record: r}
}

func TestOf(t *testing.T) {
	never := &jobspb.JobInfo{Id: "3", Record: &jobspb.JobRecord{State: "CANCELLED", Spec: &jobspb.JobSpec{}}}
	cases := []struct {
		name     string
		job      *jobspb.JobInfo
		cpus     int32
		eff      float64
		gpuHours float64
	}{
		{"one CPU busy of two", ended("1", "ann", "batch", 2, 0, 1, 2*time.Second, 2*time.Second), 2, 0.5, 0},
		{"a gang counts every node", ended("2", "bob", "gpu", 4, 2, 2, time.Hour, 4*time.Hour), 8, 0.5, 4},
		{"never ran", never, 1, -1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := Of(tc.job)
			if u.CPUs != tc.cpus || math.Abs(u.Efficiency-tc.eff) > 1e-9 || math.Abs(u.GPUHours-tc.gpuHours) > 1e-9 {
				t.Errorf("CPUs %d, efficiency %v, GPU-hours %v; want %d, %v, %v", u.CPUs, u.Efficiency, u.GPUHours, tc.cpus, tc.eff, tc.gpuHours)
			}
		})
	}
}

func TestReport(t *testing.T) {
	rep := New([]*jobspb.JobInfo{
		ended("1", "ann", "batch", 1, 0, 1, 10*time.Second, 10*time.Second),
		ended("2", "ann", "gpu", 2, 1, 1, 10*time.Second, 2*time.Second),
		ended("3", "bob", "batch", 1, 0, 1, 10*time.Second, 5*time.Second),
	}, 2)
	if len(rep.Queues) != 2 || rep.Queues[0].Name != "batch" || rep.Queues[0].Jobs != 2 || rep.Queues[0].Efficiency != 0.75 {
		t.Errorf("queues %+v; want batch first with 2 jobs at 0.75", rep.Queues)
	}
	if len(rep.Users) != 2 || rep.Users[0].Name != "ann" || rep.Users[0].CPUTime != 12*time.Second || rep.Users[0].CPUWall != 30*time.Second {
		t.Errorf("users %+v; want ann with 12s of 30s", rep.Users)
	}
	if len(rep.Worst) != 2 || rep.Worst[0].ID != "2" || rep.Worst[1].ID != "3" {
		t.Errorf("worst %+v; want jobs 2 then 3", rep.Worst)
	}
}
