package sched

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

// checkIndexes compares the Core's pending set, state counts and running
// attempts with what a scan of every job gives.
func checkIndexes(c *Core) error {
	counts := map[State]int64{}
	pending := map[Key]bool{}
	running := map[Key]bool{}
	for k, j := range c.jobs {
		counts[j.state()]++
		switch j.state() {
		case Pending:
			pending[k] = true
		case Running:
			running[k] = true
		}
	}
	for s, n := range c.counts {
		if n != counts[s] {
			return fmt.Errorf("count of %s is %d, a scan finds %d", s, n, counts[s])
		}
	}
	for s, n := range counts {
		if c.counts[s] != n {
			return fmt.Errorf("count of %s is %d, a scan finds %d", s, c.counts[s], n)
		}
	}
	inPending := map[Key]bool{}
	for k := range c.pending {
		inPending[k] = true
	}
	if !maps.Equal(pending, inPending) {
		return fmt.Errorf("pending set %v, a scan finds %v", inPending, pending)
	}
	open := map[int64]int{}
	ids := map[int64]bool{}
	for k, j := range c.jobs {
		ids[k.ID] = true
		if !j.state().Terminal() {
			open[k.ID]++
		}
	}
	if !maps.Equal(open, c.open) {
		return fmt.Errorf("open parts %v, a scan finds %v", c.open, open)
	}
	queued := map[int64]int{}
	for _, e := range c.ended {
		queued[e.id]++
	}
	for id := range ids {
		if want := map[bool]int{true: 1}[open[id] == 0]; queued[id] != want {
			return fmt.Errorf("job %d is queued to be forgotten %d times, want %d", id, queued[id], want)
		}
	}
	for id := range queued {
		if !ids[id] {
			return fmt.Errorf("job %d is queued to be forgotten but not known", id)
		}
	}
	inTasks := map[Key]bool{}
	for _, j := range c.byTask {
		inTasks[j.key] = true
	}
	if !maps.Equal(running, inTasks) {
		return fmt.Errorf("running attempts %v, a scan finds %v", inTasks, running)
	}
	victims := map[string]int{}
	for _, e := range c.victims.es {
		if !e.gone {
			victims[fmt.Sprint(e.w.name, "/", e.j.key, "/", e.stopping)]++
		}
	}
	onWorkers := map[string]int{}
	inHeap := 0
	for _, w := range c.workers {
		for _, p := range w.preemptible {
			onWorkers[fmt.Sprint(w.name, "/", p.j.key, "/", p.stopping)]++
		}
		switch at := w.soonestAt; {
		case at == 0 && len(w.byEnd) > 0:
			return fmt.Errorf("worker %s runs jobs but is not in the soonest heap", w.name)
		case at > 0 && (at > len(c.soonest) || c.soonest[at-1] != w):
			return fmt.Errorf("worker %s is not at its place %d in the soonest heap", w.name, at)
		case at > 0:
			inHeap++
			if p := (at - 2) / 2; at > 1 && firstEnd(c.soonest[p]) > firstEnd(w) {
				return fmt.Errorf("worker %s ends first before its parent in the soonest heap", w.name)
			}
		}
	}
	if inHeap != len(c.soonest) {
		return fmt.Errorf("the soonest heap holds %d workers, %d are at their places", len(c.soonest), inHeap)
	}
	if !maps.Equal(victims, onWorkers) {
		return fmt.Errorf("victim index %v, the workers' lists %v", victims, onWorkers)
	}
	if !slices.IsSortedFunc(c.victims.es, func(a, b victim) int { return started(a.placed, b.placed) }) {
		return fmt.Errorf("the victim index is out of order")
	}
	if len(c.fronts) != len(c.classes) {
		return fmt.Errorf("%d classes, %d fronts", len(c.classes), len(c.fronts))
	}
	for _, cl := range c.classes {
		f := c.fronts[cl.front]
		want := front{cl: cl, class: cl.key, submit: cl.jobs[0].submit, key: cl.jobs[0].key, n: len(cl.jobs), off: cl.off, run: f.run}
		if f != want {
			return fmt.Errorf("class %v's front %+v, want %+v", cl.key, f, want)
		}
		if cl.gone > 0 && !cl.listed {
			return fmt.Errorf("class %v counts %d jobs gone but is not listed to shrink", cl.key, cl.gone)
		}
		if len(cl.skips) != len(cl.jobs) {
			return fmt.Errorf("class %v keeps %d skips for %d jobs", cl.key, len(cl.skips), len(cl.jobs))
		}
		left := 0
		for i, j := range cl.jobs {
			if j.class != cl || j.place() != i || cl.skips[i] != (skip{cl.skips[i].query, j.rec.TimeLimitMs, j.submit, j.key, cl.skips[i].epoch, j.waited}) {
				return fmt.Errorf("job %s at %d of class %v: its class %p, place %d, waited %v; the class's copy %+v",
					j.key, i, cl.key, j.class, j.at, j.waited, cl.skips[i])
			}
			if !j.waits() {
				left++
			}
		}
		if left != cl.gone {
			return fmt.Errorf("class %v counts %d jobs gone, %d of its jobs left it", cl.key, cl.gone, left)
		}
		if r := f.run; r.epoch == c.queryEpoch {
			if r.end > len(cl.jobs)+cl.off {
				return fmt.Errorf("class %v's run [%d, %d) ends past its last job (%d)", cl.key, r.from, r.end, len(cl.jobs)+cl.off)
			}
			for i := max(r.from-cl.off, 0); i < r.end-cl.off; i++ {
				sk := cl.skips[i]
				if sk.waited != waitedRoom || sk.query == nil || sk.epoch != r.epoch || sk.query.bit < 0 || !bitIn(r.asks, sk.query.bit) {
					return fmt.Errorf("class %v's run from %d (asks %v) holds job %s at %d, which it cannot pass: %+v", cl.key, r.from, r.asks, cl.jobs[i].key, i, sk)
				}
			}
		}
	}
	return nil
}

func bitIn(b queryBits, bit int) bool { return b[bit/64]&(1<<(bit%64)) != 0 }

// restartKeepsEverything restarts the Core from the store and checks that
// every job comes back as it was, spec included. Pending reasons are left
// out: a restarted server works them out again.
func restartKeepsEverything(t *testing.T, h *harness) {
	t.Helper()
	before := map[Key]*jobspb.JobRecord{}
	for k := range h.c.jobs {
		r := h.c.Infos([]Key{k}, true)[0].Record
		r.PendingReason = ""
		before[k] = r
	}
	h.restart()
	if len(h.c.jobs) != len(before) {
		t.Fatalf("%d jobs before a restart, %d after", len(before), len(h.c.jobs))
	}
	for k, want := range before {
		got := h.c.Infos([]Key{k}, true)[0].Record
		got.PendingReason = ""
		if !proto.Equal(got, want) {
			t.Fatalf("job %s after a restart:\n%v\nwant\n%v", k, got, want)
		}
	}
}

// TestIndexesMatchAScan drives a Core through random submissions, worker
// comings and goings, ends, cancels and restarts, and checks its indexes
// against a full scan after every step.
func TestIndexesMatchAScan(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		h := newHarness(t)
		h.c.cfg.Retention = 2 * time.Minute
		var ids []int64
		for op := 0; op < 300; op++ {
			switch rng.IntN(8) {
			case 0, 1:
				s := &jobspb.JobSpec{Cpus: int32(1 + rng.IntN(3)), NoRequeue: rng.IntN(4) == 0,
					Priority: int32(rng.IntN(3)) * 50, Preemptible: rng.IntN(3) == 0, TimeLimitMs: int64(rng.IntN(3)) * time.Minute.Milliseconds()}
				if rng.IntN(3) == 0 {
					s.Array = &jobspb.ArraySpec{Text: []string{"0-2", "0-2%1", "0-2%2"}[rng.IntN(3)]}
				}
				if len(ids) > 0 && rng.IntN(3) == 0 {
					kinds := []string{"afterok", "afterany", "afternotok"}
					dep := ids[rng.IntN(len(ids))]
					if _, err := h.c.Lookup(fmt.Sprint(dep)); err == nil {
						s.Deps = []*jobspb.Dependency{{Kind: kinds[rng.IntN(3)], JobId: dep, Index: -1}}
					}
				}
				ids = append(ids, h.submit(s))
			case 2:
				// Every worker can hold any job submitted, which is
				// refused otherwise.
				h.worker(fmt.Sprintf("w%d", rng.IntN(3)), int32(3+rng.IntN(3)), 1+rng.IntN(3))
			case 3:
				h.c.WorkerDown(fmt.Sprintf("w%d", rng.IntN(3)))
			case 4:
				for _, j := range h.c.byTask {
					ends := []State{Completed, Failed, OutOfMemory, Timeout}
					h.finish(j.key.ID, j.key.Index, ends[rng.IntN(len(ends))])
					break
				}
			case 5:
				if len(ids) > 0 {
					if keys, err := h.c.Lookup(fmt.Sprint(ids[rng.IntN(len(ids))])); err == nil {
						h.c.Cancel(keys)
					}
				}
			case 6:
				h.advance(time.Duration(rng.IntN(30)) * time.Second)
			case 7:
				if rng.IntN(10) == 0 {
					restartKeepsEverything(t, h)
				}
			}
			h.step()
			if err := checkIndexes(h.c); err != nil {
				t.Fatalf("seed %d, step %d: %v", seed, op, err)
			}
			// Nothing was left to start: a round forced to schedule
			// again starts nothing, so no change missed setting
			// reschedule.
			h.c.reschedule = true
			h.c.Schedule()
			for _, o := range h.commit() {
				if a := o.Msg.GetAssignJob(); a != nil {
					t.Fatalf("seed %d, step %d: a forced round started %s, which the round before missed", seed, op, a.JobId)
				}
			}
		}
	}
}
