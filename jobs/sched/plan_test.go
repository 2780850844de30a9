package sched

import (
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// shown is job id as rbs job show gives it: its place in its queue and
// its expected start, as a duration from the harness's start (-1: none).
func (h *harness) shown(id int64, t0 time.Time) (int32, time.Duration) {
	h.t.Helper()
	info := h.c.Infos([]Key{{id, -1}}, true)[0]
	if info.ExpectedStartUnixMs == 0 {
		return info.QueuePosition, -1
	}
	return info.QueuePosition, time.UnixMilli(info.ExpectedStartUnixMs).Sub(t0)
}

func TestQueuePositionAndExpectedStart(t *testing.T) {
	min := func(n int64) int64 { return n * 60_000 }
	type want struct {
		name     string
		position int32
		start    time.Duration // from the first step; -1 for none
	}
	cases := []struct {
		name    string
		workers func(h *harness)
		// running jobs start at the first step, then waiting are submitted
		running, waiting []*jobspb.JobSpec
		window           *jobspb.Reservation // from and to as minutes after the start
		want             []want
	}{{
		name:    "behind a running job, one after another",
		workers: func(h *harness) { h.worker("w1", 1, 1) },
		running: []*jobspb.JobSpec{{Name: "a", TimeLimitMs: min(10)}},
		waiting: []*jobspb.JobSpec{{Name: "b", TimeLimitMs: min(5)}, {Name: "c", TimeLimitMs: min(5)}},
		want:    []want{{"b", 1, 10 * time.Minute}, {"c", 2, 15 * time.Minute}},
	}, {
		name:    "a job that would delay the top one's reservation goes after it",
		workers: func(h *harness) { h.worker("w1", 2, 2) },
		running: []*jobspb.JobSpec{{Name: "a", TimeLimitMs: min(10)}},
		waiting: []*jobspb.JobSpec{{Name: "big", Cpus: 2, TimeLimitMs: min(10)}, {Name: "long", TimeLimitMs: min(15)}},
		want:    []want{{"big", 1, 10 * time.Minute}, {"long", 2, 20 * time.Minute}},
	}, {
		name:    "the jobs behind a waiting one start after it, side by side",
		workers: func(h *harness) { h.worker("w1", 2, 2) },
		running: []*jobspb.JobSpec{{Name: "a", Cpus: 2, TimeLimitMs: min(10)}},
		waiting: []*jobspb.JobSpec{{Name: "big", Cpus: 2, TimeLimitMs: min(10)}, {Name: "small", TimeLimitMs: min(5)}, {Name: "later", TimeLimitMs: min(30)}},
		want:    []want{{"big", 1, 10 * time.Minute}, {"small", 2, 20 * time.Minute}, {"later", 3, 20 * time.Minute}},
	}, {
		name:    "a gang waits for its last node",
		workers: func(h *harness) { h.worker("w1", 1, 1); h.worker("w2", 1, 1) },
		running: []*jobspb.JobSpec{{Name: "a", TimeLimitMs: min(10)}, {Name: "b", TimeLimitMs: min(20)}},
		waiting: []*jobspb.JobSpec{{Name: "gang", Nodes: 2, TimeLimitMs: min(5)}},
		want:    []want{{"gang", 1, 20 * time.Minute}},
	}, {
		name:    "nothing is known behind a job without a time limit",
		workers: func(h *harness) { h.worker("w1", 1, 1) },
		running: []*jobspb.JobSpec{{Name: "forever"}},
		waiting: []*jobspb.JobSpec{{Name: "b", TimeLimitMs: min(5)}},
		want:    []want{{"b", 1, -1}},
	}, {
		name:    "a job that would run into a maintenance window starts after it",
		workers: func(h *harness) { h.worker("w1", 1, 1) },
		waiting: []*jobspb.JobSpec{{Name: "long", TimeLimitMs: min(120)}},
		window:  &jobspb.Reservation{Name: "upgrade", StartUnixMs: min(60), EndUnixMs: min(120)},
		want:    []want{{"long", 1, 120 * time.Minute}},
	}, {
		name:    "a job waiting on another has a place but no start",
		workers: func(h *harness) { h.worker("w1", 1, 1) },
		running: []*jobspb.JobSpec{{Name: "a", TimeLimitMs: min(10)}},
		waiting: []*jobspb.JobSpec{{Name: "first", TimeLimitMs: min(5)}, {Name: "after", TimeLimitMs: min(5), Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: 1, Index: -1}}}},
		want:    []want{{"first", 1, 10 * time.Minute}, {"after", 2, -1}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.workers(h)
			t0 := h.now
			if tc.window != nil {
				w := tc.window
				w.StartUnixMs, w.EndUnixMs = t0.UnixMilli()+w.StartUnixMs, t0.UnixMilli()+w.EndUnixMs
				if err := h.c.Reserve(w); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.running {
				h.submit(s)
			}
			if started := h.step(); len(started) != len(tc.running) {
				t.Fatalf("started %v, want all of %d", started, len(tc.running))
			}
			ids := map[string]int64{}
			for _, s := range tc.waiting {
				h.advance(time.Millisecond) // submitted in order
				ids[s.Name] = h.submit(s)
			}
			h.step()
			for _, w := range tc.want {
				if h.rec(ids[w.name], -1).State != string(Pending) {
					t.Fatalf("%s is %s, want it PENDING", w.name, h.rec(ids[w.name], -1).State)
				}
				pos, start := h.shown(ids[w.name], t0)
				if start > 0 {
					start = start.Round(time.Second)
				}
				if pos != w.position || start != w.start {
					t.Errorf("%s: position %d, expected start %v; want %d, %v", w.name, pos, start, w.position, w.start)
				}
			}
		})
	}
}
