// Package session provides Session, the server's side of one worker's
// stream: the worker's registration, decoded once (Registration); the
// outbox of messages for it, numbered; its liveness, one deadline from the
// last message heard; and a generation, so that the end of a replaced
// stream is told from the end of the current one. The action queue
// (rbe/scheduler) and the batch scheduler (jobs/service) both read the
// Session of a worker and send through it.
//
// The protocol is level-triggered, as Buildbarn's Synchronize: with every
// heartbeat the worker reports everything it holds (Report), and each
// scheduler reconciles what it believes with that. Report.Lost tells an
// assignment the worker never had (lost) from one it had not applied yet
// when it made the report.
package session

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/platform"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Property is a platform property a worker offers, such as OSFamily=linux.
type Property struct{ Name, Value string }

func (p Property) String() string { return p.Name + "=" + p.Value }

// Registration is what a worker declares when its stream opens.
type Registration struct {
	Name string
	// Process is random per worker process: the same name and process is
	// a reconnect of the same worker.
	Process     string
	ActionSlots int
	JobSlots    int
	Resources   *workerpb.Resources
	Properties  []Property
	// Platform is the worker's OS-ARCH from its OSFamily and ISA; "" when
	// it offers none.
	Platform string
	// Address is where other workers reach this one.
	Address string
	Version string
	// Holds is what the worker holds from before this stream.
	Holds Report
	// WholeHeartbeats says each of its heartbeats reports everything it
	// holds, to be reconciled with; an earlier rbs's are not.
	WholeHeartbeats bool
}

// Task is one piece of work a worker holds.
type Task struct {
	ID    string
	Class workerpb.SlotClass
	// Action is the digest of an action-class task's action; zero for a
	// job's, or when the worker sent one that does not parse.
	Action digest.Digest
	// MasterPort is the port a gang's rank 0 picked; 0 for none.
	MasterPort int32
	// Finished says the task has ended and its report awaits an Ack.
	Finished bool
}

// Report is a worker's whole state at one moment: the tasks it holds, and
// the seq of the last message of its stream it had applied.
type Report struct {
	Tasks   []Task
	Applied uint64
	// whole says every assignment made before the report was applied:
	// that of a registration, made before anything was sent.
	whole bool
}

// Decode checks a worker's Register and decodes it; peer is the address
// the server sees the worker connect from, its Address when it gives none.
func Decode(reg *workerpb.Register, peer net.Addr) (Registration, error) {
	if reg.Name == "" {
		return Registration{}, status.Error(codes.InvalidArgument, "worker name must not be empty")
	}
	if reg.ActionSlots < 0 || reg.JobSlots < 0 {
		return Registration{}, status.Errorf(codes.InvalidArgument, "worker %s: negative slot count (%d action slots, %d job slots)", reg.Name, reg.ActionSlots, reg.JobSlots)
	}
	r := Registration{
		Name:            reg.Name,
		Process:         reg.Session,
		ActionSlots:     int(reg.ActionSlots),
		JobSlots:        int(reg.JobSlots),
		Resources:       reg.Resources,
		Address:         reg.Address,
		Version:         reg.Version,
		Holds:           Report{Tasks: decodeTasks(reg.Running), whole: true},
		WholeHeartbeats: reg.WholeHeartbeats,
	}
	if r.Resources == nil {
		r.Resources = &workerpb.Resources{}
	}
	if r.Address == "" && peer != nil {
		// Other workers reach this one where the server sees it from.
		if host, _, err := net.SplitHostPort(peer.String()); err == nil {
			r.Address = host
		}
	}
	props := map[string]string{}
	for _, p := range reg.Properties {
		r.Properties = append(r.Properties, Property{Name: p.Name, Value: p.Value})
		props[p.Name] = p.Value
	}
	if p, ok := platform.FromProperties(props); ok {
		r.Platform = p.String()
	}
	return r, nil
}

// DecodeReport decodes a heartbeat.
func DecodeReport(hb *workerpb.Heartbeat) Report {
	return Report{Tasks: decodeTasks(hb.Running), Applied: hb.Applied}
}

// decodeTasks decodes the tasks a worker reports. A digest is checked as a
// client's is; a bad one leaves the action unknown.
func decodeTasks(running []*workerpb.RunningTask) []Task {
	tasks := make([]Task, 0, len(running))
	for _, r := range running {
		t := Task{ID: r.TaskId, Class: r.SlotClass, MasterPort: r.MasterPort, Finished: r.Finished}
		if r.SlotClass == workerpb.SlotClass_SLOT_CLASS_ACTION && r.ActionDigest != nil {
			t.Action, _ = digest.New(r.ActionDigest.Hash, r.ActionDigest.SizeBytes)
		}
		tasks = append(tasks, t)
	}
	return tasks
}

// Whole reports whether r is a registration's: every assignment made
// before it was applied, and tasks it does not hold are lost.
func (r Report) Whole() bool { return r.whole }

// Of returns the report's tasks of one slot class.
func (r Report) Of(class workerpb.SlotClass) []Task {
	var out []Task
	for _, t := range r.Tasks {
		if t.Class == class {
			out = append(out, t)
		}
	}
	return out
}

// gens numbers sessions across the process.
var gens atomic.Uint64

// Session is one worker stream's state on the server. Its methods are safe
// for concurrent use.
type Session struct {
	// Reg is the worker's registration; it does not change.
	Reg Registration
	// Gen is unique to the session among the process's.
	Gen uint64

	mu  sync.Mutex
	out []*workerpb.ServerMessage
	seq uint64
	// sentAt holds the seq of each assignment until a report shows the
	// worker holding its task (Report.Lost).
	sentAt   map[string]uint64
	lastSeen time.Time
	ended    bool
	notify   chan struct{} // signalled when out grows
	gone     chan struct{} // closed by Drop
}

// New returns the Session of a stream that registered reg at now.
func New(reg Registration, now time.Time) *Session {
	return &Session{
		Reg:      reg,
		Gen:      gens.Add(1),
		sentAt:   map[string]uint64{},
		lastSeen: now,
		notify:   make(chan struct{}, 1),
		gone:     make(chan struct{}),
	}
}

// Name returns the worker's name.
func (s *Session) Name() string { return s.Reg.Name }

// Send numbers m and queues it for the stream.
func (s *Session) Send(m *workerpb.ServerMessage) {
	s.mu.Lock()
	s.seq++
	m.Seq = s.seq
	if id := assigned(m); id != "" {
		s.sentAt[id] = s.seq
	}
	for _, id := range m.GetAck().GetTaskIds() {
		delete(s.sentAt, id) // ended: it is asked after no more
	}
	s.out = append(s.out, m)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// assigned returns the task id m assigns, or "".
func assigned(m *workerpb.ServerMessage) string {
	switch k := m.Kind.(type) {
	case *workerpb.ServerMessage_AssignAction:
		return k.AssignAction.TaskId
	case *workerpb.ServerMessage_AssignJob:
		return k.AssignJob.TaskId
	}
	return ""
}

// Ack queues the acknowledgement of the ends of tasks the worker reported.
func (s *Session) Ack(tasks ...string) {
	if len(tasks) > 0 {
		s.Send(&workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Ack{Ack: &workerpb.Ack{TaskIds: tasks}}})
	}
}

// Next returns the next message for the stream. It fails once the session
// has been dropped or ctx is done.
func (s *Session) Next(ctx context.Context) (*workerpb.ServerMessage, error) {
	for {
		s.mu.Lock()
		if len(s.out) > 0 {
			m := s.out[0]
			s.out[0] = nil
			s.out = s.out[1:]
			s.mu.Unlock()
			return m, nil
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-s.gone:
			return nil, status.Errorf(codes.Unavailable, "worker %s was dropped", s.Reg.Name)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Lost reports whether the worker had lost task, assigned through this
// session or before it, when it made report r, which does not hold it: it
// had applied the assignment, or the assignment predates the session. A
// task the report holds is settled: from then on, a report without it
// means it is lost.
func (s *Session) Lost(r Report, task string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range r.Tasks {
		if t.ID == task {
			delete(s.sentAt, task)
			return false
		}
	}
	at, sent := s.sentAt[task]
	if r.whole || !sent || at <= r.Applied {
		delete(s.sentAt, task)
		return true
	}
	return false
}

// Heard records that the worker was heard from at now.
func (s *Session) Heard(now time.Time) {
	s.mu.Lock()
	s.lastSeen = now
	s.mu.Unlock()
}

// Silent returns how long the worker has not been heard from at now.
func (s *Session) Silent(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return now.Sub(s.lastSeen)
}

// LastSeen returns when the worker was last heard from.
func (s *Session) LastSeen() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeen
}

// End records that the stream has ended: the worker gets no new work, and
// keeps what it runs until it reconnects or is lost.
func (s *Session) End() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
}

// Connected reports whether the stream is still open.
func (s *Session) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// Drop ends the stream from the server's side: the worker reconnects and
// registers anew.
func (s *Session) Drop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.gone:
	default:
		close(s.gone)
	}
}
