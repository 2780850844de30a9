package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/session"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// harness drives a Scheduler with a fake clock and sequential ids.
type harness struct {
	t      *testing.T
	s      *Scheduler
	now    time.Time
	nextID int
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.s = New(Config{
		Now:              func() time.Time { return h.now },
		NewID:            func() string { h.nextID++; return fmt.Sprint("id", h.nextID) },
		HeartbeatTimeout: 10 * time.Second,
		TimeoutGrace:     5 * time.Second,
		MaxAttempts:      2,
	})
	return h
}

func (h *harness) advance(d time.Duration) {
	h.now = h.now.Add(d)
	h.s.Tick()
}

func (h *harness) worker(name string, slots int, props ...Property) *Worker {
	h.t.Helper()
	w, err := h.register(name, name, slots, nil, props...)
	if err != nil {
		h.t.Fatal(err)
	}
	return w
}

// register registers a worker process holding tasks, through the session
// of a stream as the server makes it.
func (h *harness) register(name, process string, slots int, holds []*workerpb.RunningTask, props ...Property) (*Worker, error) {
	reg := &workerpb.Register{Name: name, Session: process, ActionSlots: int32(slots), Running: holds}
	for _, p := range props {
		reg.Properties = append(reg.Properties, &workerpb.Property{Name: p.Name, Value: p.Value})
	}
	r, err := session.Decode(reg, nil)
	if err != nil {
		return nil, err
	}
	return h.s.RegisterWorker(session.New(r, h.now))
}

// heartbeat is a heartbeat of w holding tasks, having applied the
// messages sent to it up to applied.
func (h *harness) heartbeat(w *Worker, applied uint64, tasks ...*workerpb.RunningTask) {
	w.Session().Heard(h.now)
	h.s.Reconcile(w, session.DecodeReport(&workerpb.Heartbeat{Running: tasks, Applied: applied}))
}

func actionTask(id string, d digest.Digest) *workerpb.RunningTask {
	return &workerpb.RunningTask{TaskId: id, SlotClass: workerpb.SlotClass_SLOT_CLASS_ACTION, ActionDigest: &workerpb.Digest{Hash: d.Hash(), SizeBytes: d.Size()}}
}

func action(name string, props ...Property) Action {
	return Action{Digest: digest.FromBytes([]byte(name)), Platform: props}
}

func (h *harness) submit(a Action) *Operation {
	h.t.Helper()
	op, err := h.s.Submit(a)
	if err != nil {
		h.t.Fatal(err)
	}
	return op
}

// assigned returns the task ids pushed to w so far (draining its outbox),
// and the ids of cancellations.
func assigned(w *Worker) (tasks, cancels []string) {
	for {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		m, err := w.Session().Next(ctx)
		if err != nil {
			return
		}
		switch k := m.Kind.(type) {
		case *workerpb.ServerMessage_AssignAction:
			tasks = append(tasks, k.AssignAction.TaskId)
		case *workerpb.ServerMessage_Cancel:
			cancels = append(cancels, k.Cancel.TaskId)
		}
	}
}

func (h *harness) stage(op *Operation) Stage {
	snap, err := h.s.Watch(op.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	return snap.Stage
}

func ok(exit int32) *repb.ExecuteResponse {
	return &repb.ExecuteResponse{Result: &repb.ActionResult{ExitCode: exit}}
}

func TestIdenticalActionsShareOneExecution(t *testing.T) {
	h := newHarness(t)
	op1 := h.submit(action("a"))
	op2 := h.submit(action("a"))
	w := h.worker("w1", 4)
	tasks, _ := assigned(w)
	if len(tasks) != 1 {
		t.Fatalf("assigned %v, want one task for two identical actions", tasks)
	}
	snap1, _ := h.s.Watch(op1.Name)
	h.s.Complete(w.ID(), tasks[0], ok(0))
	select {
	case <-snap1.Changed:
	default:
		t.Fatal("watchers were not woken by completion")
	}
	for _, op := range []*Operation{op1, op2} {
		snap, _ := h.s.Watch(op.Name)
		if snap.Stage != Completed || snap.Response.Result.ExitCode != 0 {
			t.Fatalf("operation %s: %v", op.Name, snap.Stage)
		}
	}
	// Once completed, the same action executes anew.
	h.submit(action("a"))
	if tasks, _ := assigned(w); len(tasks) != 1 {
		t.Fatalf("resubmission assigned %v", tasks)
	}
}

func TestDoNotCacheIsNotDeduplicated(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 4)
	a := action("a")
	a.DoNotCache = true
	h.submit(a)
	h.submit(a)
	if tasks, _ := assigned(w); len(tasks) != 2 {
		t.Fatalf("assigned %v, want two executions", tasks)
	}
}

func TestSlotsAndPriority(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 1)
	first := h.submit(action("first"))
	low := action("low")
	low.Priority = 5
	h.submit(low)
	high := action("high")
	high.Priority = -5
	highOp := h.submit(high)
	tasks, _ := assigned(w)
	if len(tasks) != 1 || h.stage(first) != Executing {
		t.Fatalf("one slot: assigned %v", tasks)
	}
	h.s.Complete(w.ID(), tasks[0], ok(0))
	if h.stage(highOp) != Executing {
		t.Fatal("the higher-priority action did not run next")
	}
}

func TestLostWorkerTasksAreRedispatched(t *testing.T) {
	tests := []struct {
		name string
		lose func(h *harness, w, other *Worker)
	}{
		{"missed heartbeats", func(h *harness, w, _ *Worker) { h.advance(6 * time.Second) }},
		{"stream ended", func(h *harness, w, other *Worker) {
			h.s.Disconnect(w)
			// Gone, it keeps its task until the one liveness deadline.
			if tasks, _ := assigned(other); len(tasks) != 0 {
				h.t.Fatalf("re-dispatched at once to %s: %v", other.ID(), tasks)
			}
			h.advance(6 * time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			w1 := h.worker("w1", 1)
			op := h.submit(action("a"))
			if tasks, _ := assigned(w1); len(tasks) != 1 {
				t.Fatal("not assigned to w1")
			}
			h.advance(5 * time.Second)
			w2 := h.worker("w2", 1)
			w2.Session().Heard(h.now)
			tt.lose(h, w1, w2)
			tasks, _ := assigned(w2)
			if len(tasks) != 1 || h.stage(op) != Executing {
				t.Fatalf("task not re-dispatched to w2: %v", tasks)
			}
			// A late result from the lost worker is ignored.
			h.s.Complete(w1.ID(), tasks[0], ok(1))
			if h.stage(op) != Executing {
				t.Fatal("a lost worker's report completed the task")
			}
			h.s.Complete(w2.ID(), tasks[0], ok(0))
			if snap, _ := h.s.Watch(op.Name); snap.Stage != Completed || snap.Response.Result.ExitCode != 0 {
				t.Fatal("w2's result was not taken")
			}
			// Back, the lost worker reports its copy finished: a task
			// that ended here is stale, not one to adopt, until the
			// retention is up.
			back, err := h.register("w1", "p1", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, adopted := h.s.AdoptFinished(back, tasks[0], action("a").Digest); adopted {
				t.Fatal("the lost worker's stale result was adopted")
			}
			if got := h.s.Status().GetActions().GetCompleted(); got != 1 {
				t.Fatalf("%d actions completed, want the one", got)
			}
		})
	}
}

func TestTaskFailsAfterMaxAttempts(t *testing.T) {
	h := newHarness(t)
	op := h.submit(action("a"))
	for i := 1; i <= 2; i++ {
		w := h.worker(fmt.Sprint("w", i), 1)
		h.s.Disconnect(w)
		h.advance(11 * time.Second)
	}
	snap, _ := h.s.Watch(op.Name)
	if snap.Stage != Completed || codes.Code(snap.Response.Status.Code) != codes.Unavailable {
		t.Fatalf("after two lost workers: %v %v", snap.Stage, snap.Response)
	}
}

func TestPlatformMismatchFailsFast(t *testing.T) {
	linux := Property{Name: "OSFamily", Value: "linux"}
	gpu := Property{Name: "gpu", Value: "a100"}
	h := newHarness(t)

	// With no worker registered yet, actions wait for one.
	waiting := h.submit(action("waits", gpu))
	if h.stage(waiting) != Queued {
		t.Fatal("action without workers did not queue")
	}
	h.worker("w1", 1, linux)
	snap, _ := h.s.Watch(waiting.Name)
	if snap.Stage != Completed || !strings.Contains(snap.Response.Status.Message, "gpu=a100") {
		t.Fatalf("queued action after an unsuitable worker registered: %v %v", snap.Stage, snap.Response)
	}

	_, err := h.s.Submit(action("x", linux, gpu))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "gpu=a100") {
		t.Fatalf("Submit = %v, want FailedPrecondition naming gpu=a100", err)
	}
	h.worker("w2", 1, gpu)
	_, err = h.s.Submit(action("y", linux, gpu))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no single worker") {
		t.Fatalf("Submit = %v, want FailedPrecondition about no single worker", err)
	}
	if _, err := h.s.Submit(action("z", linux)); err != nil {
		t.Fatalf("satisfiable action refused: %v", err)
	}
}

func TestTimeoutFailsTaskAndCancelsIt(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 1)
	a := action("slow")
	a.Timeout = 10 * time.Second
	op := h.submit(a)
	tasks, _ := assigned(w)
	for i := 0; i < 3; i++ {
		w.Session().Heard(h.now)
		h.advance(5 * time.Second)
	}
	if h.stage(op) != Executing {
		t.Fatal("failed before timeout + grace")
	}
	w.Session().Heard(h.now)
	h.advance(1 * time.Second)
	snap, _ := h.s.Watch(op.Name)
	if snap.Stage != Completed || codes.Code(snap.Response.Status.Code) != codes.DeadlineExceeded {
		t.Fatalf("after timeout: %v %v", snap.Stage, snap.Response)
	}
	if _, cancels := assigned(w); len(cancels) != 1 || cancels[0] != tasks[0] {
		t.Fatalf("cancellations %v, want %v", cancels, tasks)
	}
}

func TestReconnect(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 2)
	op := h.submit(action("a"))
	h.submit(action("b"))
	tasks, _ := assigned(w)
	if len(tasks) != 2 {
		t.Fatalf("assigned %v", tasks)
	}
	// Another process under the same name is refused.
	if _, err := h.register("w1", "other", 1, nil); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate name: %v", err)
	}
	// The same process reconnects, still running only the first task.
	w2, err := h.register("w1", "w1", 2, []*workerpb.RunningTask{actionTask(tasks[0], digest.FromBytes([]byte("a")))})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := assigned(w2)
	if len(again) != 1 || again[0] != tasks[1] {
		t.Fatalf("after reconnect, re-assigned %v; want only %s", again, tasks[1])
	}
	h.s.Complete(w2.ID(), tasks[0], ok(0))
	if h.stage(op) != Completed {
		t.Fatal("the task kept across the reconnect did not complete")
	}
	if _, err := w.Session().Next(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("old registration's stream: %v", err)
	}
}

// A worker that registers running actions this scheduler did not assign
// (it took over from the server that did) has them adopted: an execution
// of the same action joins the one running, whether it arrives after the
// worker or was queued before it, and the worker's result completes it.
func TestAdoptsActionsOfAnotherServer(t *testing.T) {
	for _, retryFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("retry first %v", retryFirst), func(t *testing.T) {
			h := newHarness(t)
			a := action("running elsewhere")
			var early *Operation
			if retryFirst {
				early = h.submit(a) // queued: no worker yet
			}
			w, err := h.register("w1", "w1", 2, []*workerpb.RunningTask{actionTask("old-server-task", a.Digest),
				{TaskId: "a-job-task", SlotClass: workerpb.SlotClass_SLOT_CLASS_JOB}})
			if err != nil {
				t.Fatal(err)
			}
			late := h.submit(a)
			if tasks, _ := assigned(w); len(tasks) != 0 {
				t.Fatalf("the running action was assigned again: %v", tasks)
			}
			if got, _, ok := h.s.Owned(w, "old-server-task"); !ok || got.Digest != a.Digest {
				t.Fatalf("the adopted task is not the worker's: %v %v", got, ok)
			}
			h.s.Complete(w.ID(), "old-server-task", ok(0))
			for _, op := range []*Operation{early, late} {
				if op != nil && h.stage(op) != Completed {
					t.Fatalf("operation %s did not complete with the adopted task", op.Name)
				}
			}
			// The job's task is not an action's: it holds no action slot.
			h.submit(action("next"))
			if tasks, _ := assigned(w); len(tasks) != 1 {
				t.Fatalf("after the adopted action ended, assigned %v; want the next one", tasks)
			}
		})
	}
}

// A result of an action another server assigned, which ended before its
// worker reconnected here, answers for the same action queued here
// meanwhile; an action executing here under a task of its own is not taken.
func TestAdoptsFinishedAction(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 1)
	running := action("running here")
	h.submit(running)
	queued := action("ended elsewhere")
	op := h.submit(queued)
	if h.stage(op) != Queued {
		t.Fatalf("the second action is %v, want queued behind the first", h.stage(op))
	}
	if _, _, ok := h.s.AdoptFinished(w, "old-task", queued.Digest); !ok {
		t.Fatal("a finished action queued here was not adopted")
	}
	h.s.Complete(w.ID(), "old-task", ok(0))
	if h.stage(op) != Completed {
		t.Fatal("the adopted result did not complete the queued operation")
	}
	if _, _, ok := h.s.AdoptFinished(w, "old-task-2", running.Digest); ok {
		t.Fatal("an action executing here under a task of its own was adopted")
	}
}

// Resume answers for an action that completed here moments before (it ran
// for the operation a client resumes) with that result, within the
// retention only; Submit runs it again.
func TestResumeJoinsACompletedAction(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 1)
	a := action("just ended")
	h.submit(a)
	tasks, _ := assigned(w)
	h.s.Complete(w.ID(), tasks[0], ok(3))
	op, err := h.s.Resume(a)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := h.s.Watch(op.Name)
	if err != nil || snap.Stage != Completed || snap.Response.GetResult().GetExitCode() != 3 {
		t.Fatalf("Resume of a completed action = %+v, %v; want its result", snap, err)
	}
	if tasks, _ := assigned(w); len(tasks) != 0 {
		t.Fatalf("Resume ran the action again: %v", tasks)
	}
	h.submit(a)
	again, _ := assigned(w)
	if len(again) != 1 {
		t.Fatalf("Submit after completion assigned %v, want a new run", again)
	}
	h.s.Complete(w.ID(), again[0], ok(0))
	h.advance(h.s.cfg.Retention + time.Second) // w is silent that long: gone
	w = h.worker("w2", 1)
	if _, err := h.s.Resume(a); err != nil {
		t.Fatal(err)
	}
	h.heartbeat(w, 0)
	h.advance(h.s.cfg.HeartbeatTimeout) // held for a worker that runs it
	if tasks, _ := assigned(w); len(tasks) != 1 {
		t.Fatalf("Resume past the retention assigned %v, want a new run", tasks)
	}
}

// A resumed operation's action waits in the queue, even with a worker
// free, for as long as a worker may be silent: the worker that runs it for
// the server before may reconnect meanwhile and have it adopted, so it
// runs once. Unclaimed, it runs then.
func TestResumeWaitsForTheWorkerThatRunsIt(t *testing.T) {
	h := newHarness(t)
	idle := h.worker("idle", 1)
	a := action("started by the server before")
	op, err := h.s.Resume(a)
	if err != nil {
		t.Fatal(err)
	}
	h.advance(h.s.cfg.HeartbeatTimeout / 2)
	h.heartbeat(idle, 0)
	if tasks, _ := assigned(idle); len(tasks) != 0 {
		t.Fatalf("the resumed action went to an idle worker at once: %v", tasks)
	}
	runner, err := h.register("runner", "runner", 1, []*workerpb.RunningTask{actionTask("old-server-task", a.Digest)})
	if err != nil {
		t.Fatal(err)
	}
	h.s.Complete(runner.ID(), "old-server-task", ok(0))
	if h.stage(op) != Completed {
		t.Fatal("the resumed operation did not complete with the run the worker reported")
	}
	if tasks, _ := assigned(idle); len(tasks) != 0 {
		t.Fatalf("the action ran twice: %v went to the idle worker too", tasks)
	}

	// No worker claims another: it runs when the wait is over.
	b := action("lost with the server before")
	h.s.Resume(b)
	h.heartbeat(idle, 0)
	h.heartbeat(runner, 0)
	h.advance(h.s.cfg.HeartbeatTimeout)
	got, _ := assigned(idle)
	more, _ := assigned(runner)
	if len(got)+len(more) != 1 {
		t.Fatalf("after the wait, assigned %v and %v; want one run", got, more)
	}
}

func TestStatusAndRetention(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 1, Property{Name: "OSFamily", Value: "linux"})
	op := h.submit(action("a"))
	h.submit(action("b"))
	st := h.s.Status()
	if len(st.Workers) != 1 || st.Workers[0].ActionSlots.Used != 1 || st.Queue.QueuedActions != 1 || st.Queue.ExecutingActions != 1 {
		t.Fatalf("status = %v", st)
	}
	tasks, _ := assigned(w)
	h.now = h.now.Add(250 * time.Millisecond)
	h.s.Complete(w.ID(), tasks[0], ok(0))
	if st := h.s.Status(); st.Actions.Completed != 1 || st.Actions.OverheadP50Ms != 250 {
		t.Fatalf("action stats = %v", st.Actions)
	}
	w.Session().Heard(h.now)
	h.advance(DefaultRetention + time.Second)
	if _, err := h.s.Watch(op.Name); status.Code(err) != codes.NotFound {
		t.Fatalf("finished operation kept past retention: %v", err)
	}
}

// One deadline for liveness: a worker gone or silent is lost once it has
// not been heard from for HeartbeatTimeout, and Lost is told, once; a new
// process under the name of one gone takes its place, and what the old
// one ran is queued again.
func TestLiveness(t *testing.T) {
	h := newHarness(t)
	var lost []string
	h.s.cfg.Lost = func(w, why string) { lost = append(lost, w+": "+why) }
	gone := h.worker("gone", 1)
	silent := h.worker("silent", 1)
	h.s.Disconnect(gone)
	h.advance(5 * time.Second)
	silent.Session().Heard(h.now)
	h.advance(6 * time.Second) // gone: 11 s unheard; silent: 6 s
	if len(lost) != 1 || !strings.HasPrefix(lost[0], "gone: worker gone gone for 11s") {
		t.Fatalf("lost %v, want gone alone", lost)
	}
	h.advance(5 * time.Second)
	if len(lost) != 2 || !strings.HasPrefix(lost[1], "silent: worker silent silent for 11s") {
		t.Fatalf("lost %v, want silent too", lost)
	}

	w := h.worker("w", 1)
	op := h.submit(action("a"))
	if tasks, _ := assigned(w); len(tasks) != 1 {
		t.Fatalf("assigned %v", tasks)
	}
	h.s.Disconnect(w)
	restarted, err := h.register("w", "new process", 1, nil)
	if err != nil {
		t.Fatalf("a new process under the name of one gone: %v", err)
	}
	if tasks, _ := assigned(restarted); len(tasks) != 1 || h.stage(op) != Executing {
		t.Fatalf("the restarted worker got %v", tasks)
	}
}

// A worker in a maintenance window gets no new action; one out of it does.
func TestMaintenance(t *testing.T) {
	h := newHarness(t)
	h.s.SetMaintenance(false, []string{"a"})
	a := h.worker("a", 1)
	op := h.submit(action("x"))
	if tasks, _ := assigned(a); len(tasks) != 0 || h.stage(op) != Queued {
		t.Fatalf("a worker in maintenance got %v", tasks)
	}
	b := h.worker("b", 1)
	if tasks, _ := assigned(b); len(tasks) != 1 {
		t.Fatalf("the worker out of maintenance got %v", tasks)
	}
	h.s.SetMaintenance(true, nil)
	h.submit(action("y"))
	if tasks, _ := assigned(a); len(tasks) != 0 {
		t.Fatalf("with every worker in maintenance, a got %v", tasks)
	}
	h.s.SetMaintenance(false, nil)
	if tasks, _ := assigned(a); len(tasks) != 1 {
		t.Fatalf("after the window, a got %v", tasks)
	}
}

// Load counts the queued actions and the connected workers' slots, and
// leaves out a worker whose stream ended.
func TestLoad(t *testing.T) {
	h := newHarness(t)
	a := h.worker("a", 2)
	h.worker("b", 1)
	for i := 0; i < 5; i++ {
		h.submit(action(fmt.Sprint("action", i)))
	}
	if got, want := h.s.Load(), (Load{Queued: 2, Workers: 2, Slots: 3, SlotsUsed: 3}); got != want {
		t.Fatalf("with 5 actions on 3 slots: %+v, want %+v", got, want)
	}
	h.s.Disconnect(a)
	if got, want := h.s.Load(), (Load{Queued: 2, Workers: 1, Slots: 1, SlotsUsed: 1}); got != want {
		t.Fatalf("after a's stream ended: %+v, want %+v", got, want)
	}
}

// Every heartbeat is reconciled: an action assigned to the worker that it
// no longer holds, though it had applied the assignment, is lost and runs
// elsewhere; one assigned after the heartbeat was made is not; an action
// the worker runs that is not its own is cancelled, and a finished one is
// left to its report.
func TestReconcile(t *testing.T) {
	h := newHarness(t)
	w := h.worker("w1", 1)
	a := action("a")
	op := h.submit(a)
	tasks, _ := assigned(w)
	if len(tasks) != 1 {
		t.Fatalf("assigned %v", tasks)
	}
	h.heartbeat(w, 0) // made before the assignment arrived
	if _, cancels := assigned(w); h.stage(op) != Executing || len(cancels) != 0 {
		t.Fatalf("a heartbeat made before the assignment: stage %v, cancels %v", h.stage(op), cancels)
	}
	h.heartbeat(w, 1, actionTask(tasks[0], a.Digest), actionTask("stray", digest.FromBytes([]byte("x"))),
		&workerpb.RunningTask{TaskId: "done", SlotClass: workerpb.SlotClass_SLOT_CLASS_ACTION, Finished: true},
		&workerpb.RunningTask{TaskId: "7#1", SlotClass: workerpb.SlotClass_SLOT_CLASS_JOB})
	if _, cancels := assigned(w); len(cancels) != 1 || cancels[0] != "stray" {
		t.Fatalf("cancelled %v, want the stray action alone", cancels)
	}
	h.s.SetMaintenance(false, []string{"w1"})
	w2 := h.worker("w2", 1)
	h.heartbeat(w, 1) // it had it, and has it no more
	if again, _ := assigned(w2); len(again) != 1 || again[0] != tasks[0] || h.stage(op) != Executing {
		t.Fatalf("the lost action went to %v (stage %v), want w2", again, h.stage(op))
	}
	h.s.Complete(w.ID(), tasks[0], ok(1))
	if h.stage(op) != Executing {
		t.Fatal("the worker that lost the action completed it")
	}
}
