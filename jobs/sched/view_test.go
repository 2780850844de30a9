package sched

import (
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/protobuf/proto"
)

// same fails unless the View answers List, Show, Queues, Counts and the
// job slots in use exactly as the Core does.
func (h *harness) same(what string) {
	h.t.Helper()
	h.c.Publish(true)
	c := h.c
	all := Filter{History: true}
	want, wantQ, wantN, wantS := c.List(all), c.Queues(), c.Counts(), c.JobSlotsUsed()
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
