package main

import (
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// The simulation at 1% of its default scale, through the real core: every
// job ends, completed, and the invariants Run checks as it goes hold (no
// worker over-committed, no GPU given twice, gangs all-or-nothing). No
// timing is checked.
func TestSimulationInvariants(t *testing.T) {
	for _, cfg := range []Config{
		{Workers: 100, Jobs: 10000, Mix: "full", Store: "memory", Seed: 1},
		{Workers: 100, Jobs: 10000, Mix: "simple", Store: "memory", Seed: 2},
		{Workers: 20, Jobs: 1000, Mix: "full", Store: "sqlite", Seed: 3},
	} {
		t.Run(cfg.Mix+"-"+cfg.Store, func(t *testing.T) {
			res, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.JobsCompleted != int64(cfg.Jobs) || res.Placements < int64(cfg.Jobs-cfg.Jobs/10) {
				t.Fatalf("%d jobs completed in %d placements; want %d", res.JobsCompleted, res.Placements, cfg.Jobs)
			}
			// Among jobs that ask alike, only backfill starts a later one
			// first: one that asks a shorter time limit.
			if res.PassedOver != res.PassedOverByLimit {
				t.Fatalf("%d jobs passed over by a later one asking alike, only %d of them by backfill", res.PassedOver, res.PassedOverByLimit)
			}
			if res.HeapBytesPerJob <= 0 || res.Rounds == 0 || len(res.Utilisation) == 0 {
				t.Fatalf("figures missing: %+v", res)
			}
			// With 100 workers, 25 have 8 GPUs: enough for 8-node gangs.
			if cfg.Mix == "full" && cfg.Workers >= 100 && (res.Gangs8 == 0 || res.Gangs8OneRack > res.Gangs8 || res.FairShareError < 0 || res.FairShareError > 1) {
				t.Fatalf("8-node gangs %d, %d in one rack; fair-share error %v", res.Gangs8, res.Gangs8OneRack, res.FairShareError)
			}
		})
	}
}

// The checks the simulation makes of each assignment fail as they should.
func TestAssignChecks(t *testing.T) {
	gpus := []*workerpb.Gpu{{Index: 0}, {Index: 1}}
	tests := []struct {
		name    string
		assigns []*workerpb.AssignJob
		want    string
	}{
		{"fits", []*workerpb.AssignJob{{TaskId: "1#1", JobId: "1", Cpus: 2}, {TaskId: "2#1", JobId: "2", Cpus: 2}}, ""},
		{"too many CPUs", []*workerpb.AssignJob{{TaskId: "1#1", JobId: "1", Cpus: 3}, {TaskId: "2#1", JobId: "2", Cpus: 2}}, "over-committed"},
		{"too many jobs", []*workerpb.AssignJob{{TaskId: "1#1", JobId: "1"}, {TaskId: "2#1", JobId: "2"}, {TaskId: "3#1", JobId: "3"}}, "over-committed"},
		{"a GPU twice", []*workerpb.AssignJob{{TaskId: "1#1", JobId: "1", GpuIndices: []int32{1}}, {TaskId: "2#1", JobId: "2", GpuIndices: []int32{1}}}, "GPU 1 of w given to 2#1 while 1#1 holds it"},
		{"no such GPU", []*workerpb.AssignJob{{TaskId: "1#1", JobId: "1", GpuIndices: []int32{2}}}, "w has 2"},
		{"twice", []*workerpb.AssignJob{{TaskId: "1#1", JobId: "1"}, {TaskId: "1#1", JobId: "1"}}, "assigned twice"},
		{"a rank before rank 0", []*workerpb.AssignJob{{TaskId: "1#1.1", JobId: "1"}}, "before its rank 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{now: time.Now(), workers: map[string]*simWorker{
				"w": {info: sched.WorkerInfo{Name: "w", CPUs: 4, Memory: 1 << 30, JobSlots: 2, GPUs: gpus}, gpuHolder: map[int32]string{}},
			}, running: map[string]*node{}, meta: map[int64]jobMeta{}, gangs: map[string]*gangState{}, submitted: map[int64]time.Time{}}
			var err error
			for _, a := range tt.assigns {
				if err = s.assign("w", a); err != nil {
					break
				}
			}
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("assign: %v; want %q", err, tt.want)
			}
		})
	}
}

// PassedOver counts the earlier jobs alike that still wait when a job
// starts, and which of them asked a longer time limit.
func TestPassedOver(t *testing.T) {
	alike := asks{user: "u00", queue: "q1", cpus: 2, memory: 1 << 30}
	other := alike
	other.memory = 2 << 30
	// Jobs 1-4 ask alike, job 5 asks more memory; limits by id.
	meta := map[int64]jobMeta{
		1: {asks: alike, limitMs: 60_000}, 2: {asks: alike, limitMs: 600_000}, 3: {asks: alike, limitMs: 60_000},
		4: {asks: alike, limitMs: 60_000}, 5: {asks: other, limitMs: 60_000},
	}
	tests := []struct {
		name            string
		starts          []int64
		passed, byLimit int
	}{
		{"in order", []int64{1, 2, 3, 4, 5}, 0, 0},
		{"another shape passes", []int64{5, 1, 2, 3, 4}, 0, 0},
		{"a shorter limit passes a longer", []int64{1, 3, 2, 4}, 1, 1},
		{"the last passes all", []int64{4, 1, 2, 3}, 3, 1},
		{"one requeued waits at its place", []int64{1, 2, -1, 3}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &sim{meta: meta, alike: map[asks][]int64{}}
			for id := int64(1); id <= 5; id++ {
				s.waitAlike(id)
			}
			for _, id := range tt.starts {
				if id < 0 {
					s.waitAlike(-id) // requeued
					continue
				}
				s.startAlike(id)
			}
			if s.res.PassedOver != tt.passed || s.res.PassedOverByLimit != tt.byLimit {
				t.Fatalf("passed over %d, %d by limit; want %d, %d", s.res.PassedOver, s.res.PassedOverByLimit, tt.passed, tt.byLimit)
			}
		})
	}
}
