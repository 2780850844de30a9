package session

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDecode(t *testing.T) {
	d := digest.FromBytes([]byte("action"))
	peer := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4711}
	tests := []struct {
		name    string
		reg     *workerpb.Register
		wantErr string
		check   func(t *testing.T, r Registration)
	}{
		{name: "no name", reg: &workerpb.Register{}, wantErr: "worker name must not be empty"},
		{name: "negative slots", reg: &workerpb.Register{Name: "w", JobSlots: -2}, wantErr: "0 action slots, -2 job slots"},
		{name: "address from the peer", reg: &workerpb.Register{Name: "w"}, check: func(t *testing.T, r Registration) {
			if r.Address != "10.0.0.7" {
				t.Errorf("address %q, want the peer's host", r.Address)
			}
		}},
		{name: "address given", reg: &workerpb.Register{Name: "w", Address: "gpu7.lan"}, check: func(t *testing.T, r Registration) {
			if r.Address != "gpu7.lan" {
				t.Errorf("address %q, want the one given", r.Address)
			}
		}},
		{name: "platform", reg: &workerpb.Register{Name: "w", Properties: []*workerpb.Property{{Name: "OSFamily", Value: "linux"}, {Name: "ISA", Value: "x86-64"}, {Name: "gpu", Value: "a100"}}},
			check: func(t *testing.T, r Registration) {
				if r.Platform != "linux-x86_64" || len(r.Properties) != 3 || r.Properties[2].String() != "gpu=a100" {
					t.Errorf("platform %q, properties %v", r.Platform, r.Properties)
				}
			}},
		{name: "holdings", reg: &workerpb.Register{Name: "w", WholeHeartbeats: true, Running: []*workerpb.RunningTask{
			{TaskId: "a", SlotClass: workerpb.SlotClass_SLOT_CLASS_ACTION, ActionDigest: &workerpb.Digest{Hash: d.Hash(), SizeBytes: d.Size()}},
			{TaskId: "bad", SlotClass: workerpb.SlotClass_SLOT_CLASS_ACTION, ActionDigest: &workerpb.Digest{Hash: "nothex", SizeBytes: 3}},
			{TaskId: "7#1", SlotClass: workerpb.SlotClass_SLOT_CLASS_JOB, MasterPort: 29500},
			{TaskId: "8#1", SlotClass: workerpb.SlotClass_SLOT_CLASS_JOB, Finished: true},
		}}, check: func(t *testing.T, r Registration) {
			h := r.Holds
			if !r.WholeHeartbeats || !h.Whole() || len(h.Tasks) != 4 || h.Tasks[0].Action != d || !h.Tasks[1].Action.IsZero() {
				t.Fatalf("holdings %+v", h)
			}
			jobs := h.Of(workerpb.SlotClass_SLOT_CLASS_JOB)
			if len(jobs) != 2 || jobs[0].MasterPort != 29500 || !jobs[1].Finished {
				t.Errorf("job holdings %+v", jobs)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Decode(tt.reg, peer)
			if tt.wantErr != "" {
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Decode = %v, want InvalidArgument naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, r)
		})
	}
}

func assignJob(task string) *workerpb.ServerMessage {
	return &workerpb.ServerMessage{Kind: &workerpb.ServerMessage_AssignJob{AssignJob: &workerpb.AssignJob{TaskId: task}}}
}

func report(applied uint64, held ...string) Report {
	r := Report{Applied: applied}
	for _, id := range held {
		r.Tasks = append(r.Tasks, Task{ID: id, Class: workerpb.SlotClass_SLOT_CLASS_JOB})
	}
	return r
}

// An assignment missing from a report is lost only when the worker had
// applied it when it made the report, or it predates the session; once a
// report has held a task, a report without it loses it.
func TestLost(t *testing.T) {
	tests := []struct {
		name  string
		sends []string // tasks assigned, seq 1, 2, ...
		acked []string
		seen  []Report // reports taken before
		r     Report
		task  string
		want  bool
	}{
		{name: "held", sends: []string{"a"}, r: report(0, "a"), task: "a", want: false},
		{name: "not applied yet", sends: []string{"x", "a"}, r: report(1), task: "a", want: false},
		{name: "applied and missing", sends: []string{"x", "a"}, r: report(2), task: "a", want: true},
		{name: "from before the session", r: report(0), task: "old", want: true},
		{name: "registration", sends: []string{"a"}, r: Report{whole: true}, task: "a", want: true},
		{name: "held once, then missing", sends: []string{"a"}, seen: []Report{report(0, "a")}, r: report(0), task: "a", want: true},
		{name: "acknowledged, then asked", sends: []string{"a"}, acked: []string{"a"}, r: report(0), task: "a", want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(Registration{Name: "w"}, time.Now())
			for _, task := range tt.sends {
				s.Send(assignJob(task))
			}
			s.Ack(tt.acked...)
			for _, r := range tt.seen {
				for _, held := range r.Tasks {
					s.Lost(r, held.ID)
				}
			}
			if got := s.Lost(tt.r, tt.task); got != tt.want {
				t.Errorf("Lost(%s) = %v, want %v", tt.task, got, tt.want)
			}
		})
	}
}

// Messages leave in order, numbered from 1; a dropped session's stream
// gets no more.
func TestOutbox(t *testing.T) {
	s := New(Registration{Name: "w"}, time.Now())
	s.Send(assignJob("a"))
	s.Ack("b")
	for want := uint64(1); want <= 2; want++ {
		m, err := s.Next(context.Background())
		if err != nil || m.Seq != want {
			t.Fatalf("message %d: seq %d, %v", want, m.GetSeq(), err)
		}
	}
	s.Drop()
	s.Drop() // twice is harmless
	if _, err := s.Next(context.Background()); status.Code(err) != codes.Unavailable {
		t.Fatalf("Next after Drop: %v", err)
	}
	if !s.Connected() {
		t.Fatal("a new session is not connected")
	}
	s.End()
	if s.Connected() {
		t.Fatal("an ended session is connected")
	}
	if other := New(Registration{Name: "w"}, time.Now()); other.Gen == s.Gen {
		t.Fatal("two sessions share a generation")
	}
}
