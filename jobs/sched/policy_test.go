package sched

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
)

// Fair share orders jobs by their users' usage against their shares, as
// Slurm's classic formula does; usage decays with the half-life and
// survives a restart.
func TestFairShare(t *testing.T) {
	h := newHarness(t)
	h.c.cfg.FairShare = &FairShare{
		Weight:   1000,
		HalfLife: time.Hour,
		Accounts: []Account{{Name: "big", Shares: 3, Users: map[string]int64{"alice": 1}}, {Name: "small", Shares: 1, Users: map[string]int64{"bob": 1}}},
	}
	h.worker("w", 4, 4)
	factor := func(user string) float64 {
		h.c.refreshShares(h.now)
		_, f := h.c.fairShare(user)
		return f
	}
	if a, b := factor("alice"), factor("bob"); a != 1 || b != 1 {
		t.Fatalf("factors before any usage: alice %v, bob %v; want 1", a, b)
	}
	// Alice uses two CPUs for ten minutes, Bob one.
	a1 := h.submit(&jobspb.JobSpec{User: "alice"})
	a2 := h.submit(&jobspb.JobSpec{User: "alice"})
	b1 := h.submit(&jobspb.JobSpec{User: "bob"})
	if got := h.step(); len(got) != 3 {
		t.Fatalf("started %v", got)
	}
	h.advance(10 * time.Minute)
	for _, id := range []int64{a1, a2, b1} {
		h.finish(id, -1, Completed)
	}
	h.step()
	// Decayed usage in CPU-seconds: the integral of e^(-λt) over ten
	// minutes, λ = ln2/1h.
	lambda := math.Ln2 / 3600
	one := (1 - math.Exp(-lambda*600)) / lambda
	shares := h.c.Shares()
	got := map[string]*jobspb.AccountShare{}
	for _, a := range shares.Accounts {
		for _, u := range a.Users {
			got[u.Name] = u
		}
	}
	if u := got["alice"]; u == nil || math.Abs(u.CpuSeconds-2*one) > 1e-6 || u.Share != 0.75 {
		t.Fatalf("alice's share: %+v; want %.3f CPU-seconds, share 0.75", u, 2*one)
	}
	// Slurm's classic factor: 2^(-usage/share), usage normalised.
	wantA, wantB := math.Exp2(-(2.0/3)/0.75), math.Exp2(-(1.0/3)/0.25)
	if a, b := factor("alice"), factor("bob"); math.Abs(a-wantA) > 1e-9 || math.Abs(b-wantB) > 1e-9 {
		t.Fatalf("factors: alice %v, bob %v; want %v, %v", a, b, wantA, wantB)
	}
	// Alice used more, but has three times Bob's share: her job, though
	// submitted after his, starts first.
	for range 4 {
		h.submit(&jobspb.JobSpec{User: "carol"})
	}
	h.step()
	bob := h.submit(&jobspb.JobSpec{User: "bob"})
	alice := h.submit(&jobspb.JobSpec{User: "alice"})
	h.step()
	// Carol, in no account, is in the default one, which has a share of
	// its own: big now has 3 of 5.
	wantA = math.Exp2(-(2.0 / 3) / 0.6)
	if p := h.c.priorityOf(h.c.jobs[Key{alice, -1}], h.now); p.FairShare != int64(math.Round(1000*wantA)) || p.Total != p.FairShare {
		t.Fatalf("alice's priority %+v", p)
	}
	h.finish(a2+2, -1, Completed) // a job of carol's
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(alice, "@w") {
		t.Fatalf("started %v, want alice's job %d before bob's %d", got, alice, bob)
	}
	// The usage survives a restart, and has decayed by a half-life an hour
	// on (carol's jobs run on meanwhile, and add hers).
	before := h.c.Shares()
	h.restart()
	if after := h.c.Shares(); fmt.Sprint(after.Accounts) != fmt.Sprint(before.Accounts) {
		t.Fatalf("after a restart:\n%v\nbefore:\n%v", after.Accounts, before.Accounts)
	}
	h.advance(time.Hour)
	for _, a := range h.c.Shares().Accounts {
		for _, u := range a.Users {
			if u.Name == "bob" && math.Abs(u.CpuSeconds-one/2) > 1e-6 {
				t.Fatalf("bob's usage an hour on: %v, want half of %v", u.CpuSeconds, one)
			}
		}
	}
}

// Queues of one cohort lend each other their idle quota, and take it back
// by preempting borrowed jobs when their own need it.
func TestQuotaBorrowAndReclaim(t *testing.T) {
	quota := func(cpus int64) *Resources { return &Resources{CPUs: cpus, MemoryBytes: -1, GPUs: -1} }
	h := newHarness(t,
		Queue{Name: "a", Default: true, Quota: quota(2), Cohort: "c"},
		Queue{Name: "b", Quota: quota(2), Cohort: "c"},
		Queue{Name: "solo", Quota: quota(1)},
		Queue{Name: "thrifty", Quota: quota(1), Cohort: "d", BorrowingLimit: quota(1)},
		Queue{Name: "lender", Quota: quota(4), Cohort: "d"},
	)
	h.worker("w", 16, 16)
	var a []int64
	for range 5 {
		a = append(a, h.submit(&jobspb.JobSpec{}))
		h.step()
		h.advance(time.Second)
	}
	for i, id := range a {
		r := h.rec(id, -1)
		switch {
		case i < 2 && (r.State != string(Running) || r.Borrowed):
			t.Fatalf("job %d within the quota: %s, borrowed %v", i, r.State, r.Borrowed)
		case i >= 2 && i < 4 && (r.State != string(Running) || !r.Borrowed):
			t.Fatalf("job %d past the quota: %s, borrowed %v", i, r.State, r.Borrowed)
		case i == 4 && r.PendingReason != "QuotaExceeded: cohort c has 4/4 CPUs in use":
			t.Fatalf("the fifth job waits for %q", r.PendingReason)
		}
	}
	// Queue b wants its quota back: the youngest borrowed job stops.
	b := h.submit(&jobspb.JobSpec{Queue: "b"})
	if stops := h.cancels(); len(stops) != 1 || stops[0] != taskID(h.c.jobs[Key{a[3], -1}]) {
		t.Fatalf("stopped %v, want the youngest borrowed job %d", stops, a[3])
	}
	if r := h.rec(b, -1).PendingReason; !strings.HasPrefix(r, "QuotaExceeded: queue b has 0/2 CPUs, and lent the rest to its cohort c") {
		t.Fatalf("b waits for %q", r)
	}
	h.stopped(a[3])
	if got := h.step(); len(got) != 1 || got[0] != fmt.Sprint(b, "@w") {
		t.Fatalf("started %v, want b's job", got)
	}
	if r := h.rec(a[3], -1); r.State != string(Pending) || !strings.HasPrefix(r.PendingReason, ReasonQuotaExceeded) {
		t.Fatalf("the reclaimed job: %s %q", r.State, r.PendingReason)
	}
	for _, qi := range h.c.Queues() {
		if qi.Name == "a" && (qi.Used.GetCpus() != 3 || qi.Quota.GetCpus() != 2 || qi.Cohort != "c") {
			t.Fatalf("queue a: %v", qi)
		}
	}
	// Without a cohort a quota is a cap; a borrowing limit caps borrowing.
	for range 2 {
		h.submit(&jobspb.JobSpec{Queue: "solo"})
	}
	for range 3 {
		h.submit(&jobspb.JobSpec{Queue: "thrifty"})
	}
	h.step()
	reasons := map[string]bool{}
	for _, j := range h.c.pending {
		reasons[j.rec.PendingReason] = true
	}
	for _, want := range []string{"QuotaExceeded: queue solo has 1/1 CPUs", "QuotaExceeded: queue thrifty has 2/1 CPUs and may borrow 1 more"} {
		if !reasons[want] {
			t.Fatalf("no job waits for %q: %v", want, reasons)
		}
	}
}

// A packed gang goes to one rack when one has room, waits for one when the
// pack is required, and else spreads.
func TestPackedGangs(t *testing.T) {
	h := newHarness(t)
	up := func(name string, cpus int32, props ...string) {
		h.c.WorkerUp(WorkerInfo{Name: name, CPUs: cpus, Memory: 8 << 30, JobSlots: 4, Properties: props}, holding())
	}
	up("w1", 4, "rack=r1")
	up("w2", 4, "rack=r1")
	up("w3", 2, "rack=r2")
	up("w4", 2) // a domain of its own
	gang := func(pack string, required bool) int64 {
		return h.submit(&jobspb.JobSpec{Nodes: 2, Pack: pack, PackRequired: required})
	}
	nodes := func(id int64) string { return nodeList(h.rec(id, -1).Nodes) }
	// Unpacked, the tightest fit takes the small worker of the other rack.
	loose := gang("", false)
	h.step()
	if got := nodes(loose); got != "w3,w4" {
		t.Fatalf("an unpacked gang ran on %s", got)
	}
	h.finish(loose, -1, Completed)
	packedGang := gang("rack", false)
	h.step()
	if got := nodes(packedGang); got != "w1,w2" {
		t.Fatalf("a packed gang ran on %s, want one rack", got)
	}
	// Rack r1 full: a required pack waits, another spreads.
	busy := h.submit(&jobspb.JobSpec{Cpus: 3, Nodes: 2, Pack: "rack"})
	h.step()
	if got := nodes(busy); got != "w1,w2" {
		t.Fatalf("the second packed gang ran on %q", got)
	}
	required := gang("rack", true)
	h.step()
	if r := h.rec(required, -1); r.State != string(Pending) || r.PendingReason != "Topology: no rack has 2 free workers that fit the job (the most: 1)" {
		t.Fatalf("the required pack: %s %q", r.State, r.PendingReason)
	}
	spread := gang("rack", false)
	h.step()
	if r := h.rec(spread, -1); r.State != string(Running) {
		t.Fatalf("the gang that may spread: %s %q", r.State, r.PendingReason)
	}
	// No rack could ever hold a required pack of three.
	never := h.submit(&jobspb.JobSpec{Nodes: 3, Pack: "rack", PackRequired: true})
	h.step()
	if r := h.rec(never, -1).PendingReason; r != "Topology: no rack has 3 workers that could run the job (the most: 2)" {
		t.Fatalf("a pack no rack holds waits for %q", r)
	}
}
