package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// same fails unless the View answers List, Show, Queues, Counts and the
// job slots in use exactly as the Core does.
func (h *harness) same(what string) {
	h.t.Helper()
	h.c.Publish(true)
	c := h.c
	all := Filter{History: true}
	want, wantQ, wantN, wantS := c.List(all), c.Queues(), c.Counts(), c.JobSlotsUsed()
	wantShares := c.Shares()
	wantShow := map[string][]*jobspb.JobInfo{}
	for _, j := range want {
		keys, _ := c.Lookup(j.Id)
		wantShow[j.Id] = c.Infos(keys, true)
	}
	c.View().Read(func(r *Core) {
		got := r.List(all)
		if len(got) != len(want) {
			h.t.Fatalf("%s: the view lists %d jobs, the core %d", what, len(got), len(want))
		}
		for i := range want {
			if !proto.Equal(got[i], want[i]) {
				h.t.Fatalf("%s: the view lists\n%v\nthe core\n%v", what, got[i], want[i])
			}
			keys, err := r.Lookup(want[i].Id)
			if err != nil {
				h.t.Fatalf("%s: the view cannot look up %s: %v", what, want[i].Id, err)
			}
			show := r.Infos(keys, true)
			for k := range show {
				if !proto.Equal(show[k], wantShow[want[i].Id][k]) {
					h.t.Fatalf("%s: the view shows\n%v\nthe core\n%v", what, show[k], wantShow[want[i].Id][k])
				}
			}
		}
		for i, q := range r.Queues() {
			if !proto.Equal(q, wantQ[i]) {
				h.t.Fatalf("%s: the view's queue %v, the core's %v", what, q, wantQ[i])
			}
		}
		for s, n := range r.Counts() {
			if wantN[s] != n {
				h.t.Fatalf("%s: the view counts %d %s, the core %d", what, n, s, wantN[s])
			}
		}
		for w, n := range r.JobSlotsUsed() {
			if wantS[w] != n {
				h.t.Fatalf("%s: the view has %d slots in use on %s, the core %d", what, n, w, wantS[w])
			}
		}
		if got := r.Shares(); !proto.Equal(got, wantShares) {
			h.t.Fatalf("%s: the view's shares\n%v\nthe core's\n%v", what, got, wantShares)
		}
		// Each worker's copy runs the copies of the jobs it runs.
		for name, w := range c.workers {
			cw := r.workers[name]
			if cw == nil || len(cw.running) != len(w.running) || cw.usedCPUs != w.usedCPUs {
				h.t.Fatalf("%s: the view's worker %s is %+v, the core's %+v", what, name, cw, w)
			}
			for k := range w.running {
				if j := cw.running[k]; j == nil || j != r.jobs[k] {
					h.t.Fatalf("%s: the view's worker %s runs %v as %p, the view's job is %p", what, name, k, j, r.jobs[k])
				}
			}
		}
	})
}

func TestViewFollowsCore(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.Retention = time.Hour
	h.worker("w1", 2, 2)
	a := h.submit(&jobspb.JobSpec{Name: "a", TimeLimitMs: 60_000})
	arr := h.submit(&jobspb.JobSpec{Name: "arr", Array: &jobspb.ArraySpec{Text: "0-5"}})
	h.submit(&jobspb.JobSpec{Name: "big", Cpus: 2, Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: a, Index: -1}}})
	h.same("submitted")
	h.step()
	h.same("started")
	h.advance(time.Minute) // usage to share out
	h.finish(a, -1, Completed)
	h.step()
	h.same("one ended")
	h.finish(arr, 0, Failed)
	h.c.Cancel([]Key{{arr, 3}})
	h.step()
	h.same("a task failed and one was cancelled")
	h.restart()
	h.same("restarted")
	var all []Key
	for k := range h.c.jobs {
		all = append(all, k)
	}
	h.c.Cancel(all)
	h.step()
	h.same("all cancelled")
	h.advance(2 * time.Hour)
	h.step()
	h.same("all forgotten")
	h.c.View().Read(func(r *Core) {
		if n := len(r.List(Filter{History: true})); n != 0 {
			t.Fatalf("the view lists %d jobs after their retention", n)
		}
	})
}

// A reader holding the View does not hold up a round: the round's changes
// wait for a later publication, unless a client waits on them.
func TestViewPublishDoesNotWaitForReaders(t *testing.T) {
	h := newHarness(t)
	h.worker("w1", 1, 1)
	h.submit(&jobspb.JobSpec{Name: "a"})
	h.step()
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		h.c.View().Read(func(*Core) {
			close(held)
			<-release
		})
		close(done)
	}()
	<-held
	b := h.submit(&jobspb.JobSpec{Name: "b"})
	if h.c.Publish(false) {
		t.Fatal("Publish took the View while a reader held it")
	}
	close(release)
	<-done
	if !h.c.Publish(false) {
		t.Fatal("Publish did not take the View once the reader let go")
	}
	h.c.View().Read(func(r *Core) {
		if _, err := r.Lookup(Key{b, -1}.String()); err != nil {
			t.Fatalf("the view lacks job %d after publishing: %v", b, err)
		}
	})
	h.same("after a deferred publication")
}

// TestCloneRecord checks the written-out clone against every field of a
// JobRecord and its nested messages, each set to a value other than its
// zero, made anew or over a record with fewer or more nodes: a field added
// to the proto and not to copyRecord fails it.
func TestCloneRecord(t *testing.T) {
	full := func() *jobspb.JobRecord { return filled(t, &jobspb.JobRecord{}).(*jobspb.JobRecord) }
	threeNodes := func() *jobspb.JobRecord {
		r := full()
		r.Nodes = append(r.Nodes, &jobspb.Node{Rank: 9, State: "OTHER"})
		return r
	}
	tests := []struct {
		name    string
		rec     *jobspb.JobRecord
		over    *jobspb.JobRecord // nil: cloned anew
		changes bool              // check the copy shares nothing it changes
	}{
		{"empty", &jobspb.JobRecord{}, nil, false},
		{"every field set", full(), nil, true},
		{"over an empty record", full(), &jobspb.JobRecord{}, true},
		{"over one with more nodes", full(), threeNodes(), true},
		{"over one with fewer nodes", threeNodes(), full(), true},
		{"empty over a full one", &jobspb.JobRecord{}, full(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.over
			if got == nil {
				got = cloneRecord(tt.rec)
			} else {
				copyRecord(got, tt.rec)
			}
			if !proto.Equal(got, tt.rec) {
				t.Fatalf("copy differs:\n got %v\nwant %v", got, tt.rec)
			}
			if !tt.changes {
				return
			}
			// The copy shares nothing the Core changes in place.
			tt.rec.Nodes[0].State, tt.rec.Nodes[0].GpuIndices[0] = "CHANGED", -7
			tt.rec.GpuIndices[0], tt.rec.History[0].State = -7, "CHANGED"
			if got.Nodes[0].State == "CHANGED" || got.Nodes[0].GpuIndices[0] == -7 || got.GpuIndices[0] == -7 || got.History[0].State == "CHANGED" {
				t.Fatalf("the copy shares its nodes, GPU indices or history with the record: %v", got)
			}
		})
	}
}

// filled sets every field of m, and of the messages it holds, to a value
// other than its zero: two elements in each list, one entry in each map.
func filled(t *testing.T, m proto.Message) proto.Message {
	var fill func(m protoreflect.Message, depth int)
	fill = func(m protoreflect.Message, depth int) {
		fields := m.Descriptor().Fields()
		for i := 0; i < fields.Len(); i++ {
			f := fields.Get(i)
			switch {
			case f.IsMap():
				mp := m.Mutable(f).Map()
				mp.Set(scalar(t, f.MapKey(), 1).MapKey(), mapValue(t, mp, f.MapValue(), fill, depth))
			case f.IsList():
				l := m.Mutable(f).List()
				for n := 1; n <= 2; n++ {
					if f.Message() != nil {
						e := l.NewElement()
						if depth < 3 {
							fill(e.Message(), depth+1)
						}
						l.Append(e)
					} else {
						l.Append(scalar(t, f, n))
					}
				}
			case f.Message() != nil:
				if depth < 3 {
					fill(m.Mutable(f).Message(), depth+1)
				}
			default:
				m.Set(f, scalar(t, f, 1))
			}
		}
	}
	fill(m.ProtoReflect(), 0)
	return m
}

// mapValue is a value for a map field's entry: a filled message, or a
// scalar.
func mapValue(t *testing.T, mp protoreflect.Map, f protoreflect.FieldDescriptor, fill func(protoreflect.Message, int), depth int) protoreflect.Value {
	if f.Message() != nil {
		v := mp.NewValue()
		if depth < 3 {
			fill(v.Message(), depth+1)
		}
		return v
	}
	return scalar(t, f, 1)
}

// scalar is a value of f's kind other than its zero, n telling elements
// of a list apart.
func scalar(t *testing.T, f protoreflect.FieldDescriptor, n int) protoreflect.Value {
	switch f.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprint(f.Name(), n))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fmt.Sprint(f.Name(), n)))
	}
	t.Fatalf("field %s: kind %v not handled", f.FullName(), f.Kind())
	return protoreflect.Value{}
}

// TestEndedSince checks the View's log of ends: each read after a mark
// gets what publications since found done with, and a mark the log no
// longer reaches back to is refused.
func TestEndedSince(t *testing.T) {
	h := newHarness(t)
	h.worker("w", 8, 8)
	arr := h.submit(&jobspb.JobSpec{Array: &jobspb.ArraySpec{Text: "0-3"}})
	fails := h.submit(&jobspb.JobSpec{})
	never := h.submit(&jobspb.JobSpec{Deps: []*jobspb.Dependency{{Kind: "afterok", JobId: fails, Index: -1}}})
	read := func(mark uint64) (keys []Key, next uint64, ok bool) {
		h.c.Publish(true)
		h.c.View().Read(func(r *Core) {
			var got []Key
			got, next, ok = r.EndedSince(mark)
			keys = append(keys, got...)
		})
		slices.SortFunc(keys, Key.Compare)
		return keys, next, ok
	}
	_, mark, _ := read(0)
	h.step()
	cases := []struct {
		what string
		do   func()
		want []Key
	}{
		{"started, none ended", func() {}, nil},
		{"two tasks ended", func() {
			h.finish(arr, 0, Completed)
			h.finish(arr, 2, Failed)
			h.step()
		}, []Key{{arr, 0}, {arr, 2}}},
		{"a failure, and the job that can never start", func() {
			h.finish(fails, -1, Failed)
			h.step()
		}, []Key{{fails, -1}, {never, -1}}},
		{"nothing new", func() { h.step() }, nil},
	}
	for _, tc := range cases {
		tc.do()
		got, next, ok := read(mark)
		if !ok || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Fatalf("%s: ended since %d: %v, %v; want %v", tc.what, mark, got, ok, tc.want)
		}
		mark = next
	}
	// Past 2×maxEnds the log keeps the last maxEnds: an older mark, or
	// one it never gave, is refused.
	h.c.View().r.ends = append(h.c.View().r.ends, make([]Key, 2*maxEnds)...)
	h.finish(arr, 1, Completed)
	h.step()
	if got, _, ok := read(mark); ok {
		t.Fatalf("a mark the log dropped: %v, accepted", got)
	}
	_, next, _ := read(0)
	if got, _, ok := read(next + 1); ok {
		t.Fatalf("a mark past the log's end: %v, accepted", got)
	}
	h.finish(arr, 3, Completed)
	h.step()
	if got, _, ok := read(next); !ok || fmt.Sprint(got) != fmt.Sprint([]Key{{arr, 3}}) {
		t.Fatalf("after the log was cut: %v, %v; want %v", got, ok, []Key{{arr, 3}})
	}
}
