package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/jobspb"
)

func elapsed(r *jobspb.JobRecord) string {
	if r.StartUnixMs == 0 {
		return spec.FormatDuration(0)
	}
	end := time.Now()
	if r.EndUnixMs != 0 {
		end = time.UnixMilli(r.EndUnixMs)
	}
	return spec.FormatDuration(end.Sub(time.UnixMilli(r.StartUnixMs)))
}

// printJobTable prints jobs one a line, as squeue does: the pending tasks of
// an array that wait for the same reason at the same priority share a line,
// with their indices in brackets, such as 42_[5-99%10].
func printJobTable(w io.Writer, jobs []*jobspb.JobInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOBID\tNAME\tUSER\tQUEUE\tSTATE\tTIME\tPRIORITY\tWORKER/REASON")
	for i := 0; i < len(jobs); {
		j, r := jobs[i], jobs[i].Record
		id, n := j.Id, samePending(jobs[i:])
		if n > 1 {
			a := spec.Array{Limit: int(r.Spec.GetArray().GetLimit())}
			for _, t := range jobs[i : i+n] {
				a.Indices = append(a.Indices, int(t.Record.Index))
			}
			id = fmt.Sprintf("%d_[%s]", r.Id, a)
		}
		where := r.Worker
		if r.State == "PENDING" {
			where = "(" + r.PendingReason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", id, r.Spec.Name, r.Spec.GetUser(), r.Spec.Queue, r.State, elapsed(r), j.Priority.GetTotal(), where)
		i += n
	}
	tw.Flush()
}

// samePending is how many leading jobs are pending tasks of one array with
// the same reason and priority as the first; 1 when the first is not a
// pending task.
func samePending(jobs []*jobspb.JobInfo) int {
	first := jobs[0].Record
	if first.Index < 0 || first.State != "PENDING" {
		return 1
	}
	n := 1
	for n < len(jobs) {
		r := jobs[n].Record
		if r.Id != first.Id || r.Index < 0 || r.State != "PENDING" || r.PendingReason != first.PendingReason ||
			jobs[n].Priority.GetTotal() != jobs[0].Priority.GetTotal() {
			break
		}
		n++
	}
	return n
}

func printJobDetail(w io.Writer, j *jobspb.JobInfo) {
	r, s := j.Record, j.Record.Spec
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...) }
	row("JobId:", "%s", j.Id)
	row("Name:", "%s", s.Name)
	row("Queue:", "%s", s.Queue)
	state := r.State
	if r.State == "PENDING" && r.PendingReason != "" {
		state += " (" + r.PendingReason + ")"
	}
	row("State:", "%s", state)
	if s.User != "" {
		row("User:", "%s", s.User)
	}
	if len(j.Sweep) > 0 {
		row("Sweep:", "%s", strings.Join(j.Sweep, ", "))
	}
	if r.CachedFrom != "" {
		row("Cache:", "cached from job %s: its result, outputs and output, without running", r.CachedFrom)
	} else if p := s.Cache; p == jobspb.CachePolicy_CACHE_ON || p == jobspb.CachePolicy_CACHE_REFRESH {
		row("Cache:", "%s", schema.CachePolicy(p))
	}
	if j.QueuePosition > 0 {
		row("Position:", "%d in queue %s", j.QueuePosition, s.Queue)
	}
	if r.State == "PENDING" {
		start := "unknown"
		if j.StartUnknown != "" {
			start += ": " + j.StartUnknown
		}
		if at := schema.Time(j.ExpectedStartUnixMs); at != nil {
			start = *at
			if d := time.Until(time.UnixMilli(j.ExpectedStartUnixMs)); d > 0 {
				start += " (in " + spec.FormatDuration(d.Round(time.Second)) + ", by the time limits)"
			} else {
				start += " (now: it fits)"
			}
		}
		row("Starts:", "%s", start)
	}
	p := j.Priority
	if p.GetFairShareFactor() > 0 {
		row("Priority:", "%d (base %d + queue %d + age %d + fair share %d, factor %.3f)", p.GetTotal(), p.GetBase(), p.GetQueue(), p.GetAge(), p.GetFairShare(), p.GetFairShareFactor())
	} else {
		row("Priority:", "%d (base %d + queue %d + age %d)", p.GetTotal(), p.GetBase(), p.GetQueue(), p.GetAge())
	}
	if s.Script != "" {
		row("Command:", "script (%d bytes)", len(s.Script))
	} else {
		row("Command:", "%s", schema.CommandLine(s.Command))
	}
	mem := "-"
	if s.MemoryBytes > 0 {
		mem = units.Human(s.MemoryBytes)
	}
	row("Resources:", "cpus=%d memory=%s gpus=%d", max(s.Cpus, 1), mem, s.Gpus)
	limit := "none"
	if r.TimeLimitMs > 0 {
		limit = spec.FormatDuration(time.Duration(r.TimeLimitMs) * time.Millisecond)
	}
	row("TimeLimit:", "%s", limit)
	if s.Platform != "" {
		row("Platform:", "%s", s.Platform)
	}
	if s.Nodes > 1 {
		row("Nodes:", "%d", s.Nodes)
	}
	if s.Pack != "" {
		how := "as few as it can"
		if s.PackRequired {
			how = "one, required"
		}
		row("Pack:", "by %s: %s", s.Pack, how)
	}
	if r.Borrowed {
		row("Quota:", "borrowed from queue %s's cohort; may be reclaimed", s.Queue)
	}
	switch {
	case len(r.Nodes) > 1:
		for _, n := range r.Nodes {
			row("Worker:", "rank %d: %s%s", n.Rank, n.Worker, gpusText(n.GpuIndices, n.GpuUuids))
		}
	case len(r.Nodes) == 1:
		row("Worker:", "%s%s", r.Worker, gpusText(r.Nodes[0].GpuIndices, r.Nodes[0].GpuUuids))
	case r.Worker != "":
		row("Worker:", "%s%s", r.Worker, gpusText(r.GpuIndices, nil))
	}
	for _, p := range j.Placement {
		row("Placement:", "%s", p)
	}
	for _, d := range j.Deps {
		never := ""
		if d.NeverSatisfied {
			never = ", can never be satisfied"
		}
		row("Dependency:", "%s:%s (%s%s)", d.Kind, d.Id, d.State, never)
	}
	if r.Index >= 0 {
		row("Array:", "task %d of %s", r.Index, s.Array.GetText())
	}
	row("Attempts:", "%d", r.Attempts)
	if s.MaxRetries > 0 {
		row("MaxRetries:", "%d", s.MaxRetries)
	}
	for _, a := range r.History {
		row("Attempt:", "%s", attemptText(a))
	}
	if s.CheckpointDir != "" {
		root := "none recorded yet"
		if r.CheckpointRoot != "" {
			root = r.CheckpointRoot
		}
		row("Checkpoint:", "%s (%s)", s.CheckpointDir, root)
	}
	if r.State != "PENDING" && r.State != "RUNNING" {
		row("ExitCode:", "%d", r.ExitCode)
	}
	if r.CpuTimeMs > 0 {
		row("CPUTime:", "%s", spec.FormatDuration(time.Duration(r.CpuTimeMs)*time.Millisecond))
	}
	if r.PeakMemoryBytes > 0 || r.OomKilled {
		row("PeakMemory:", "%s (oom_killed=%v)", units.Human(r.PeakMemoryBytes), r.OomKilled)
	}
	if r.OutputDroppedBytes > 0 {
		row("Output:", "%d bytes, truncated: %d bytes between the head and the tail dropped over the server's --max-job-output", r.OutputBytes, r.OutputDroppedBytes)
	} else if r.OutputBytes > 0 {
		row("Output:", "%d bytes", r.OutputBytes)
	}
	for _, t := range []struct {
		k  string
		ms int64
	}{{"SubmitTime:", r.SubmitUnixMs}, {"StartTime:", r.StartUnixMs}, {"EndTime:", r.EndUnixMs}} {
		if v := schema.Time(t.ms); v != nil {
			row(t.k, "%s", *v)
		}
	}
	for _, o := range r.Outputs {
		row("Outputs:", "%s (%s, %s)", o.Path, o.Kind, units.Human(o.SizeBytes))
	}
	if r.Message != "" {
		row("Message:", "%s", r.Message)
	}
	tw.Flush()
}

// attemptText is one ended attempt as a row of `rbs job show`: "2
// FAILED exit=1 worker=w1 start=... end=...: message".
// gpusText is " gpus=[0 1]", with the UUIDs known ("0=GPU-1f2e..."), or
// "" for none.
func gpusText(gpus []int32, uuids []string) string {
	if len(gpus) == 0 {
		return ""
	}
	var parts []string
	for i, g := range gpus {
		p := strconv.Itoa(int(g))
		if i < len(uuids) && uuids[i] != "" {
			p += "=" + uuids[i]
		}
		parts = append(parts, p)
	}
	return " gpus=[" + strings.Join(parts, " ") + "]"
}

func attemptText(a *jobspb.Attempt) string {
	t := fmt.Sprintf("%d %s exit=%d", a.Attempt, a.State, a.ExitCode)
	switch {
	case len(a.Workers) > 1:
		t += " workers=" + strings.Join(a.Workers, ",")
	case a.Worker != "":
		t += " worker=" + a.Worker
	}
	for _, at := range []struct {
		k  string
		ms int64
	}{{"start", a.StartUnixMs}, {"end", a.EndUnixMs}} {
		if v := schema.Time(at.ms); v != nil {
			t += " " + at.k + "=" + *v
		}
	}
	if a.Message != "" {
		t += ": " + a.Message
	}
	return t
}

func printQueues(w io.Writer, queues []*jobspb.QueueInfo) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	quotas := slices.ContainsFunc(queues, func(q *jobspb.QueueInfo) bool { return q.Quota != nil })
	head := "QUEUE\tPRIORITY\tMAX TIME\tRUNNING\tPENDING"
	if quotas {
		head += "\tUSED/QUOTA\tCOHORT"
	}
	fmt.Fprintln(tw, head)
	for _, q := range queues {
		name := q.Name
		if q.IsDefault {
			name += "*"
		}
		limit := "none"
		if q.MaxTimeMs > 0 {
			limit = spec.FormatDuration(time.Duration(q.MaxTimeMs) * time.Millisecond)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d", name, q.Priority, limit, q.Running, q.Pending)
		if quotas {
			fmt.Fprintf(tw, "\t%s\t%s", quotaText(q), cmp.Or(q.Cohort, "-"))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// quotaText is what a queue uses of its quota, "3/2 cpus 0/8 gpus" ("-"
// without a quota), with how much more it may borrow where that is
// bounded.
func quotaText(q *jobspb.QueueInfo) string {
	if q.Quota == nil {
		return "-"
	}
	var parts []string
	add := func(name string, used, quota, borrow int64, show func(int64) string) {
		if quota < 0 {
			return
		}
		t := show(used) + "/" + show(quota) + " " + name
		if borrow >= 0 && q.BorrowingLimit != nil {
			t += " (+" + show(borrow) + ")"
		}
		parts = append(parts, t)
	}
	count := func(n int64) string { return strconv.FormatInt(n, 10) }
	b := q.BorrowingLimit
	if b == nil {
		b = &jobspb.Resources{Cpus: -1, MemoryBytes: -1, Gpus: -1}
	}
	add("cpus", q.Used.GetCpus(), q.Quota.Cpus, b.Cpus, count)
	add("memory", q.Used.GetMemoryBytes(), q.Quota.MemoryBytes, b.MemoryBytes, units.Human)
	add("gpus", q.Used.GetGpus(), q.Quota.Gpus, b.Gpus, count)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// printShares prints fair share as a table: each account, then its users
// indented under it.
func printShares(w io.Writer, r *jobspb.SharesResponse) {
	fmt.Fprintf(w, "Usage half-life %s; fair-share weight %d\n", spec.FormatDuration(time.Duration(r.HalfLifeMs)*time.Millisecond), r.Weight)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT/USER\tSHARES\tSHARE\tCPU-S\tGIB-S\tGPU-S\tUSAGE\tEFFECTIVE\tFACTOR")
	line := func(name string, a *jobspb.AccountShare) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.0f\t%.0f\t%.0f\t%.3f\t%.3f\t%.3f\n", name, a.Shares, a.Share, a.CpuSeconds, a.MemoryGibSeconds, a.GpuSeconds, a.Usage, a.EffectiveUsage, a.Factor)
	}
	for _, a := range r.Accounts {
		line(a.Name, a)
		for _, u := range a.Users {
			line("  "+u.Name, u)
		}
	}
	tw.Flush()
}

// printReservations lists maintenance windows as a table, or as JSON.
func printReservations(w io.Writer, rs []*jobspb.Reservation, asJSON bool, now time.Time) error {
	if asJSON {
		return schema.Write(w, schema.Reservations(rs, now))
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTART\tEND\tSTATE\tWORKERS\tREASON")
	for _, r := range rs {
		state := "upcoming"
		if r.StartUnixMs <= now.UnixMilli() {
			state = "active"
		}
		workers := strings.Join(r.Workers, ",")
		if workers == "" {
			workers = "all"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, *schema.Time(r.StartUnixMs), *schema.Time(r.EndUnixMs), state, workers, r.Reason)
	}
	return tw.Flush()
}
