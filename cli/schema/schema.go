// Package schema is the one JSON schema of what rbs says to programs: the
// CLI's --json (rbs job list/show/queues/reserve/cancel, rbs remote status)
// and the dashboard's web API under /api/ encode through it, so both give
// the same keys for the same things. Keys are snake_case and stable; counts
// and sizes are JSON numbers; times are RFC 3339 strings (UTC, to the
// millisecond), null until they happen; durations are *_seconds or *_ms.
package schema

import (
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// Job is one job, or one task of an array.
type Job struct {
	ID                 string            `json:"id"`
	JobID              int64             `json:"job_id"`
	ArrayIndex         *int32            `json:"array_index"`
	Array              string            `json:"array,omitempty"`
	Name               string            `json:"name"`
	Queue              string            `json:"queue"`
	State              string            `json:"state"`
	PendingReason      string            `json:"pending_reason"`
	Priority           Priority          `json:"priority"`
	Command            []string          `json:"command"`
	CommandLine        string            `json:"command_line"`
	ScriptBytes        int               `json:"script_bytes,omitempty"`
	CPUs               int32             `json:"cpus"`
	MemoryBytes        int64             `json:"memory_bytes"`
	GPUs               int32             `json:"gpus"`
	GPUIndices         []int32           `json:"gpu_indices"`
	TimeLimitSecs      int64             `json:"time_limit_seconds"`
	Dependencies       []Dependency      `json:"dependencies"`
	Attempts           int32             `json:"attempts"`
	ExitCode           int32             `json:"exit_code"`
	PeakMemoryBytes    int64             `json:"peak_memory_bytes"`
	OOMKilled          bool              `json:"oom_killed"`
	OutputBytes        int64             `json:"output_bytes"`
	OutputTruncated    bool              `json:"output_truncated"`
	OutputDroppedBytes int64             `json:"output_dropped_bytes"`
	Workers            []string          `json:"workers"`
	Nodes              int32             `json:"nodes"`
	Ranks              []Rank            `json:"ranks"`
	Placement          []string          `json:"placement,omitempty"`
	QueuePosition      int32             `json:"queue_position,omitempty"`
	ExpectedStart      *string           `json:"expected_start,omitempty"`
	StartUnknown       string            `json:"start_unknown,omitempty"`
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
	Outputs            []Output          `json:"outputs,omitempty"`
	MaxRetries         int32             `json:"max_retries"`
	CheckpointDir      string            `json:"checkpoint_dir,omitempty"`
	CheckpointRoot     string            `json:"checkpoint_root,omitempty"`
	History            []Attempt         `json:"history"`
	// Pack is the topology label a gang is packed by; Borrowed says its
	// running attempt uses quota borrowed from its queue's cohort.
	Pack         string `json:"pack,omitempty"`
	PackRequired bool   `json:"pack_required,omitempty"`
	Borrowed     bool   `json:"borrowed"`
	// Cache is the job cache's policy for the job: on, off or refresh;
	// CacheKey its key once worked out; CachedFrom the job whose result it
	// was answered with from the cache, without running.
	Cache      string `json:"cache"`
	CacheKey   string `json:"cache_key,omitempty"`
	CachedFrom string `json:"cached_from,omitempty"`
	// Sweep is a sweep task's values, NAME=VALUE.
	Sweep []string `json:"sweep,omitempty"`
}

// Attempt is one ended attempt of a job.
type Attempt struct {
	Attempt   int32    `json:"attempt"`
	Worker    string   `json:"worker"`
	Workers   []string `json:"workers,omitempty"`
	State     string   `json:"state"`
	ExitCode  int32    `json:"exit_code"`
	StartTime *string  `json:"start_time"`
	EndTime   *string  `json:"end_time"`
	Message   string   `json:"message,omitempty"`
}

// Rank is one node of a job's attempt: its worker and the GPUs it holds
// there.
type Rank struct {
	Rank       int32    `json:"rank"`
	Worker     string   `json:"worker"`
	GPUIndices []int32  `json:"gpu_indices"`
	GPUUUIDs   []string `json:"gpu_uuids"`
}

// Output is one recorded output of a job.
type Output struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	SizeBytes int64  `json:"size_bytes"`
}

// Priority is a job's priority and what it is made of.
type Priority struct {
	Base            int64   `json:"base"`
	Queue           int64   `json:"queue"`
	Age             int64   `json:"age"`
	FairShare       int64   `json:"fair_share"`
	FairShareFactor float64 `json:"fair_share_factor"`
	Total           int64   `json:"total"`
}

// Dependency is what a job runs after, and how that job stands.
type Dependency struct {
	Kind           string `json:"kind"`
	ID             string `json:"id"`
	State          string `json:"state"`
	NeverSatisfied bool   `json:"never_satisfied"`
}

// Queue is a queue and its occupancy.
type Queue struct {
	Name           string `json:"name"`
	Priority       int32  `json:"priority"`
	MaxTimeSeconds int64  `json:"max_time_seconds"`
	Running        int32  `json:"running"`
	Pending        int32  `json:"pending"`
	Default        bool   `json:"default"`
	// Quota, Used and BorrowingLimit are set for a queue with a quota.
	Quota          *Resources `json:"quota,omitempty"`
	Used           *Resources `json:"used,omitempty"`
	BorrowingLimit *Resources `json:"borrowing_limit,omitempty"`
	Cohort         string     `json:"cohort,omitempty"`
}

// Resources is an amount of CPUs, memory and GPUs; in a quota, -1 bounds
// nothing.
type Resources struct {
	CPUs        int64 `json:"cpus"`
	MemoryBytes int64 `json:"memory_bytes"`
	GPUs        int64 `json:"gpus"`
}

func resources(r *jobspb.Resources) *Resources {
	if r == nil {
		return nil
	}
	return &Resources{r.Cpus, r.MemoryBytes, r.Gpus}
}

// Share is an account's or a user's fair share: shares, usage (decayed
// CPU-, GiB-of-memory- and GPU-seconds, and their billed sum) and the
// factor it puts in priorities.
type Share struct {
	Name             string  `json:"name"`
	Shares           int64   `json:"shares"`
	Share            float64 `json:"share"`
	CPUSeconds       float64 `json:"cpu_seconds"`
	MemoryGiBSeconds float64 `json:"memory_gib_seconds"`
	GPUSeconds       float64 `json:"gpu_seconds"`
	BillingSeconds   float64 `json:"billing_seconds"`
	Usage            float64 `json:"usage"`
	EffectiveUsage   float64 `json:"effective_usage"`
	Factor           float64 `json:"factor"`
	Users            []Share `json:"users,omitempty"`
}

// Shares is `rbs job shares --json`.
type Shares struct {
	HalfLifeSeconds int64   `json:"half_life_seconds"`
	Weight          int64   `json:"weight"`
	Accounts        []Share `json:"accounts"`
}

// FromShares is fair share as the schema has it.
func FromShares(r *jobspb.SharesResponse) Shares {
	var share func(a *jobspb.AccountShare) Share
	share = func(a *jobspb.AccountShare) Share {
		s := Share{a.Name, a.Shares, a.Share, a.CpuSeconds, a.MemoryGibSeconds, a.GpuSeconds, a.BillingSeconds, a.Usage, a.EffectiveUsage, a.Factor, nil}
		for _, u := range a.Users {
			s.Users = append(s.Users, share(u))
		}
		return s
	}
	out := Shares{HalfLifeSeconds: r.HalfLifeMs / 1000, Weight: r.Weight, Accounts: []Share{}}
	for _, a := range r.Accounts {
		out.Accounts = append(out.Accounts, share(a))
	}
	return out
}

// Reservation is a maintenance window.
type Reservation struct {
	Name    string   `json:"name"`
	Start   *string  `json:"start"`
	End     *string  `json:"end"`
	Reason  string   `json:"reason,omitempty"`
	Workers []string `json:"workers"`
	Active  bool     `json:"active"`
}

// Status is the cluster: its workers, the action queue, jobs by state and
// the build actions executed.
type Status struct {
	Workers []Worker         `json:"workers"`
	Queue   ActionQueue      `json:"queue"`
	Jobs    map[string]int64 `json:"jobs"`
	Actions ActionStats      `json:"actions"`
}

// Worker is one registered worker.
type Worker struct {
	ID               string              `json:"id"`
	Name             string              `json:"name"`
	CPUs             int32               `json:"cpus"`
	MemoryBytes      int64               `json:"memory_bytes"`
	GPUs             []GPU               `json:"gpus"`
	GPUNote          string              `json:"gpu_note,omitempty"`
	ContainerRuntime string              `json:"container_runtime"`
	Properties       map[string][]string `json:"properties"`
	ActionSlots      Slots               `json:"action_slots"`
	JobSlots         Slots               `json:"job_slots"`
	LastHeartbeat    string              `json:"last_heartbeat"`
	Version          string              `json:"version"`
}

// GPU is one GPU of a worker.
type GPU struct {
	Index       int32  `json:"index"`
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
}

// Slots are a worker's slots of one class.
type Slots struct {
	Used  int32 `json:"used"`
	Total int32 `json:"total"`
}

// ActionQueue is the build actions waiting and running.
type ActionQueue struct {
	QueuedActions    int32 `json:"queued_actions"`
	ExecutingActions int32 `json:"executing_actions"`
}

// ActionStats sums up the build actions executed since the server started.
type ActionStats struct {
	Completed     int64   `json:"completed"`
	CacheHits     int64   `json:"cache_hits"`
	OverheadP50Ms float64 `json:"overhead_p50_ms"`
	OverheadP99Ms float64 `json:"overhead_p99_ms"`
}

// Action is one recent build action: where it ran and where its time went.
type Action struct {
	Digest        string  `json:"digest"`
	Worker        string  `json:"worker"`
	CacheHit      bool    `json:"cache_hit"`
	ExitCode      int32   `json:"exit_code"`
	Error         string  `json:"error,omitempty"`
	CompletedTime *string `json:"completed_time"`
	TotalMs       float64 `json:"total_ms"`
	QueuedMs      float64 `json:"queued_ms"`
	FetchMs       float64 `json:"fetch_ms"`
	RunMs         float64 `json:"run_ms"`
	UploadMs      float64 `json:"upload_ms"`
}

// Time is ms since the epoch as RFC 3339, UTC, to the millisecond; nil for
// 0, a time that has not happened.
func Time(ms int64) *string {
	if ms == 0 {
		return nil
	}
	s := time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
	return &s
}

// CachePolicy names a job's cache policy as users write it.
func CachePolicy(p jobspb.CachePolicy) string {
	switch p {
	case jobspb.CachePolicy_CACHE_ON:
		return "on"
	case jobspb.CachePolicy_CACHE_REFRESH:
		return "refresh"
	}
	return "off"
}

// FromJob is one job as the schema has it.
func FromJob(j *jobspb.JobInfo) Job {
	r := j.Record
	s := r.Spec
	out := Job{
		ID: j.Id, JobID: r.Id, Name: s.Name, Queue: s.Queue, State: r.State, PendingReason: r.PendingReason,
		Priority: Priority{j.Priority.GetBase(), j.Priority.GetQueue(), j.Priority.GetAge(), j.Priority.GetFairShare(), j.Priority.GetFairShareFactor(), j.Priority.GetTotal()},
		Command:  s.Command, ScriptBytes: len(s.Script), CPUs: max(s.Cpus, 1), MemoryBytes: s.MemoryBytes, GPUs: s.Gpus, GPUIndices: r.GpuIndices,
		TimeLimitSecs: r.TimeLimitMs / 1000, Dependencies: []Dependency{}, Attempts: r.Attempts, ExitCode: r.ExitCode,
		PeakMemoryBytes: r.PeakMemoryBytes, OOMKilled: r.OomKilled,
		OutputBytes: r.OutputBytes, OutputTruncated: r.OutputDroppedBytes > 0, OutputDroppedBytes: r.OutputDroppedBytes,
		SubmitTime: Time(r.SubmitUnixMs), StartTime: Time(r.StartUnixMs), EndTime: Time(r.EndUnixMs),
		NoRequeue: s.NoRequeue, Message: r.Message, Env: s.Env,
		InputRoot: s.InputRoot, Platform: s.Platform, OutputPaths: s.Outputs, OutputRoot: r.OutputRoot,
		MaxRetries: s.MaxRetries, CheckpointDir: s.CheckpointDir, CheckpointRoot: r.CheckpointRoot, History: []Attempt{},
		Nodes: max(s.Nodes, 1), Placement: j.Placement, User: s.User, CPUTimeSecs: float64(r.CpuTimeMs) / 1000,
		QueuePosition: j.QueuePosition, ExpectedStart: Time(j.ExpectedStartUnixMs), StartUnknown: j.StartUnknown,
		Workers: WorkersOf(r), Ranks: []Rank{},
		Pack: s.Pack, PackRequired: s.PackRequired, Borrowed: r.Borrowed,
		Cache: CachePolicy(s.Cache), CacheKey: r.CacheKey, CachedFrom: r.CachedFrom, Sweep: j.Sweep,
	}
	for _, a := range r.History {
		out.History = append(out.History, Attempt{a.Attempt, a.Worker, a.Workers, a.State, a.ExitCode, Time(a.StartUnixMs), Time(a.EndUnixMs), a.Message})
	}
	for _, o := range r.Outputs {
		out.Outputs = append(out.Outputs, Output{o.Path, o.Kind, o.SizeBytes})
	}
	if out.Command == nil {
		out.Command = []string{}
	}
	out.CommandLine = CommandLine(out.Command)
	if out.GPUIndices == nil {
		out.GPUIndices = []int32{}
	}
	if r.Index >= 0 {
		idx := r.Index
		out.ArrayIndex = &idx
		out.Array = s.Array.GetText()
	}
	for _, n := range r.Nodes {
		rj := Rank{Rank: n.Rank, Worker: n.Worker, GPUIndices: n.GpuIndices, GPUUUIDs: n.GpuUuids}
		if rj.GPUIndices == nil {
			rj.GPUIndices, rj.GPUUUIDs = []int32{}, []string{}
		}
		out.Ranks = append(out.Ranks, rj)
	}
	for _, d := range j.Deps {
		out.Dependencies = append(out.Dependencies, Dependency{d.Kind, d.Id, d.State, d.NeverSatisfied})
	}
	return out
}

// CommandLine is argv as a line to paste into a POSIX shell: each word
// that holds anything but letters, digits and _@%+=:,./- single-quoted.
func CommandLine(argv []string) string {
	words := make([]string, len(argv))
	for i, w := range argv {
		words[i] = w
		if w == "" || strings.IndexFunc(w, func(r rune) bool { return !plainRune(r) }) >= 0 {
			words[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(words, " ")
}

func plainRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)
}

// Jobs is a list of jobs, [] for none.
func Jobs(jobs []*jobspb.JobInfo) []Job {
	out := []Job{}
	for _, j := range jobs {
		out = append(out, FromJob(j))
	}
	return out
}

// Shown is what showing id found: an object for one job or one task, an
// array of them for an array's id.
func Shown(id string, jobs []*jobspb.JobInfo) any {
	if len(jobs) == 1 && (!strings.Contains(jobs[0].Id, "_") || strings.Contains(id, "_")) {
		return FromJob(jobs[0])
	}
	return Jobs(jobs)
}

// WorkersOf lists the workers of a job's attempt, in rank order.
func WorkersOf(r *jobspb.JobRecord) []string {
	out := []string{}
	for _, n := range r.Nodes {
		out = append(out, n.Worker)
	}
	if len(out) == 0 && r.Worker != "" {
		out = append(out, r.Worker)
	}
	return out
}

// Queues lists queues, [] for none.
func Queues(qs []*jobspb.QueueInfo) []Queue {
	out := []Queue{}
	for _, q := range qs {
		out = append(out, Queue{Name: q.Name, Priority: q.Priority, MaxTimeSeconds: q.MaxTimeMs / 1000, Running: q.Running, Pending: q.Pending, Default: q.IsDefault,
			Quota: resources(q.Quota), Used: resources(q.Used), BorrowingLimit: resources(q.BorrowingLimit), Cohort: q.Cohort})
	}
	return out
}

// Reservations lists maintenance windows as they stand at now, [] for none.
func Reservations(rs []*jobspb.Reservation, now time.Time) []Reservation {
	out := []Reservation{}
	for _, r := range rs {
		workers := r.Workers
		if workers == nil {
			workers = []string{}
		}
		out = append(out, Reservation{r.Name, Time(r.StartUnixMs), Time(r.EndUnixMs), r.Reason, workers, r.StartUnixMs <= now.UnixMilli()})
	}
	return out
}

// FromStatus is the cluster's status as the schema has it.
func FromStatus(st *workerpb.StatusResponse) Status {
	out := Status{
		Workers: []Worker{},
		Queue:   ActionQueue{QueuedActions: st.Queue.GetQueuedActions(), ExecutingActions: st.Queue.GetExecutingActions()},
		Jobs:    map[string]int64{},
		Actions: FromActionStats(st.Actions),
	}
	for k, v := range st.Jobs {
		out.Jobs[k] = v
	}
	for _, w := range st.Workers {
		wj := Worker{
			ID:               w.Id,
			Name:             w.Name,
			CPUs:             w.Resources.GetCpus(),
			MemoryBytes:      w.Resources.GetMemoryBytes(),
			GPUs:             []GPU{},
			GPUNote:          w.Resources.GetGpuNote(),
			ContainerRuntime: w.Resources.GetContainerRuntime(),
			Properties:       map[string][]string{},
			ActionSlots:      Slots{Used: w.ActionSlots.GetUsed(), Total: w.ActionSlots.GetTotal()},
			JobSlots:         Slots{Used: w.JobSlots.GetUsed(), Total: w.JobSlots.GetTotal()},
			LastHeartbeat:    time.UnixMilli(w.LastHeartbeatUnixMs).UTC().Format(time.RFC3339),
			Version:          w.Version,
		}
		for _, g := range w.Resources.GetGpus() {
			wj.GPUs = append(wj.GPUs, GPU{Index: g.Index, UUID: g.Uuid, Name: g.Name, MemoryBytes: g.MemoryBytes})
		}
		for _, p := range w.Properties {
			wj.Properties[p.Name] = append(wj.Properties[p.Name], p.Value)
		}
		out.Workers = append(out.Workers, wj)
	}
	return out
}

// FromActionStats sums up the actions executed.
func FromActionStats(a *workerpb.ActionStats) ActionStats {
	return ActionStats{Completed: a.GetCompleted(), CacheHits: a.GetCacheHits(), OverheadP50Ms: a.GetOverheadP50Ms(), OverheadP99Ms: a.GetOverheadP99Ms()}
}

// Actions lists recent build actions, [] for none.
func Actions(as []*workerpb.ActionRecord) []Action {
	out := []Action{}
	for _, a := range as {
		out = append(out, Action{a.Digest, a.Worker, a.CacheHit, a.ExitCode, a.Error, Time(a.CompletedUnixMs), a.TotalMs, a.QueuedMs, a.FetchMs, a.RunMs, a.UploadMs})
	}
	return out
}

// Write writes v as indented JSON and a newline, as the CLI prints it.
func Write(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
