package sched

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/store"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// harness drives a Core with a fake clock and records what it sends. Each
// step's changes are committed to a real store, from which restart builds
// a new Core as a restarted server would.
type harness struct {
	t     *testing.T
	c     *Core
	now   time.Time
	store *store.Store
}

func newHarness(t *testing.T, queues ...Queue) *harness {
	h := &harness{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h.store = st
	c, err := New(Config{Now: func() time.Time { return h.now }, Queues: queues}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	return h
}

// commit writes the Core's pending changes and returns its messages.
func (h *harness) commit() []Outbound {
	h.t.Helper()
	b, out := h.c.Flush()
	if err := h.store.Commit(b); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// restart replaces the Core with one loaded from the store.
func (h *harness) restart() {
	h.t.Helper()
	h.commit()
	st, err := h.store.Load()
	if err != nil {
		h.t.Fatal(err)
	}
	c, err := New(h.c.cfg, st)
	if err != nil {
		h.t.Fatal(err)
	}
	h.c = c
}

func (h *harness) worker(name string, cpus int32, slots int, gpus ...int32) {
	var devs []*workerpb.Gpu
	for _, g := range gpus {
		devs = append(devs, &workerpb.Gpu{Index: g, Uuid: fmt.Sprintf("GPU-%s-%d", name, g)})
	}
	h.c.WorkerUp(WorkerInfo{Name: name, CPUs: cpus, Memory: 8 << 30, GPUs: devs, JobSlots: slots}, holding())
}

func (h *harness) submit(s *jobspb.JobSpec) int64 {
	h.t.Helper()
	if len(s.Command) == 0 {
		s.Command = []string{"true"}
	}
	id, err := h.c.Submit(typed(h.t, s))
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

// typed is a valid spec as the API edge hands it to the core, with its
// array's indices.
func typed(t testing.TB, s *jobspb.JobSpec) *manifest.Job {
	t.Helper()
	j := &manifest.Job{Spec: s}
	if s.Array != nil {
		a, err := spec.ParseArray(s.Array.Text)
		if err != nil {
			t.Fatal(err)
		}
		s.Array = &jobspb.ArraySpec{Text: a.String(), Limit: int32(a.Limit)}
		j.Indices = a.Indices
	}
	return j
}

// step schedules and returns the keys started, sorted.
func (h *harness) step() []string {
	h.c.Tick()
	h.c.Schedule()
	out := h.commit()
	var started []string
	for _, o := range out {
		if a := o.Msg.GetAssignJob(); a != nil {
			started = append(started, a.JobId+"@"+o.Worker)
		}
	}
	sort.Strings(started)
	return started
}

func (h *harness) rec(id int64, index int32) *jobspb.JobRecord { return h.c.jobs[Key{id, index}].rec }

func (h *harness) finish(id int64, index int32, state State) {
	j := h.c.jobs[Key{id, index}]
	h.c.Ended(j.rec.Worker, &workerpb.JobEnded{TaskId: j.task, State: string(state)})
}

func (h *harness) advance(d time.Duration) { h.now = h.now.Add(d) }

func TestPriorityOrderAndAgeBonus(t *testing.T) {
	h := newHarness(t, Queue{Name: "batch", Default: true}, Queue{Name: "urgent", Priority: 100})
	h.worker("w", 1, 1)
	running := h.submit(&jobspb.JobSpec{})
	h.step()
	low := h.submit(&jobspb.JobSpec{Priority: 1})
	high := h.submit(&jobspb.JobSpec{Priority: 50})
	urgent := h.submit(&jobspb.JobSpec{Queue: "urgent"})
	h.step()
	if r := h.rec(low, -1).PendingReason; r != ReasonResources && r != ReasonPriority {
		t.Fatalf("low waits for %q", r)
	}
	h.finish(running, -1, Completed)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(urgent, "@w") {
		t.Fatalf("started %v, want the urgent queue's job first", got)
	}
	h.finish(urgent, -1, Completed)
	if got := h.step(); got[0] != fmt.Sprint(high, "@w") {
		t.Fatalf("started %v, want the high-priority job", got)
	}
	// A newer job of priority 60 would beat the old low one, unless the old
	// one has waited long enough for its age bonus to count.
	h.advance(90 * time.Minute)
	newer := h.submit(&jobspb.JobSpec{Priority: 60})
	if p := h.c.priorityOf(h.c.jobs[Key{low, -1}], h.now); p.Age != 90 || p.Total != 91 || p.Base != 1 {
		t.Fatalf("priority of the old job %+v", p)
	}
	h.finish(high, -1, Completed)
	if got := h.step(); got[0] != fmt.Sprint(low, "@w") {
		t.Fatalf("started %v, want the aged job before %d", got, newer)
	}
}

func TestDependencies(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 8, 8)
	a := h.submit(&jobspb.JobSpec{})
	b := h.submit(&jobspb.JobSpec{})
	ok := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: a, Index: -1}}})
	okOnFail := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: b, Index: -1}}})
	any := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterany", JobId: b, Index: -1}}})
	notok := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afternotok", JobId: b, Index: -1}}})
	notokOnSuccess := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afternotok", JobId: a, Index: -1}}})
	if got := h.step(); len(got) != 2 {
		t.Fatalf("started %v, want only the two independent jobs", got)
	}
	for _, id := range []int64{ok, okOnFail, any, notok, notokOnSuccess} {
		if r := h.rec(id, -1).PendingReason; r != ReasonDependency {
			t.Fatalf("job %d waits for %q, want Dependency", id, r)
		}
	}
	h.finish(a, -1, Completed)
	h.finish(b, -1, Failed)
	started := h.step()
	want := []string{fmt.Sprint(any, "@w"), fmt.Sprint(notok, "@w"), fmt.Sprint(ok, "@w")}
	sort.Strings(want)
	if fmt.Sprint(started) != fmt.Sprint(want) {
		t.Fatalf("started %v, want %v", started, want)
	}
	// A job afterok on one that can never start can never start either,
	// down a chain and through an array; afterany on it may yet start
	// (once it is cancelled).
	chain := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: okOnFail, Index: -1}}})
	tasks := h.submit(&jobspb.JobSpec{Array: &jobspb.ArraySpec{Text: "0-2"}, Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: chain, Index: -1}}})
	onArray := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: tasks, Index: -1}}})
	anyOnNever := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterany", JobId: okOnFail, Index: -1}}})
	h.step()
	for _, k := range []Key{{okOnFail, -1}, {notokOnSuccess, -1}, {chain, -1}, {tasks, 0}, {tasks, 2}, {onArray, -1}} {
		if r := h.rec(k.ID, k.Index); r.State != string(Pending) || r.PendingReason != ReasonDependencyNeverSatisfied || !h.c.Done(k) {
			t.Fatalf("job %s: %s %q, done %v; want PENDING, DependencyNeverSatisfied, done", k, r.State, r.PendingReason, h.c.Done(k))
		}
	}
	if r := h.rec(anyOnNever, -1); r.PendingReason != ReasonDependency || h.c.Done(Key{anyOnNever, -1}) {
		t.Fatalf("afterany on a job that never starts: %q, done %v; want Dependency, not done", r.PendingReason, h.c.Done(Key{anyOnNever, -1}))
	}
	if d := h.c.Infos([]Key{{chain, -1}}, false)[0].Deps; len(d) != 1 || !d[0].NeverSatisfied || d[0].State != string(Pending) {
		t.Fatalf("dependencies of the chain: %v, want its one afterok, PENDING, never satisfied", d)
	}
	if d := h.c.Infos([]Key{{anyOnNever, -1}}, false)[0].Deps; len(d) != 1 || d[0].NeverSatisfied {
		t.Fatalf("dependencies of the afterany job: %v, want its one, satisfiable", d)
	}
	h.c.Cancel([]Key{{okOnFail, -1}})
	if started := h.step(); fmt.Sprint(started) != fmt.Sprint([]string{fmt.Sprint(anyOnNever, "@w")}) {
		t.Fatalf("started %v once the job that never starts was cancelled, want the afterany job alone", started)
	}
	if _, err := h.c.Submit(typed(t, &jobspb.JobSpec{Command: []string{"x"}, Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: 999, Index: -1}}})); err == nil || !strings.Contains(err.Error(), "999") {
		t.Fatalf("dependency on an unknown job: %v", err)
	}
}

func TestArrayThrottle(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 8, 8)
	id := h.submit(&jobspb.JobSpec{Array: &jobspb.ArraySpec{Text: "0-4%2"}})
	if got := h.step(); len(got) != 2 {
		t.Fatalf("started %v, want 2 under %%2", got)
	}
	if r := h.rec(id, 2).PendingReason; r != ReasonArrayTaskLimit {
		t.Fatalf("task 2 waits for %q", r)
	}
	h.finish(id, 0, Completed)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(id, "_2@w") {
		t.Fatalf("started %v after one task ended", got)
	}
	if env := h.c.jobs[Key{id, 2}]; env.rec.Attempts != 1 {
		t.Fatal("attempt not counted")
	}
}

func TestBackfill(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 4, 4)
	long := h.submit(&jobspb.JobSpec{Cpus: 2, TimeLimitMs: (10 * time.Minute).Milliseconds()})
	h.step()
	big := h.submit(&jobspb.JobSpec{Cpus: 4, Priority: 10, TimeLimitMs: time.Hour.Milliseconds()})
	short := h.submit(&jobspb.JobSpec{Cpus: 1, TimeLimitMs: (5 * time.Minute).Milliseconds()})
	tooLong := h.submit(&jobspb.JobSpec{Cpus: 1, TimeLimitMs: (20 * time.Minute).Milliseconds()})
	unlimited := h.submit(&jobspb.JobSpec{Cpus: 1})
	got := h.step()
	if len(got) != 1 || got[0] != fmt.Sprint(short, "@w") {
		t.Fatalf("backfilled %v, want only the job that ends before the big one's reserved start", got)
	}
	if r := h.rec(big, -1).PendingReason; r != ReasonResources {
		t.Fatalf("big job waits for %q", r)
	}
	for _, id := range []int64{tooLong, unlimited} {
		if r := h.rec(id, -1).PendingReason; r != ReasonPriority {
			t.Fatalf("job %d waits for %q, want Priority", id, r)
		}
	}
	h.finish(long, -1, Completed)
	h.finish(short, -1, Completed)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(big, "@w") {
		t.Fatalf("started %v, want the big job", got)
	}
}

func TestPlacement(t *testing.T) {
	h := newHarness(t)
	h.worker("a", 4, 4, 0, 1)
	h.worker("b", 4, 4)
	first := h.submit(&jobspb.JobSpec{Cpus: 3})
	h.step()
	// Bin-packing: a one-CPU job goes where it fills the gap.
	w := h.rec(first, -1).Worker
	second := h.submit(&jobspb.JobSpec{Cpus: 1})
	h.step()
	if h.rec(second, -1).Worker != w {
		t.Fatalf("second job on %s, want packed onto %s", h.rec(second, -1).Worker, w)
	}
	g1 := h.submit(&jobspb.JobSpec{Gpus: 1, Cpus: 0})
	g2 := h.submit(&jobspb.JobSpec{Gpus: 1})
	h.step()
	r1, r2 := h.rec(g1, -1), h.rec(g2, -1)
	if r1.Worker != "a" || r2.Worker != "a" || len(r1.GpuIndices) != 1 || len(r2.GpuIndices) != 1 || r1.GpuIndices[0] == r2.GpuIndices[0] {
		t.Fatalf("GPU jobs: %v %v / %v %v", r1.Worker, r1.GpuIndices, r2.Worker, r2.GpuIndices)
	}
	// A job no registered worker could ever hold is refused, saying what
	// the workers have, unless it is held on purpose.
	_, err := h.c.Submit(typed(t, &jobspb.JobSpec{Command: []string{"true"}, Cpus: 64}))
	if want := "no worker can ever run this job: only 4 CPUs on each (asked 64)"; status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("submitting a 64-CPU job: %v; want %q", err, want)
	}
	huge := h.submit(&jobspb.JobSpec{Cpus: 64, Hold: true})
	h.step()
	if r := h.rec(huge, -1).PendingReason; r != ReasonJobHeldUser {
		t.Fatalf("held 64-CPU job waits for %q", r)
	}
	if _, err := h.c.Release([]Key{{first, -1}}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "is not held: it is RUNNING") {
		t.Fatalf("releasing a running job: %v", err)
	}
	if released, err := h.c.Release([]Key{{huge, -1}}); err != nil || len(released) != 1 {
		t.Fatalf("releasing the held job: %v, %v", released, err)
	}
	h.step()
	if r := h.rec(huge, -1).PendingReason; r != ReasonNoWorkerFits {
		t.Fatalf("released 64-CPU job waits for %q", r)
	}
	if why := h.c.Infos([]Key{{huge, -1}}, true)[0].StartUnknown; why != "no worker can ever run it: only 4 CPUs on each (asked 64)" {
		t.Fatalf("the released job's start is unknown for %q", why)
	}
	onlyActions := newHarness(t)
	onlyActions.worker("x", 4, 0)
	id := onlyActions.submit(&jobspb.JobSpec{})
	onlyActions.step()
	if r := onlyActions.rec(id, -1).PendingReason; r != ReasonNoWorkers {
		t.Fatalf("without job slots the job waits for %q", r)
	}
}

func TestWorkerLoss(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 2, 2)
	requeued := h.submit(&jobspb.JobSpec{})
	failed := h.submit(&jobspb.JobSpec{NoRequeue: true})
	h.step()
	h.c.WorkerDown("w1")
	h.advance(time.Hour)
	h.step()
	if h.rec(requeued, -1).State != string(Running) {
		t.Fatal("requeued while its worker was gone but not yet lost")
	}
	h.c.WorkerLost("w1", "worker w1 gone for 15s")
	h.worker("w2", 2, 2)
	started := h.step()
	if r := h.rec(failed, -1); r.State != string(NodeFail) {
		t.Fatalf("--no-requeue job: %s", r.State)
	}
	if r := h.rec(requeued, -1); r.State != string(Running) || r.Worker != "w2" || r.Attempts != 2 || len(started) != 1 {
		t.Fatalf("requeued job: %s on %s, attempt %d; started %v", r.State, r.Worker, r.Attempts, started)
	}
}

func TestReconnectKeepsRunningJobs(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 2, 2)
	kept := h.submit(&jobspb.JobSpec{})
	lost := h.submit(&jobspb.JobSpec{})
	h.step()
	h.c.WorkerDown("w")
	h.advance(5 * time.Second)
	h.c.WorkerUp(WorkerInfo{Name: "w", CPUs: 2, Memory: 1 << 30, JobSlots: 2}, holding(h.c.jobs[Key{kept, -1}].task))
	h.step()
	if r := h.rec(kept, -1); r.State != string(Running) || r.Attempts != 1 {
		t.Fatalf("reported job: %s attempt %d", r.State, r.Attempts)
	}
	if r := h.rec(lost, -1); r.Attempts != 2 {
		t.Fatalf("unreported job: %s attempt %d, want requeued and started again", r.State, r.Attempts)
	}
}

func TestRestartFromRecords(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 2, 2)
	run := h.submit(&jobspb.JobSpec{})
	wait := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: run, Index: -1}}})
	h.step()
	h.restart()
	c2 := h.c
	task := c2.jobs[Key{run, -1}].task
	c2.WorkerUp(WorkerInfo{Name: "w", CPUs: 2, JobSlots: 2, Memory: 1 << 30}, holding(task))
	h.step()
	if r := h.rec(run, -1); r.State != string(Running) || r.Attempts != 1 {
		t.Fatalf("after restart: %s attempt %d", r.State, r.Attempts)
	}
	h.finish(run, -1, Completed)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(wait, "@w") {
		t.Fatalf("dependent after restart: %v", got)
	}
	if next, _ := c2.Submit(typed(t, &jobspb.JobSpec{Command: []string{"x"}})); next != wait+1 {
		t.Fatalf("next id after restart %d, want %d", next, wait+1)
	}
}

func TestCancel(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 1, 1)
	running := h.submit(&jobspb.JobSpec{})
	pending := h.submit(&jobspb.JobSpec{})
	h.step()
	if ended := h.c.Cancel([]Key{{pending, -1}, {running, -1}}); len(ended) != 0 {
		t.Fatalf("cancelling a pending and a running job: %v had already ended", ended)
	}
	_, out := h.c.Flush()
	if len(out) != 1 || out[0].Msg.GetCancel() == nil {
		t.Fatalf("messages %v, want one Cancel", out)
	}
	if h.rec(pending, -1).State != string(Cancelled) || h.rec(running, -1).State != string(Running) {
		t.Fatal("pending job not cancelled at once, or running one ended before its worker said so")
	}
	h.finish(running, -1, Failed)
	if s := h.rec(running, -1).State; s != string(Cancelled) {
		t.Fatalf("cancelled job ended as %s", s)
	}
	if ended := h.c.Cancel([]Key{{pending, -1}, {running, -1}}); fmt.Sprint(ended) != fmt.Sprint([]Key{{pending, -1}, {running, -1}}) {
		t.Fatalf("cancelling ended jobs again: %v had already ended, want both", ended)
	}
}

func TestTimeLimitSafetyNet(t *testing.T) {
	h := newHarness(t, Queue{Name: "short", MaxTime: time.Minute, Default: true})
	h.worker("w", 1, 1)
	if _, err := h.c.Submit(typed(t, &jobspb.JobSpec{Command: []string{"x"}, TimeLimitMs: (2 * time.Minute).Milliseconds()})); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("over the queue's maximum: %v", err)
	}
	id := h.submit(&jobspb.JobSpec{})
	h.step()
	if h.rec(id, -1).TimeLimitMs != time.Minute.Milliseconds() {
		t.Fatal("queue limit not applied")
	}
	h.advance(2*time.Minute + time.Second)
	h.step()
	if s := h.rec(id, -1).State; s != string(Timeout) {
		t.Fatalf("state %s, want TIMEOUT", s)
	}
}

// The core checks what depends on its state; the rest of a submission is
// checked at the API edge (jobs/manifest).
func TestSubmitChecksState(t *testing.T) {
	h := newHarness(t, Queue{Name: "batch", Default: true, MaxTime: time.Hour})
	for _, tc := range []struct {
		spec *jobspb.JobSpec
		want string
	}{
		{&jobspb.JobSpec{Command: []string{"x"}, Queue: "nope"}, `unknown queue "nope" (queues: batch)`},
		{&jobspb.JobSpec{Command: []string{"x"}, TimeLimitMs: (2 * time.Hour).Milliseconds()}, "time limit 02:00:00 exceeds queue batch's maximum of 01:00:00"},
		{&jobspb.JobSpec{Command: []string{"x"}, Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: 7, Index: -1}}}, "dependency afterok:7: no such job"},
	} {
		_, err := h.c.Submit(typed(t, tc.spec))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Submit(%v) = %v, want INVALID_ARGUMENT %q", tc.spec, err, tc.want)
		}
	}
	if h.c.nextID != 1 || len(h.c.jobs) != 0 {
		t.Fatalf("refused jobs left %d jobs and next id %d", len(h.c.jobs), h.c.nextID)
	}
}

func TestOutputIsContiguous(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 1, 1)
	id := h.submit(&jobspb.JobSpec{})
	h.step()
	j := h.c.jobs[Key{id, -1}]
	logs := func() string {
		b, _ := h.c.Flush()
		var out string
		for _, l := range b.Logs {
			out += string(l.Data)
		}
		return out
	}
	h.c.Log("w", j.task, 0, 0, []byte("abc"))
	h.c.Log("w", j.task, 6, 0, []byte("ghi")) // after a gap: waits for the resend
	h.c.Log("w", j.task, 1, 0, []byte("bcdef"))
	if got := logs(); got != "abcdef" {
		t.Fatalf("stored output %q, want abcdef", got)
	}
	if got := h.c.OutputStored("w"); got[j.task] != 6 {
		t.Fatalf("OutputStored = %v, want 6 for %s", got, j.task)
	}
	h.c.Log("other", j.task, 6, 0, []byte("x")) // not its worker
	if got := logs(); got != "" {
		t.Fatalf("output from another worker was stored: %q", got)
	}
}

// TestOutputCap feeds output to a job under a 10-byte MaxJobOutput, as a
// worker that keeps the head and the tail sends it, and as one that does
// not, across restarts of the server, and checks what is stored.
func TestOutputCap(t *testing.T) {
	type chunk struct {
		offset, skipped int64
		data            string
		restart         bool // restart the server before this chunk
	}
	marker := func(n int) string {
		return fmt.Sprintf("\n[rbs: %d bytes of output dropped here: over --max-job-output]\n", n)
	}
	for _, tc := range []struct {
		name             string
		chunks           []chunk
		want             string
		written, dropped int64
		lost             bool // the worker is lost instead of reporting the end
	}{
		{"under the cap", []chunk{{0, 0, "01234", false}, {5, 0, "56789", false}}, "0123456789", 10, 0, false},
		{"head and tail", []chunk{{0, 0, "01234", false}, {15, 10, "fghij", false}}, "01234" + marker(10) + "fghij", 20, 10, false},
		{"head and tail, across a restart", []chunk{{0, 0, "01234", false}, {15, 10, "fghij", true}, {15, 10, "fghij", true}}, "01234" + marker(10) + "fghij", 20, 10, false},
		{"a lost tail chunk is sent again", []chunk{{0, 0, "01234", false}, {18, 0, "ij", false}, {15, 10, "fgh", false}, {18, 0, "ij", false}},
			"01234" + marker(10) + "fghij", 20, 10, false},
		{"a skip that does not reach the stored output waits", []chunk{{0, 0, "012", false}, {15, 10, "fghij", false}}, "012", 3, 0, false},
		{"a worker that sends everything", []chunk{{0, 0, "0123456789abcdef", false}, {16, 0, "gh", false}}, "0123456789" + marker(8), 18, 8, false},
		{"a worker that sends everything, across a restart", []chunk{{0, 0, "0123456789abcdef", false}, {16, 0, "gh", true}}, "0123456789" + marker(8), 18, 8, false},
		{"a worker with a larger cap", []chunk{{0, 0, "0123456", false}, {17, 10, "hijklmn", false}}, "0123456" + marker(10) + "hij" + marker(4), 24, 14, false},
		{"a worker that sends everything, then is lost", []chunk{{0, 0, "0123456789abcdef", false}}, "0123456789" + marker(6) + "\n[rbs] attempt 1 lost: worker w lost; requeued\n", 16, 6, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.c.cfg.MaxJobOutput = 10
			h.worker("w", 1, 1)
			id := h.submit(&jobspb.JobSpec{})
			h.step()
			task := h.c.jobs[Key{id, -1}].task
			for _, c := range tc.chunks {
				if c.restart {
					h.restart()
					h.c.WorkerUp(WorkerInfo{Name: "w", CPUs: 1, Memory: 8 << 30, JobSlots: 1}, holding(task))
				}
				h.c.Log("w", task, c.offset, c.skipped, []byte(c.data))
			}
			if tc.lost {
				h.c.WorkerDown("w")
				h.c.WorkerLost("w", "worker w lost")
				h.step()
			} else {
				h.finish(id, -1, Completed)
			}
			h.commit()
			if r := h.rec(id, -1); r.OutputBytes != tc.written || r.OutputDroppedBytes != tc.dropped || r.OutputUnmarkedBytes != 0 {
				t.Errorf("written %d, dropped %d, unmarked %d; want %d, %d, 0", r.OutputBytes, r.OutputDroppedBytes, r.OutputUnmarkedBytes, tc.written, tc.dropped)
			}
			if got, _, err := text(h.store.Logs(id, -1, 0, 1<<20)); err != nil || string(got) != tc.want {
				t.Errorf("stored %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// assigned returns the AssignJob messages among out.
func assigned(out []Outbound) []*workerpb.AssignJob {
	var as []*workerpb.AssignJob
	for _, o := range out {
		if a := o.Msg.GetAssignJob(); a != nil {
			as = append(as, a)
		}
	}
	return as
}

// history gives a job's history as "ATTEMPT:STATE" items.
func history(r *jobspb.JobRecord) string {
	var hs []string
	for _, a := range r.History {
		hs = append(hs, fmt.Sprintf("%d:%s", a.Attempt, a.State))
	}
	return strings.Join(hs, " ")
}

func TestRetries(t *testing.T) {
	tests := []struct {
		name       string
		maxRetries int32
		// ends are the attempts' ends as their workers report them; ""
		// for a worker that says nothing, so that the job runs far past its
		// time limit and the server ends it as TIMEOUT.
		ends    []State
		cancel  bool // cancel the first attempt before it ends
		want    State
		history string
	}{
		{"no retries", 0, []State{Failed}, false, Failed, "1:FAILED"},
		{"retried until it completes", 2, []State{Failed, Timeout, Completed}, false, Completed, "1:FAILED 2:TIMEOUT 3:COMPLETED"},
		{"retries used up", 2, []State{OutOfMemory, Failed, Timeout}, false, Timeout, "1:OUT_OF_MEMORY 2:FAILED 3:TIMEOUT"},
		{"completed first time", 3, []State{Completed}, false, Completed, "1:COMPLETED"},
		{"cancelled never retried", 3, []State{Failed}, true, Cancelled, "1:CANCELLED"},
		{"cancelled by its worker never retried", 3, []State{Cancelled}, false, Cancelled, "1:CANCELLED"},
		{"past its limit, retried", 1, []State{"", Completed}, false, Completed, "1:TIMEOUT 2:COMPLETED"},
		{"past its limit after a cancel, not retried", 1, []State{""}, true, Timeout, "1:TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.worker("w", 2, 2)
			id := h.submit(&jobspb.JobSpec{MaxRetries: tt.maxRetries, TimeLimitMs: time.Hour.Milliseconds()})
			after := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterany", JobId: id, Index: -1}}})
			h.step()
			if tt.cancel {
				h.c.Cancel([]Key{{id, -1}})
			}
			for i, s := range tt.ends {
				if r := h.rec(id, -1); r.State != string(Running) || r.Attempts != int32(i+1) {
					t.Fatalf("before end %d: %s, attempt %d", i+1, r.State, r.Attempts)
				}
				if s == "" {
					h.advance(2 * time.Hour)
				} else {
					h.finish(id, -1, s)
				}
				if started := h.step(); i < len(tt.ends)-1 && fmt.Sprint(started) != fmt.Sprintf("[%d@w]", id) {
					t.Fatalf("after attempt %d ended %s: started %v, want the job again and not its dependent", i+1, s, started)
				}
				if i < len(tt.ends)-1 && h.rec(after, -1).PendingReason != ReasonDependency {
					t.Fatalf("dependent waits for %q while the job retries", h.rec(after, -1).PendingReason)
				}
			}
			h.restart()
			r := h.rec(id, -1)
			if r.State != string(tt.want) || r.Attempts != int32(len(tt.ends)) || history(r) != tt.history {
				t.Fatalf("ended %s after %d attempts, history %q; want %s after %d, %q", r.State, r.Attempts, history(r), tt.want, len(tt.ends), tt.history)
			}
			if s := h.rec(after, -1).State; s != string(Running) {
				t.Fatalf("dependent %s once the job ended for good, want RUNNING", s)
			}
			logs, _, err := text(h.store.Logs(id, -1, 0, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			if retries := strings.Count(string(logs), "; retrying ("); retries != len(tt.ends)-1 {
				t.Fatalf("output says %d retries, want %d:\n%s", retries, len(tt.ends)-1, logs)
			}
		})
	}
}

func TestRetryAfterOKSeesOnlyTheFinalEnd(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 2, 2)
	id := h.submit(&jobspb.JobSpec{MaxRetries: 1})
	ok := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: id, Index: -1}}})
	notok := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afternotok", JobId: id, Index: -1}}})
	h.step()
	h.finish(id, -1, Failed)
	h.step()
	for _, d := range []int64{ok, notok} {
		if r := h.rec(d, -1); r.State != string(Pending) || r.PendingReason != ReasonDependency {
			t.Fatalf("dependent %d after a failed attempt that is retried: %s %q", d, r.State, r.PendingReason)
		}
	}
	h.finish(id, -1, Completed)
	h.step()
	if r := h.rec(ok, -1); r.State != string(Running) {
		t.Fatalf("afterok dependent %s, want RUNNING", r.State)
	}
	if r := h.rec(notok, -1); r.PendingReason != ReasonDependencyNeverSatisfied {
		t.Fatalf("afternotok dependent waits for %q", r.PendingReason)
	}
}

func TestCheckpointRootGoesToTheNextAttempt(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 1, 1)
	id := h.submit(&jobspb.JobSpec{MaxRetries: 3, CheckpointDir: "ckpt"})
	h.c.Schedule()
	first := assigned(h.commit())
	if len(first) != 1 || first[0].CheckpointDir != "ckpt" || first[0].CheckpointRoot != "" {
		t.Fatalf("first assignment %v", first)
	}
	// Each end's checkpoint goes to the next attempt; an end without one
	// (or a lost worker) keeps the one before.
	ends := []string{"aaaa/1", "", "bbbb/2"}
	want := []string{"aaaa/1", "aaaa/1", "bbbb/2"}
	for i, root := range ends {
		task := h.c.jobs[Key{id, -1}].task
		h.c.Ended("w", &workerpb.JobEnded{TaskId: task, State: string(Failed), ExitCode: int32(i + 1), Message: fmt.Sprint("note ", i+1), CheckpointRoot: root})
		h.restart()
		h.worker("w", 1, 1)
		h.c.Schedule()
		as := assigned(h.commit())
		if len(as) != 1 || as[0].CheckpointRoot != want[i] || h.rec(id, -1).CheckpointRoot != want[i] {
			t.Fatalf("after end %d (checkpoint %q): assigned %v, record %q; want %q", i+1, root, as, h.rec(id, -1).CheckpointRoot, want[i])
		}
	}
	h.c.WorkerDown("w")
	h.c.WorkerLost("w", "worker w lost")
	h.worker("w", 1, 1)
	h.c.Schedule()
	if as := assigned(h.commit()); len(as) != 1 || as[0].CheckpointRoot != "bbbb/2" {
		t.Fatalf("after the worker was lost: %v", as)
	}
	r := h.rec(id, -1)
	if history(r) != "1:FAILED 2:FAILED 3:FAILED 4:NODE_FAIL" || r.Attempts != 5 {
		t.Fatalf("history %q, attempt %d", history(r), r.Attempts)
	}
	// Each attempt keeps its worker's exit code and message; the lost one
	// has none but why it was lost.
	for i, want := range []string{"1 note 1", "2 note 2", "3 note 3", "0 worker w lost"} {
		if a := r.History[i]; fmt.Sprint(a.ExitCode, " ", a.Message) != want || a.Worker != "w" {
			t.Errorf("attempt %d: exit %d, message %q, worker %q; want %q on w", i+1, a.ExitCode, a.Message, a.Worker, want)
		}
	}
}

func TestSubmitPipeline(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 2, 2)
	prep := &jobspb.JobSpec{Name: "prep", Command: []string{"true"}}
	train := &jobspb.JobSpec{Name: "train", Command: []string{"true"}, Deps: []*jobspb.Dependency{{Kind: "afterok", Index: -1, PipelineEntry: 1}}}
	report := &jobspb.JobSpec{Name: "report", Command: []string{"true"}, Deps: []*jobspb.Dependency{{Kind: "afterany", Index: -1, PipelineEntry: 2}}}
	ids, err := h.c.SubmitPipeline([]*manifest.Job{typed(t, prep), typed(t, train), typed(t, report)})
	if err != nil || len(ids) != 3 || ids[1] != ids[0]+1 || ids[2] != ids[1]+1 {
		t.Fatalf("SubmitPipeline = %v, %v", ids, err)
	}
	if d := train.Deps[0]; d.JobId != ids[0] || d.PipelineEntry != 0 {
		t.Fatalf("train's dependency %+v, want job %d", d, ids[0])
	}
	if d := report.Deps[0]; d.JobId != ids[1] || d.Kind != "afterany" {
		t.Fatalf("report's dependency %+v, want afterany:%d", d, ids[1])
	}
	if got := h.step(); len(got) != 1 {
		t.Fatalf("started %v, want only the first entry", got)
	}

	// All or none: a bad entry leaves nothing behind.
	next := h.c.nextID
	bad := []*manifest.Job{typed(t, &jobspb.JobSpec{Command: []string{"true"}}), typed(t, &jobspb.JobSpec{Name: "b", Command: []string{"true"}, Queue: "nope"})}
	if _, err := h.c.SubmitPipeline(bad); err == nil || !strings.Contains(err.Error(), `entry 2 (b): unknown queue "nope"`) {
		t.Fatalf("a pipeline with an unknown queue: %v", err)
	}
	if h.c.nextID != next || len(h.c.jobs) != 3 {
		t.Fatalf("refused pipelines left %d jobs and next id %d", len(h.c.jobs), h.c.nextID)
	}
}

func TestPlatform(t *testing.T) {
	h := newHarness(t)
	up := func(name, platform string, cpus int32) {
		h.c.WorkerUp(WorkerInfo{Name: name, CPUs: cpus, Memory: 8 << 30, JobSlots: 4, Platform: platform}, holding())
	}
	up("x86", "linux-x86_64", 4)
	arm := h.submit(&jobspb.JobSpec{Platform: "linux-arm64"})
	anywhere := h.submit(&jobspb.JobSpec{})
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(anywhere, "@x86") {
		t.Fatalf("started %v, want only the job without a platform, on x86", got)
	}
	if r := h.rec(arm, -1).PendingReason; r != ReasonNoWorkerOfPlatform {
		t.Fatalf("a linux-arm64 job with only an x86_64 worker waits for %q", r)
	}
	// A worker of the platform too small for the job: the reason is the fit.
	big := h.submit(&jobspb.JobSpec{Platform: "linux-arm64", Cpus: 8})
	up("arm", "linux-arm64", 2)
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(arm, "@arm") {
		t.Fatalf("started %v, want the linux-arm64 job on arm", got)
	}
	if r := h.rec(big, -1).PendingReason; r != ReasonNoWorkerFits {
		t.Fatalf("an 8-CPU linux-arm64 job with a 2-CPU arm worker waits for %q", r)
	}
}

// text is the output Logs read, joined.
func text(cs []store.LogChunk, last int64, err error) (string, int64, error) {
	var b []byte
	for _, c := range cs {
		b = append(b, c.Data...)
	}
	return string(b), last, err
}

// After a restart, the jobs of a worker that never registers again are
// requeued once LostAfter has passed; a worker that registered is lost
// only when WorkerLost says so.
func TestLostAfterARestart(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 1, 1)
	id := h.submit(&jobspb.JobSpec{})
	h.step()
	h.restart()
	h.advance(10 * time.Second)
	h.c.Tick()
	if r := h.rec(id, -1); r.State != string(Running) {
		t.Fatalf("requeued before LostAfter: %s", r.State)
	}
	h.advance(6 * time.Second)
	h.c.Tick()
	if r := h.rec(id, -1); r.State != string(Pending) || !strings.Contains(r.Message, "did not come back after the server restarted") {
		t.Fatalf("after LostAfter: %s %q", r.State, r.Message)
	}
}

// A submission retried with its idempotency key gets the ids it was given
// the first time, and no second job, across a restart too; another key, or
// none, submits anew.
func TestSubmitOnce(t *testing.T) {
	h := newHarness(t)
	submit := func(key string, names ...string) []int64 {
		t.Helper()
		var jobs []*manifest.Job
		for _, n := range names {
			jobs = append(jobs, typed(t, &jobspb.JobSpec{Name: n, Command: []string{"true"}}))
		}
		ids, err := h.c.SubmitOnce(key, jobs)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	first := submit("k1", "a", "b")
	if again := submit("k1", "a", "b"); !slices.Equal(again, first) {
		t.Fatalf("retried submission got %v, want %v", again, first)
	}
	h.restart()
	if again := submit("k1", "a", "b"); !slices.Equal(again, first) {
		t.Fatalf("after a restart the retried submission got %v, want %v", again, first)
	}
	if _, err := h.c.SubmitOnce("k1", []*manifest.Job{typed(t, &jobspb.JobSpec{Name: "c", Command: []string{"true"}})}); err == nil {
		t.Fatal("a key taken by two jobs was accepted for one")
	}
	other, none := submit("k2", "c"), submit("", "d")
	if other[0] == first[1] || none[0] == other[0] {
		t.Fatalf("new submissions got ids %v and %v after %v", other, none, first)
	}
	if n := len(h.c.jobs); n != 4 {
		t.Fatalf("%d jobs, want 4", n)
	}
}

// holding is a registration's report of a worker running tasks: every
// attempt assigned to it that it does not hold is lost.
func holding(tasks ...string) Report {
	r := Report{Running: map[string]int32{}, Finished: map[string]bool{}}
	for _, t := range tasks {
		r.Running[t] = 0
	}
	r.Lost = func(task string) bool {
		_, running := r.Running[task]
		return !running && !r.Finished[task]
	}
	return r
}

// What a worker reports in a heartbeat is reconciled: a job it does not
// report is lost only when it had had its assignment; a job it runs that
// is not its own is stopped; the end of a job is acknowledged once the
// round that recorded it is committed.
func TestReconcileWithHeartbeats(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 2, 2)
	id := h.submit(&jobspb.JobSpec{})
	h.step()
	task := h.c.jobs[Key{id, -1}].task
	h.commit()

	notYet := holding()
	notYet.Lost = func(string) bool { return false } // made before the assignment arrived
	notYet.Running["9#1"] = 0
	h.c.Reconcile("w", notYet)
	out := h.commit()
	if r := h.rec(id, -1); r.State != string(Running) || r.Attempts != 1 {
		t.Fatalf("a report made before the assignment: %s attempt %d", r.State, r.Attempts)
	}
	if len(out) != 1 || out[0].Msg.GetCancel().GetTaskId() != "9#1" {
		t.Fatalf("sent %v, want the stray attempt cancelled", out)
	}

	h.c.Reconcile("w", holding(task))
	if out := h.commit(); len(out) != 0 {
		t.Fatalf("a report of what runs sent %v", out)
	}
	h.c.Reconcile("w", holding())
	h.step()
	r := h.rec(id, -1)
	if r.Attempts != 2 || !strings.Contains(r.History[0].Message, "worker w no longer runs it") {
		t.Fatalf("a lost attempt: %s attempt %d, history %v", r.State, r.Attempts, r.History)
	}
	h.commit()
	h.finish(id, -1, Completed)
	out = h.commit()
	if len(out) != 1 || !slices.Equal(out[0].Msg.GetAck().GetTaskIds(), []string{h.c.jobs[Key{id, -1}].task}) {
		t.Fatalf("after the end, sent %v, want its Ack", out)
	}
}

func TestKeyAndTaskIDForms(t *testing.T) {
	tests := []struct {
		key      Key
		attempts int32
		str      string
		task     string
	}{
		{Key{1, -1}, 0, "1", "1#0"},
		{Key{12, 3}, 2, "12_3", "12_3#2"},
		{Key{9007199254740993, 0}, 1, "9007199254740993_0", "9007199254740993_0#1"},
	}
	for _, tt := range tests {
		if got := tt.key.String(); got != tt.str {
			t.Errorf("%#v.String() = %q, want %q", tt.key, got, tt.str)
		}
		j := &job{key: tt.key, rec: &jobspb.JobRecord{Attempts: tt.attempts}}
		if got := taskID(j); got != tt.task {
			t.Errorf("taskID of %v attempt %d = %q, want %q", tt.key, tt.attempts, got, tt.task)
		}
	}
}
