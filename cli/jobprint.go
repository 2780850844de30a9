package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
)

// jobJSON is a job in `--json` output; its keys are stable.
type jobJSON struct {
	ID                 string            `json:"id"`
	JobID              int64             `json:"job_id"`
	ArrayIndex         *int32            `json:"array_index"`
	Array              string            `json:"array,omitempty"`
	Name               string            `json:"name"`
	Queue              string            `json:"queue"`
	State              string            `json:"state"`
	PendingReason      string            `json:"pending_reason"`
	Priority           priorityJSON      `json:"priority"`
	Command            []string          `json:"command"`
	CPUs               int32             `json:"cpus"`
	MemoryBytes        int64             `json:"memory_bytes"`
	GPUs               int32             `json:"gpus"`
	GPUIndices         []int32           `json:"gpu_indices"`
	TimeLimitSecs      int64             `json:"time_limit_seconds"`
	Dependencies       []depJSON         `json:"dependencies"`
	Attempts           int32             `json:"attempts"`
	ExitCode           int32             `json:"exit_code"`
	PeakMemoryBytes    int64             `json:"peak_memory_bytes"`
	OOMKilled          bool              `json:"oom_killed"`
	OutputBytes        int64             `json:"output_bytes"`
	OutputTruncated    bool              `json:"output_truncated"`
	OutputDroppedBytes int64             `json:"output_dropped_bytes"`
	Workers            []string          `json:"workers"`
	Nodes              int32             `json:"nodes"`
	Ranks              []rankJSON        `json:"ranks"`
	Placement          []string          `json:"placement,omitempty"`
	QueuePosition      int32             `json:"queue_position,omitempty"`
	ExpectedStart      *string           `json:"expected_start,omitempty"`
	User               string            `json:"user"`
	CPUTimeSecs        float64           `json:"cpu_time_seconds"`
	SubmitTime         *string           `json:"submit_time"`
	StartTime          *string           `json:"start_time"`
	EndTime            *string           `json:"end_time"`
	NoRequeue          bool              `json:"no_requeue"`
	Message            string            `json:"message,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	InputRoot          string            `json:"input_root,omitempty"`
	Platform           string            `json:"platform,omitempty"`
	OutputPaths        []string          `json:"output_paths,omitempty"`
	OutputRoot         string            `json:"output_root,omitempty"`
	Outputs            []outputJSON      `json:"outputs,omitempty"`
	MaxRetries         int32             `json:"max_retries"`
	CheckpointDir      string            `json:"checkpoint_dir,omitempty"`
	CheckpointRoot     string            `json:"checkpoint_root,omitempty"`
	History            []attemptJSON     `json:"history"`
}

// attemptJSON is one ended attempt of a job.
type attemptJSON struct {
	Attempt   int32    `json:"attempt"`
	Worker    string   `json:"worker"`
	Workers   []string `json:"workers,omitempty"`
	State     string   `json:"state"`
	ExitCode  int32    `json:"exit_code"`
	StartTime *string  `json:"start_time"`
	EndTime   *string  `json:"end_time"`
	Message   string   `json:"message,omitempty"`
}

// rankJSON is one node of a job's attempt: its worker and the GPUs it
// holds there.
type rankJSON struct {
	Rank       int32    `json:"rank"`
	Worker     string   `json:"worker"`
	GPUIndices []int32  `json:"gpu_indices"`
	GPUUUIDs   []string `json:"gpu_uuids"`
}

type outputJSON struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	SizeBytes int64  `json:"size_bytes"`
}

type priorityJSON struct {
	Base  int64 `json:"base"`
	Queue int64 `json:"queue"`
	Age   int64 `json:"age"`
	Total int64 `json:"total"`
}

type depJSON struct {
	Kind           string `json:"kind"`
	ID             string `json:"id"`
	State          string `json:"state"`
	NeverSatisfied bool   `json:"never_satisfied"`
}

type jobQueueJSON struct {
	Name           string `json:"name"`
	Priority       int32  `json:"priority"`
	MaxTimeSeconds int64  `json:"max_time_seconds"`
	Running        int32  `json:"running"`
	Pending        int32  `json:"pending"`
	Default        bool   `json:"default"`
}

func rfc3339(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

func toJobJSON(j *jobspb.JobInfo) jobJSON {
	r := j.Record
	s := r.Spec
	out := jobJSON{
		ID: j.Id, JobID: r.Id, Name: s.Name, Queue: s.Queue, State: r.State, PendingReason: r.PendingReason,
		Priority: priorityJSON{j.Priority.GetBase(), j.Priority.GetQueue(), j.Priority.GetAge(), j.Priority.GetTotal()},
		Command:  s.Command, CPUs: max(s.Cpus, 1), MemoryBytes: s.MemoryBytes, GPUs: s.Gpus, GPUIndices: r.GpuIndices,
		TimeLimitSecs: r.TimeLimitMs / 1000, Dependencies: []depJSON{}, Attempts: r.Attempts, ExitCode: r.ExitCode,
		PeakMemoryBytes: r.PeakMemoryBytes, OOMKilled: r.OomKilled, Workers: []string{},
		OutputBytes: r.OutputBytes, OutputTruncated: r.OutputDroppedBytes > 0, OutputDroppedBytes: r.OutputDroppedBytes,
		SubmitTime: rfc3339(r.SubmitUnixMs), StartTime: rfc3339(r.StartUnixMs), EndTime: rfc3339(r.EndUnixMs),
		NoRequeue: s.NoRequeue, Message: r.Message, Env: s.Env,
		InputRoot: s.InputRoot, Platform: s.Platform, OutputPaths: s.Outputs, OutputRoot: r.OutputRoot,
		MaxRetries: s.MaxRetries, CheckpointDir: s.CheckpointDir, CheckpointRoot: r.CheckpointRoot, History: []attemptJSON{},
	}
	for _, a := range r.History {
		out.History = append(out.History, attemptJSON{a.Attempt, a.Worker, a.Workers, a.State, a.ExitCode, rfc3339(a.StartUnixMs), rfc3339(a.EndUnixMs), a.Message})
	}
	for _, o := range r.Outputs {
		out.Outputs = append(out.Outputs, outputJSON{o.Path, o.Kind, o.SizeBytes})
	}
	if out.Command == nil {
		out.Command = []string{}
	}
	if out.GPUIndices == nil {
		out.GPUIndices = []int32{}
	}
	if r.Index >= 0 {
		idx := r.Index
		out.ArrayIndex = &idx
		out.Array = s.Array.GetText()
	}
	out.Workers = workersOf(r)
	out.Ranks = []rankJSON{}
	for _, n := range r.Nodes {
		rj := rankJSON{Rank: n.Rank, Worker: n.Worker, GPUIndices: n.GpuIndices, GPUUUIDs: n.GpuUuids}
		if rj.GPUIndices == nil {
			rj.GPUIndices, rj.GPUUUIDs = []int32{}, []string{}
		}
		out.Ranks = append(out.Ranks, rj)
	}
	out.Nodes, out.Placement = max(s.Nodes, 1), j.Placement
	out.QueuePosition, out.ExpectedStart = j.QueuePosition, rfc3339(j.ExpectedStartUnixMs)
	out.User, out.CPUTimeSecs = s.User, float64(r.CpuTimeMs)/1000
	for _, d := range j.Deps {
		out.Dependencies = append(out.Dependencies, depJSON{d.Kind, d.Id, d.State, d.NeverSatisfied})
	}
	return out
}

func jobsJSON(jobs []*jobspb.JobInfo) []jobJSON {
	out := []jobJSON{}
	for _, j := range jobs {
		out = append(out, toJobJSON(j))
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

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
	if j.QueuePosition > 0 {
		row("Position:", "%d in queue %s", j.QueuePosition, s.Queue)
	}
	if r.State == "PENDING" {
		start := "unknown (something ahead of it has no time limit, it waits on a dependency, or too much waits ahead)"
		if at := rfc3339(j.ExpectedStartUnixMs); at != nil {
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
	row("Priority:", "%d (base %d + queue %d + age %d)", p.GetTotal(), p.GetBase(), p.GetQueue(), p.GetAge())
	if s.Script != "" {
		row("Command:", "script (%d bytes)", len(s.Script))
	} else {
		row("Command:", "%s", strings.Join(s.Command, " "))
	}
	mem := "-"
	if s.MemoryBytes > 0 {
		mem = fmt.Sprintf("%.1fGiB", float64(s.MemoryBytes)/(1<<30))
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
		row("PeakMemory:", "%.1fMiB (oom_killed=%v)", float64(r.PeakMemoryBytes)/(1<<20), r.OomKilled)
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
		if v := rfc3339(t.ms); v != nil {
			row(t.k, "%s", *v)
		}
	}
	for _, o := range r.Outputs {
		row("Outputs:", "%s (%s, %s)", o.Path, o.Kind, byteSize(o.SizeBytes))
	}
	if r.Message != "" {
		row("Message:", "%s", r.Message)
	}
	tw.Flush()
}

// attemptText is one ended attempt as a row of `rbs job show`: "2
// FAILED exit=1 worker=w1 start=... end=...: message".
// workersOf lists the workers of a job's attempt, in rank order.
func workersOf(r *jobspb.JobRecord) []string {
	out := []string{}
	for _, n := range r.Nodes {
		out = append(out, n.Worker)
	}
	if len(out) == 0 && r.Worker != "" {
		out = append(out, r.Worker)
	}
	return out
}

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
		if v := rfc3339(at.ms); v != nil {
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
	fmt.Fprintln(tw, "QUEUE\tPRIORITY\tMAX TIME\tRUNNING\tPENDING")
	for _, q := range queues {
		name := q.Name
		if q.IsDefault {
			name += "*"
		}
		limit := "none"
		if q.MaxTimeMs > 0 {
			limit = spec.FormatDuration(time.Duration(q.MaxTimeMs) * time.Millisecond)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\n", name, q.Priority, limit, q.Running, q.Pending)
	}
	tw.Flush()
}

// reservationJSON is a maintenance window as --json prints it.
type reservationJSON struct {
	Name    string   `json:"name"`
	Start   *string  `json:"start"`
	End     *string  `json:"end"`
	Reason  string   `json:"reason,omitempty"`
	Workers []string `json:"workers"`
	Active  bool     `json:"active"`
}

// printReservations lists maintenance windows as a table, or as JSON.
func printReservations(w io.Writer, rs []*jobspb.Reservation, asJSON bool, now time.Time) error {
	if asJSON {
		out := []reservationJSON{}
		for _, r := range rs {
			workers := r.Workers
			if workers == nil {
				workers = []string{}
			}
			out = append(out, reservationJSON{r.Name, rfc3339(r.StartUnixMs), rfc3339(r.EndUnixMs), r.Reason, workers, r.StartUnixMs <= now.UnixMilli()})
		}
		return printJSON(w, out)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, *rfc3339(r.StartUnixMs), *rfc3339(r.EndUnixMs), state, workers, r.Reason)
	}
	return tw.Flush()
}
