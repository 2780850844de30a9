package sched

// Quotas, as Kueue's ClusterQueues have them. A queue may have a nominal
// quota of CPUs, memory and GPUs: what its running jobs take together
// stays within it. Queues that name the same cohort lend each other what
// they leave idle: a job may start past its queue's quota, borrowing, as
// long as the cohort as a whole stays within the sum of its queues' quotas
// and the queue within its borrowing limit. A job starts borrowing or not,
// and is marked so; when a queue needs back what it lent (a job of its own
// fits its quota, but the cohort is full), borrowed jobs of the other
// queues are preempted, youngest first, as any preemption stops a job:
// SIGTERM, the grace, SIGKILL, back to PENDING.

import (
	"fmt"
	"sort"
	"time"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/jobspb"
)

// Resources is an amount of CPUs, memory and GPUs, as a quota or a
// borrowing limit sets it: a negative amount bounds nothing.
type Resources struct {
	CPUs, MemoryBytes, GPUs int64
}

// Unbounded is a Resources that bounds nothing, which a quota that names
// only some resources starts from.
var Unbounded = Resources{-1, -1, -1}

func (r Resources) amounts() amounts { return amounts{r.CPUs, r.MemoryBytes, r.GPUs} }

// amounts are CPUs, bytes of memory and GPUs, indexed as resourceNames.
type amounts [3]int64

var resourceNames = [3]string{"CPUs", "memory", "GPUs"}

// show writes an amount of resource i as its reason says it.
func show(i int, n int64) string {
	if i == 1 {
		return units.Human(n)
	}
	return fmt.Sprint(n)
}

// takes is what one node of j takes from its queue's quota.
func takes(j *job) amounts {
	return amounts{int64(cpusOf(j.spec)), j.spec.MemoryBytes, int64(j.spec.Gpus)}
}

// wants is what j, all the nodes it needs to start, takes from its
// queue's quota.
func wants(j *job) amounts {
	w := takes(j)
	for i := range w {
		w[i] *= int64(minNodesOf(j.spec))
	}
	return w
}

// quotaUse adds (sign 1) or takes away (-1) one node of j from its queue's
// use.
func (c *Core) quotaUse(j *job, sign int64) {
	u := c.queueUsed[j.spec.Queue]
	t := takes(j)
	for i := range u {
		u[i] += sign * t[i]
	}
	c.queueUsed[j.spec.Queue] = u
}

// quotaVerdict is what a queue's quota says of starting a job now.
type quotaVerdict struct {
	reason  string // "" when it may start
	borrows bool   // it may start, past its queue's quota
	// reclaim: it fits its queue's quota, but the cohort is full because
	// other queues borrowed.
	reclaim bool
}

// quota checks j, all its nodes, against its queue's quota and cohort.
func (c *Core) quota(j *job) quotaVerdict {
	if !c.quotas {
		return quotaVerdict{}
	}
	q := c.queues[j.spec.Queue]
	if q.Quota == nil {
		return quotaVerdict{}
	}
	nominal, used, want := q.Quota.amounts(), c.queueUsed[q.Name], wants(j)
	var v quotaVerdict
	for i := range want {
		if nominal[i] < 0 || want[i] == 0 || used[i]+want[i] <= nominal[i] {
			continue
		}
		if q.Cohort == "" {
			return quotaVerdict{reason: fmt.Sprintf("%s: queue %s has %s/%s %s", ReasonQuotaExceeded, q.Name, show(i, used[i]), show(i, nominal[i]), resourceNames[i])}
		}
		if q.BorrowingLimit != nil {
			if limit := q.BorrowingLimit.amounts()[i]; limit >= 0 && used[i]+want[i] > nominal[i]+limit {
				return quotaVerdict{reason: fmt.Sprintf("%s: queue %s has %s/%s %s and may borrow %s more", ReasonQuotaExceeded, q.Name, show(i, used[i]), show(i, nominal[i]), resourceNames[i], show(i, limit))}
			}
		}
		v.borrows = true
	}
	if q.Cohort == "" {
		return v
	}
	if v.borrows {
		// What another queue reclaims is its own: nothing borrows it
		// back while it waits for it.
		for k := range c.preempting {
			if o := c.jobs[k]; o != nil && o.state() == Pending && o.spec.Queue != q.Name && c.queues[o.spec.Queue].Cohort == q.Cohort {
				return quotaVerdict{reason: fmt.Sprintf("%s: queue %s reclaims the quota it lent to cohort %s", ReasonQuotaExceeded, o.spec.Queue, q.Cohort)}
			}
		}
	}
	capacity, inUse := c.cohort(q.Cohort)
	for i := range want {
		if nominal[i] < 0 || want[i] == 0 || inUse[i]+want[i] <= capacity[i] {
			continue
		}
		if !v.borrows {
			return quotaVerdict{reason: fmt.Sprintf("%s: queue %s has %s/%s %s, and lent the rest to its cohort %s, which it reclaims", ReasonQuotaExceeded, q.Name, show(i, used[i]), show(i, nominal[i]), resourceNames[i], q.Cohort), reclaim: true}
		}
		return quotaVerdict{reason: fmt.Sprintf("%s: cohort %s has %s/%s %s in use", ReasonQuotaExceeded, q.Cohort, show(i, inUse[i]), show(i, capacity[i]), resourceNames[i])}
	}
	return v
}

// cohort sums the quotas of the cohort's queues, and what their jobs use,
// per resource, over the queues whose quota bounds it.
func (c *Core) cohort(name string) (capacity, used amounts) {
	for _, q := range c.cohorts[name] {
		n, u := q.Quota.amounts(), c.queueUsed[q.Name]
		for i := range n {
			if n[i] >= 0 {
				capacity[i] += n[i]
				used[i] += u[i]
			}
		}
	}
	return capacity, used
}

// reclaim preempts borrowed jobs of j's cohort, youngest first, from
// queues past their quota, until what they free lets j start within the
// cohort's quotas; it reports whether it found enough. Jobs already
// stopping for j count.
func (c *Core) reclaim(j *job, now time.Time) bool {
	for _, v := range c.preempting[j.key] {
		if v.state() == Running && v.rec.PreemptedBy == j.key.String() {
			return true // they are still stopping
		}
	}
	q := c.queues[j.spec.Queue]
	if c.noLenders[q.Cohort] {
		return false
	}
	capacity, inUse := c.cohort(q.Cohort)
	want := wants(j)
	over := func() bool {
		for i := range want {
			if q.Quota.amounts()[i] >= 0 && want[i] > 0 && inUse[i]+want[i] > capacity[i] {
				return true
			}
		}
		return false
	}
	used := map[string]amounts{}
	var cands []*job
	for _, other := range c.cohorts[q.Cohort] {
		if other.Name != q.Name {
			used[other.Name] = c.queueUsed[other.Name]
		}
	}
	seen := map[Key]bool{}
	for _, r := range c.byTask {
		if _, lender := used[r.spec.Queue]; lender && r.rec.Borrowed && r.rec.PreemptedBy == "" && !seen[r.key] {
			seen[r.key] = true
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		// None borrows in the cohort: no job of it can reclaim this round.
		c.noLenders[q.Cohort] = true
		return false
	}
	sort.Slice(cands, func(a, b int) bool {
		if cands[a].rec.StartUnixMs != cands[b].rec.StartUnixMs {
			return cands[a].rec.StartUnixMs > cands[b].rec.StartUnixMs
		}
		return cands[a].key.ID > cands[b].key.ID || cands[a].key.ID == cands[b].key.ID && cands[a].key.Index > cands[b].key.Index
	})
	var victims []*job
	for _, v := range cands {
		if !over() {
			break
		}
		vq := c.queues[v.spec.Queue]
		u, nominal := used[vq.Name], vq.Quota.amounts()
		t := takes(v)
		past := false
		for i := range u {
			past = past || nominal[i] >= 0 && u[i] > nominal[i]
		}
		if !past {
			continue // its queue is back within its quota
		}
		n := int64(len(v.rec.Nodes))
		for i := range u {
			u[i] -= n * t[i]
			if nominal[i] >= 0 {
				inUse[i] -= n * t[i]
			}
		}
		used[vq.Name] = u
		victims = append(victims, v)
	}
	if over() || len(victims) == 0 {
		return false
	}
	for _, v := range victims {
		v.rec.PreemptedBy = j.key.String()
		c.touch(v)
		c.stopNodes(v, func(m *jobspb.Node) bool { return m.State == "" && m.Assigned })
		c.logs = append(c.logs, logLine(v, fmt.Sprintf("\n[rbs] attempt %d preempted by job %s: queue %s reclaims the quota it lent to queue %s\n", v.rec.Attempts, j.key, q.Name, v.spec.Queue)))
	}
	c.preempting[j.key] = victims
	return true
}

// quotaInfo fills in the quota of each queue that has one: what it is,
// what its running jobs use, and its cohort.
func (c *Core) quotaInfo(qi *jobspb.QueueInfo, q Queue, used amounts) {
	if q.Quota == nil {
		return
	}
	res := func(r Resources) *jobspb.Resources {
		return &jobspb.Resources{Cpus: r.CPUs, MemoryBytes: r.MemoryBytes, Gpus: r.GPUs}
	}
	qi.Quota, qi.Cohort = res(*q.Quota), q.Cohort
	qi.Used = &jobspb.Resources{Cpus: used[0], MemoryBytes: used[1], Gpus: used[2]}
	if q.BorrowingLimit != nil {
		qi.BorrowingLimit = res(*q.BorrowingLimit)
	}
}

// quotaReason is why j waits on quota, "" when it need not; when it
// waits for quota its queue lent, the borrowed jobs are reclaimed.
func (c *Core) quotaReason(j *job, now time.Time) string {
	v := c.quota(j)
	if v.reclaim {
		c.reclaim(j, now)
	}
	return v.reason
}

// borrow marks j, just started past its queue's quota, as borrowing from
// its cohort, and says so in its output.
func (c *Core) borrow(j *job) {
	q := c.queues[j.spec.Queue]
	j.rec.Borrowed = true
	c.logs = append(c.logs, logLine(j, fmt.Sprintf("[rbs] attempt %d borrows quota from cohort %s: queue %s is past its own; it may be reclaimed\n", j.rec.Attempts, q.Cohort, q.Name)))
}
