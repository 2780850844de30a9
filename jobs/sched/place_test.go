package sched

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// assigns runs a round and returns the attempts sent, by worker.
func (h *harness) assigns() map[string]*workerpb.AssignJob {
	h.t.Helper()
	h.c.Tick()
	h.c.Schedule()
	out := map[string]*workerpb.AssignJob{}
	for _, o := range h.commit() {
		if a := o.Msg.GetAssignJob(); a != nil {
			out[o.Worker] = a
		}
	}
	return out
}

// A gang takes distinct workers all at once; rank 0 is sent first, and the
// others once it has picked the master port, with the environment of
// their rank.
func TestGangPlacement(t *testing.T) {
	h := newHarness(t)
	for _, w := range []string{"a", "b", "c"} {
		h.c.WorkerUp(WorkerInfo{Name: w, Address: "10.0.0." + w, CPUs: 4, Memory: 8 << 30, JobSlots: 4}, holding())
	}
	four := h.submit(&jobspb.JobSpec{Name: "four", Nodes: 4})
	two := h.submit(&jobspb.JobSpec{Name: "two", Nodes: 2, Cpus: 3})
	sent := h.assigns()
	if len(sent) != 1 {
		t.Fatalf("first round sent %v, want rank 0 of the 2-node job alone", sent)
	}
	var rank0 string
	for w, a := range sent {
		rank0 = w
		if !a.PickMasterPort || a.Env["RANK"] != "0" || a.Env["WORLD_SIZE"] != "2" || a.Env["MASTER_ADDR"] != "10.0.0."+w || a.Env["MASTER_PORT"] != "" {
			t.Fatalf("rank 0 on %s: %v, pick port %v", w, a.Env, a.PickMasterPort)
		}
	}
	if r := h.rec(four, -1).PendingReason; r != ReasonNoWorkerFits {
		t.Fatalf("a 4-node job on 3 workers waits for %q", r)
	}
	j := h.c.jobs[Key{two, -1}]
	h.c.Started(rank0, &workerpb.JobStarted{TaskId: j.task, MasterPort: 29411})
	sent = h.assigns()
	if len(sent) != 1 {
		t.Fatalf("after the port, sent %v, want rank 1", sent)
	}
	for w, a := range sent {
		if w == rank0 {
			t.Fatalf("rank 1 on rank 0's worker %s", w)
		}
		want := map[string]string{"RANK": "1", "NODE_RANK": "1", "RBS_NODE_RANK": "1", "WORLD_SIZE": "2", "RBS_NNODES": "2",
			"MASTER_ADDR": "10.0.0." + rank0, "RBS_MASTER_ADDR": "10.0.0." + rank0, "MASTER_PORT": "29411", "RBS_MASTER_PORT": "29411",
			"RBS_NODELIST": rank0 + "," + w, "SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_PROCID": "1"}
		for k, v := range want {
			if a.Env[k] != v {
				t.Errorf("rank 1: %s=%q, want %q", k, a.Env[k], v)
			}
		}
		if a.PickMasterPort || a.CheckpointDir != "" || len(a.Outputs) != 0 {
			t.Errorf("rank 1 was asked for rank 0's part: %+v", a)
		}
	}
	if got := h.rec(two, -1); len(got.Nodes) != 2 || got.Worker != rank0 || got.MasterPort != 29411 {
		t.Fatalf("record %+v", got)
	}
}

// A gang ends when rank 0 ends, with its exit; a failing rank ends the
// whole gang as it ended, once rank 0 has reported.
func TestGangEnd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ends  func(h *harness, j *job) // reports the nodes' ends
		state State
		exit  int32
	}{
		{"rank 0 completes first", func(h *harness, j *job) {
			h.c.Ended(j.rec.Nodes[0].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[0].TaskId, State: "COMPLETED"})
		}, Completed, 0},
		{"rank 1 completes, then rank 0 fails", func(h *harness, j *job) {
			h.c.Ended(j.rec.Nodes[1].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[1].TaskId, State: "COMPLETED"})
			h.c.Ended(j.rec.Nodes[0].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[0].TaskId, State: "FAILED", ExitCode: 2})
		}, Failed, 2},
		{"rank 0 fails, rank 1 is stopped", func(h *harness, j *job) {
			h.c.Ended(j.rec.Nodes[0].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[0].TaskId, State: "FAILED", ExitCode: 1})
		}, Failed, 1},
		{"rank 0 fails, and rank 1, stopped, fails too", func(h *harness, j *job) {
			h.c.Ended(j.rec.Nodes[0].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[0].TaskId, State: "FAILED", ExitCode: 1})
			h.c.Ended(j.rec.Nodes[1].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[1].TaskId, State: "FAILED", ExitCode: 9})
		}, Failed, 1},
		{"rank 1 fails, rank 0 is stopped", func(h *harness, j *job) {
			h.c.Ended(j.rec.Nodes[1].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[1].TaskId, State: "FAILED", ExitCode: 7})
			h.c.Ended(j.rec.Nodes[0].Worker, &workerpb.JobEnded{TaskId: j.rec.Nodes[0].TaskId, State: "CANCELLED", ExitCode: 143})
		}, Failed, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.worker("a", 2, 2)
			h.worker("b", 2, 2)
			id := h.submit(&jobspb.JobSpec{Nodes: 2})
			h.assigns()
			j := h.c.jobs[Key{id, -1}]
			h.c.Started(j.rec.Nodes[0].Worker, &workerpb.JobStarted{TaskId: j.task, MasterPort: 1234})
			h.assigns()
			tc.ends(h, j)
			cancels := map[string]bool{}
			for _, o := range h.commit() {
				if c := o.Msg.GetCancel(); c != nil {
					cancels[c.TaskId] = true
				}
			}
			// The ranks stopped report their end; only then does the
			// attempt end.
			for _, n := range j.rec.Nodes {
				if n.State == "" {
					if State(h.rec(id, -1).State) != Running {
						t.Fatalf("the gang ended before rank %d reported: %s", n.Rank, h.rec(id, -1).State)
					}
					if !cancels[n.TaskId] {
						t.Fatalf("rank %d was not stopped: cancels %v", n.Rank, cancels)
					}
					h.c.Ended(n.Worker, &workerpb.JobEnded{TaskId: n.TaskId, State: "CANCELLED", ExitCode: 143})
				}
			}
			r := h.rec(id, -1)
			if State(r.State) != tc.state || r.ExitCode != tc.exit {
				t.Fatalf("ended %s exit %d (%s), want %s exit %d", r.State, r.ExitCode, r.Message, tc.state, tc.exit)
			}
			if tc.exit == 7 && !strings.Contains(r.Message, "rank 1 on") {
				t.Fatalf("message %q does not say rank 1 ended the gang", r.Message)
			}
			if h.c.workers["a"].free().slots != 2 || h.c.workers["b"].free().slots != 2 {
				t.Fatal("the gang's slots were not freed")
			}
			if a := r.History[0]; len(a.Workers) != 2 {
				t.Fatalf("the attempt lists workers %v", a.Workers)
			}
		})
	}
}

// GPUs are handed out by device: jobs of 1, 2 and 3 GPUs on a worker of 4
// never share one, and a job starts only with all of its GPUs.
func TestGPUAccounter(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 16, 16, 0, 1, 2, 3)
	one := h.submit(&jobspb.JobSpec{Gpus: 1})
	two := h.submit(&jobspb.JobSpec{Gpus: 2})
	three := h.submit(&jobspb.JobSpec{Gpus: 3})
	h.step()
	held := func() map[string]int64 {
		out := map[string]int64{}
		for _, id := range []int64{one, two, three} {
			r := h.rec(id, -1)
			if r.State != string(Running) {
				continue
			}
			if len(r.Nodes[0].GpuUuids) != len(r.GpuIndices) || int32(len(r.GpuIndices)) != h.c.jobs[Key{id, -1}].spec.Gpus {
				t.Fatalf("job %d holds %v / %v", id, r.GpuIndices, r.Nodes[0].GpuUuids)
			}
			for _, u := range r.Nodes[0].GpuUuids {
				if other, dup := out[u]; dup {
					t.Fatalf("GPU %s given to jobs %d and %d", u, other, id)
				}
				out[u] = id
			}
		}
		return out
	}
	if got := held(); len(got) != 3 || h.rec(three, -1).State != string(Pending) {
		t.Fatalf("held %v; the 3-GPU job is %s, want it waiting for GPUs", got, h.rec(three, -1).State)
	}
	if p := strings.Join(h.c.explain(h.c.jobs[Key{three, -1}]), "; "); p != "1 worker: not enough free GPUs (asked 3, free 1)" {
		t.Fatalf("placement %q", p)
	}
	h.finish(two, -1, Completed)
	h.step()
	if got := held(); len(got) != 4 || h.rec(three, -1).State != string(Running) {
		t.Fatalf("after the 2-GPU job: held %v", got)
	}
	h.finish(one, -1, Completed)
	h.finish(three, -1, Completed)
	h.step()
	if w := h.c.workers["w"]; w.dev.free() != 4 {
		t.Fatalf("%d GPUs free after all ended", w.dev.free())
	}
}

// Why a job cannot start is said worker by worker, grouped.
func TestPlacementReasons(t *testing.T) {
	h := newHarness(t)
	up := func(name string, cpus int32, mem int64) {
		h.c.WorkerUp(WorkerInfo{Name: name, CPUs: cpus, Memory: mem, JobSlots: 2, Platform: "linux-x86_64"}, holding())
	}
	up("small1", 8, 4<<30)
	up("small2", 8, 4<<30)
	up("busy", 8, 16<<30)
	h.c.WorkerUp(WorkerInfo{Name: "arm", CPUs: 8, Memory: 64 << 30, JobSlots: 2, Platform: "linux-arm64"}, holding())
	h.c.WorkerUp(WorkerInfo{Name: "builder", CPUs: 8, Memory: 64 << 30, JobSlots: 0}, holding())
	blocker := h.submit(&jobspb.JobSpec{Platform: "linux-x86_64", MemoryBytes: 12 << 30})
	h.step()
	if w := h.rec(blocker, -1).Worker; w != "busy" {
		t.Fatalf("the 12 GiB job went to %s", w)
	}
	big := h.submit(&jobspb.JobSpec{Platform: "linux-x86_64", MemoryBytes: 8 << 30})
	h.step()
	want := []string{
		"2 workers: only 4.0 GiB of memory (asked 8.0 GiB)",
		"1 worker: no job slots",
		"1 worker: not enough free memory (asked 8.0 GiB, free 4.0 GiB)",
		"1 worker: platform linux-arm64, the job needs linux-x86_64",
	}
	info := h.c.Infos([]Key{{big, -1}}, true)[0]
	if fmt.Sprint(info.Placement) != fmt.Sprint(want) {
		t.Fatalf("placement:\n%s\nwant:\n%s", strings.Join(info.Placement, "\n"), strings.Join(want, "\n"))
	}
	if r := h.rec(big, -1).PendingReason; r != ReasonResources {
		t.Fatalf("pending reason %q", r)
	}
}

// Packing counts memory: of two workers with the same free CPUs, a job
// goes where its memory fills the most.
func TestPackingCountsMemory(t *testing.T) {
	h := newHarness(t)
	for _, w := range []struct {
		name string
		mem  int64
	}{{"roomy", 64 << 30}, {"snug", 8 << 30}} {
		h.c.WorkerUp(WorkerInfo{Name: w.name, CPUs: 4, Memory: w.mem, JobSlots: 4}, holding())
	}
	id := h.submit(&jobspb.JobSpec{MemoryBytes: 6 << 30})
	h.step()
	if w := h.rec(id, -1).Worker; w != "snug" {
		t.Fatalf("the 6 GiB job went to %s, want snug", w)
	}
}

// A stream of small jobs does not starve a gang at the head of the queue:
// it holds the workers it will start on, and small jobs start on them only
// if they end before it.
func TestGangIsNotStarved(t *testing.T) {
	h := newHarness(t)
	h.worker("a", 1, 1)
	h.worker("b", 1, 1)
	first := h.submit(&jobspb.JobSpec{TimeLimitMs: time.Minute.Milliseconds()})
	h.step()
	gang := h.submit(&jobspb.JobSpec{Nodes: 2, Priority: 10, TimeLimitMs: time.Hour.Milliseconds()})
	var small []int64
	for range 5 {
		small = append(small, h.submit(&jobspb.JobSpec{TimeLimitMs: time.Hour.Milliseconds()}))
	}
	short := h.submit(&jobspb.JobSpec{TimeLimitMs: (30 * time.Second).Milliseconds()})
	started := h.step()
	sort.Strings(started)
	// The free worker may take only the job that ends before first does.
	if len(started) != 1 || !strings.HasPrefix(started[0], fmt.Sprint(short, "@")) {
		t.Fatalf("started %v, want only the short job %d", started, short)
	}
	for _, id := range small {
		if r := h.rec(id, -1); r.State != string(Pending) || r.PendingReason != ReasonPriority {
			t.Fatalf("small job %d: %s %s", id, r.State, r.PendingReason)
		}
	}
	h.finish(first, -1, Completed)
	h.finish(short, -1, Completed)
	h.assigns()
	if r := h.rec(gang, -1); r.State != string(Running) || len(r.Nodes) != 2 {
		t.Fatalf("the gang is %s on %v once both workers are free", r.State, r.Nodes)
	}
}

// A job in a container goes only to a worker with a container runtime, and
// says so while none has one.
func TestContainerPlacement(t *testing.T) {
	h := newHarness(t)
	h.worker("plain", 4, 4)
	id := h.submit(&jobspb.JobSpec{Container: "localhost/train:1"})
	h.step()
	if r := h.rec(id, -1).PendingReason; r != ReasonNoWorkerFits {
		t.Fatalf("a container job with no runtime anywhere waits for %q", r)
	}
	if p := strings.Join(h.c.explain(h.c.jobs[Key{id, -1}]), "; "); p != "1 worker: no container runtime (podman or docker), the job runs in localhost/train:1" {
		t.Fatalf("placement %q", p)
	}
	h.c.WorkerUp(WorkerInfo{Name: "podman", CPUs: 4, Memory: 8 << 30, JobSlots: 4, ContainerRuntime: "podman"}, holding())
	sent := h.assigns()
	if a := sent["podman"]; a == nil || a.ContainerImage != "localhost/train:1" || len(sent) != 1 {
		t.Fatalf("sent %v, want the job on podman with its image", sent)
	}
}

// An elastic job starts once its min_nodes fit, on as many as fit up to
// its nodes, and its world size says how many it got.
func TestElasticGang(t *testing.T) {
	h := newHarness(t)
	h.worker("a", 1, 1)
	h.worker("b", 1, 1)
	h.worker("c", 1, 1)
	h.submit(&jobspb.JobSpec{}) // keeps one worker busy
	h.step()
	tooFew := h.submit(&jobspb.JobSpec{Elastic: true, MinNodes: 3, Nodes: 4})
	id := h.submit(&jobspb.JobSpec{Elastic: true, MinNodes: 1, Nodes: 4, Priority: 10})
	sent := h.assigns()
	j := h.c.jobs[Key{id, -1}]
	if len(j.rec.Nodes) != 2 || len(sent) != 1 {
		t.Fatalf("the 1-4 node job got %d nodes (sent %v), want the 2 free workers", len(j.rec.Nodes), sent)
	}
	for _, a := range sent {
		if a.Env["WORLD_SIZE"] != "2" {
			t.Fatalf("WORLD_SIZE=%s, want 2", a.Env["WORLD_SIZE"])
		}
	}
	if r := h.rec(tooFew, -1); r.State != string(Pending) {
		t.Fatalf("the 3-4 node job is %s with one worker busy", r.State)
	}
	if p := h.c.explain(h.c.jobs[Key{tooFew, -1}]); p[len(p)-1] != "the job needs 3 to 4 workers at once" {
		t.Fatalf("placement %v", p)
	}
}

// A job's constraints are properties a worker must offer.
func TestConstraints(t *testing.T) {
	h := newHarness(t)
	h.c.WorkerUp(WorkerInfo{Name: "plain", CPUs: 4, Memory: 8 << 30, JobSlots: 4, Properties: []string{"OSFamily=linux"}}, holding())
	id := h.submit(&jobspb.JobSpec{Constraints: []string{"gpu=a100", "OSFamily=linux"}})
	h.step()
	if r := h.rec(id, -1).PendingReason; r != ReasonNoWorkerFits {
		t.Fatalf("a job no worker's properties satisfy waits for %q", r)
	}
	if p := strings.Join(h.c.explain(h.c.jobs[Key{id, -1}]), "; "); p != "1 worker: lacks the property gpu=a100" {
		t.Fatalf("placement %q", p)
	}
	h.c.WorkerUp(WorkerInfo{Name: "a100", CPUs: 4, Memory: 8 << 30, JobSlots: 4, Properties: []string{"OSFamily=linux", "gpu=a100"}}, holding())
	if sent := h.assigns(); sent["a100"] == nil || len(sent) != 1 {
		t.Fatalf("sent %v, want the job on a100", sent)
	}
}

// A server that restarted before it heard rank 0's master port hears it
// again from the worker's next stream, and only then sends the other
// ranks, once.
func TestGangPortAfterRestart(t *testing.T) {
	h := newHarness(t)
	h.worker("a", 1, 1)
	h.worker("b", 1, 1)
	id := h.submit(&jobspb.JobSpec{Nodes: 2})
	h.assigns()
	h.restart()
	j := h.c.jobs[Key{id, -1}]
	rank0 := j.rec.Nodes[0]
	other := "b"
	if rank0.Worker == "b" {
		other = "a"
	}
	h.c.WorkerUp(WorkerInfo{Name: rank0.Worker, CPUs: 1, Memory: 8 << 30, JobSlots: 1}, holding(rank0.TaskId))
	h.c.WorkerUp(WorkerInfo{Name: other, CPUs: 1, Memory: 8 << 30, JobSlots: 1}, holding())
	if sent := h.assigns(); len(sent) != 0 || h.rec(id, -1).State != string(Running) {
		t.Fatalf("before the port: sent %v, state %s", sent, h.rec(id, -1).State)
	}
	for range 2 {
		h.c.Started(rank0.Worker, &workerpb.JobStarted{TaskId: rank0.TaskId, MasterPort: 4242})
	}
	sent := h.assigns()
	if a := sent[other]; len(sent) != 1 || a == nil || a.Env["MASTER_PORT"] != "4242" {
		t.Fatalf("after the port: sent %v", sent)
	}
}

// TestFitsAsTheChain checks that fits, which asks a worker now without
// running the chain, answers as the chain does, over workers and jobs that
// each check turns down and that none does.
func TestFitsAsTheChain(t *testing.T) {
	c, err := New(Config{Now: time.Now}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gpus := []*workerpb.Gpu{{Index: 0, Uuid: "g0"}, {Index: 1, Uuid: "g1"}}
	var workers []*worker
	for _, slots := range []int{0, 1, 2} {
		for _, connected := range []bool{false, true} {
			for _, running := range []int{0, 1} {
				for _, held := range []int{0, 1, 2} {
					w := &worker{name: "w", cpus: 4, memory: 8 << 30, jobSlots: slots, connected: connected, platform: "linux-x86_64",
						properties: map[string]bool{"rack=r1": true}, running: map[Key]*job{}, usedCPUs: 2, usedMem: 4 << 30,
						dev: devices{gpus: gpus, held: map[string]Key{}}}
					for i := range running {
						w.running[Key{int64(i), -1}] = nil
					}
					for i := range held {
						w.dev.held[gpus[i].Uuid] = Key{}
					}
					workers = append(workers, w, &worker{name: "bare", cpus: 4, memory: 8 << 30, jobSlots: slots, connected: connected,
						containerRuntime: "podman", running: w.running, dev: devices{held: map[string]Key{}}})
				}
			}
		}
	}
	specs := []*jobspb.JobSpec{
		{}, {Cpus: 2}, {Cpus: 3}, {MemoryBytes: 4 << 30}, {MemoryBytes: 5 << 30}, {Gpus: 1}, {Gpus: 2},
		{Platform: "linux-x86_64"}, {Platform: "linux-arm64"}, {Container: "img"},
		{Constraints: []string{"rack=r1"}}, {Constraints: []string{"rack=r1", "ssd"}},
	}
	for _, w := range workers {
		for _, s := range specs {
			j := &job{spec: s, rec: &jobspb.JobRecord{}}
			want := c.reject(j, w, current) == ""
			if got := c.fits(j, w, current); got != want {
				t.Errorf("worker %s (slots %d, connected %v, running %d, free GPUs %d), job %v: fits %v, the chain %v",
					w.name, w.jobSlots, w.connected, len(w.running), w.dev.free(), s, got, want)
			}
		}
	}
}

// Jobs that use up the candidates kept for what they ask have more kept
// for them the next time, and still each start on the tightest worker.
func TestKeptCandidatesGrow(t *testing.T) {
	h := newHarness(t)
	const workers, jobs = 100, 80
	for i := range workers {
		h.c.WorkerUp(WorkerInfo{Name: fmt.Sprintf("w%03d", i), CPUs: 1, Memory: 8 << 30, JobSlots: 1}, holding())
	}
	for range jobs {
		h.submit(&jobspb.JobSpec{Name: "one"})
	}
	sent := h.assigns()
	for i := range workers {
		name := fmt.Sprintf("w%03d", i)
		if _, got := sent[name]; got != (i < jobs) {
			t.Errorf("%s was sent a job: %v; want the %d first by name, as all are alike", name, got, jobs)
		}
	}
	if len(h.c.keptFits) != 1 {
		t.Fatalf("kept candidates for %d queries, want 1", len(h.c.keptFits))
	}
	const first = 4*1 + 32
	for _, e := range h.c.keptFits {
		if e.keep != 2*first {
			t.Errorf("after the first %d candidates were used up, %d are kept; want %d", first, e.keep, 2*first)
		}
	}
}

// TestMoveTo checks moveTo against taking the candidate out and putting
// its new score in, for each place it can start from and go to.
func TestMoveTo(t *testing.T) {
	ws := make([]*worker, 6)
	for i := range ws {
		ws[i] = &worker{name: fmt.Sprint("w", i)}
	}
	base := func() []scored {
		return []scored{{ws[0], 1}, {ws[1], 2}, {ws[2], 2}, {ws[3], 4}, {ws[4], 5}, {ws[5], 7}}
	}
	for i := range ws {
		for _, score := range []float64{0, 1, 2, 3, 4.5, 5, 6, 8} {
			s := scored{ws[i], score}
			want := slices.Delete(base(), i, i+1)
			at, _ := slices.BinarySearchFunc(want, s, byTightness)
			want = slices.Insert(want, at, s)
			if got := moveTo(base(), i, s); !slices.Equal(got, want) {
				t.Errorf("moving %s to %v: got %v, want %v", ws[i].name, score, names(got), names(want))
			}
		}
	}
}

func names(ss []scored) []string {
	var out []string
	for _, s := range ss {
		out = append(out, fmt.Sprint(s.w.name, "=", s.s))
	}
	return out
}
