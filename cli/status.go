package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/workerpb"
)

// The JSON of `rbs remote status --json`. Its keys are stable: scripts read
// them.
type statusJSON struct {
	Workers []workerJSON     `json:"workers"`
	Queue   queueJSON        `json:"queue"`
	Jobs    map[string]int64 `json:"jobs"`
	Actions actionsJSON      `json:"actions"`
}

type workerJSON struct {
	ID               string              `json:"id"`
	Name             string              `json:"name"`
	CPUs             int32               `json:"cpus"`
	MemoryBytes      int64               `json:"memory_bytes"`
	GPUs             []gpuJSON           `json:"gpus"`
	GPUNote          string              `json:"gpu_note,omitempty"`
	ContainerRuntime string              `json:"container_runtime"`
	Properties       map[string][]string `json:"properties"`
	ActionSlots      slotsJSON           `json:"action_slots"`
	JobSlots         slotsJSON           `json:"job_slots"`
	LastHeartbeat    string              `json:"last_heartbeat"`
	Version          string              `json:"version"`
}

type gpuJSON struct {
	Index       int32  `json:"index"`
	UUID        string `json:"uuid"`
	Name        string `json:"name"`
	MemoryBytes int64  `json:"memory_bytes"`
}

type slotsJSON struct {
	Used  int32 `json:"used"`
	Total int32 `json:"total"`
}

type queueJSON struct {
	QueuedActions    int32 `json:"queued_actions"`
	ExecutingActions int32 `json:"executing_actions"`
}

type actionsJSON struct {
	Completed     int64   `json:"completed"`
	CacheHits     int64   `json:"cache_hits"`
	OverheadP50Ms float64 `json:"overhead_p50_ms"`
	OverheadP99Ms float64 `json:"overhead_p99_ms"`
}

func toStatusJSON(st *workerpb.StatusResponse) statusJSON {
	out := statusJSON{
		Workers: []workerJSON{},
		Queue:   queueJSON{QueuedActions: st.Queue.GetQueuedActions(), ExecutingActions: st.Queue.GetExecutingActions()},
		Jobs:    map[string]int64{},
		Actions: actionsJSON{
			Completed:     st.Actions.GetCompleted(),
			CacheHits:     st.Actions.GetCacheHits(),
			OverheadP50Ms: st.Actions.GetOverheadP50Ms(),
			OverheadP99Ms: st.Actions.GetOverheadP99Ms(),
		},
	}
	for k, v := range st.Jobs {
		out.Jobs[k] = v
	}
	for _, w := range st.Workers {
		wj := workerJSON{
			ID:               w.Id,
			Name:             w.Name,
			CPUs:             w.Resources.GetCpus(),
			MemoryBytes:      w.Resources.GetMemoryBytes(),
			GPUs:             []gpuJSON{},
			GPUNote:          w.Resources.GetGpuNote(),
			ContainerRuntime: w.Resources.GetContainerRuntime(),
			Properties:       map[string][]string{},
			ActionSlots:      slotsJSON{Used: w.ActionSlots.GetUsed(), Total: w.ActionSlots.GetTotal()},
			JobSlots:         slotsJSON{Used: w.JobSlots.GetUsed(), Total: w.JobSlots.GetTotal()},
			LastHeartbeat:    time.UnixMilli(w.LastHeartbeatUnixMs).UTC().Format(time.RFC3339),
			Version:          w.Version,
		}
		for _, g := range w.Resources.GetGpus() {
			wj.GPUs = append(wj.GPUs, gpuJSON{Index: g.Index, UUID: g.Uuid, Name: g.Name, MemoryBytes: g.MemoryBytes})
		}
		for _, p := range w.Properties {
			wj.Properties[p.Name] = append(wj.Properties[p.Name], p.Value)
		}
		out.Workers = append(out.Workers, wj)
	}
	return out
}

func printStatusJSON(w io.Writer, st *workerpb.StatusResponse) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(toStatusJSON(st))
}

func printStatus(w io.Writer, st *workerpb.StatusResponse) {
	s := toStatusJSON(st)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tACTIONS\tJOBS\tCPUS\tMEMORY\tGPUS\tCONTAINERS\tLAST HEARTBEAT\tPROPERTIES")
	for _, wk := range s.Workers {
		var props []string
		for name, vals := range wk.Properties {
			for _, v := range vals {
				props = append(props, name+"="+v)
			}
		}
		sort.Strings(props)
		ago := "?"
		if t, err := time.Parse(time.RFC3339, wk.LastHeartbeat); err == nil {
			ago = time.Since(t).Round(time.Second).String() + " ago"
		}
		containers := wk.ContainerRuntime
		if containers == "" {
			containers = "-"
		}
		fmt.Fprintf(tw, "%s\t%d/%d\t%d/%d\t%d\t%s\t%d\t%s\t%s\t%s\n", wk.Name, wk.ActionSlots.Used, wk.ActionSlots.Total,
			wk.JobSlots.Used, wk.JobSlots.Total, wk.CPUs, units.Human(wk.MemoryBytes), len(wk.GPUs), containers, ago, strings.Join(props, " "))
	}
	tw.Flush()
	if len(s.Workers) == 0 {
		fmt.Fprintln(w, "(no workers connected)")
	}
	// Why workers found no GPU, once per reason.
	notes := map[string][]string{}
	var order []string
	for _, wk := range s.Workers {
		if wk.GPUNote != "" && len(wk.GPUs) == 0 {
			if notes[wk.GPUNote] == nil {
				order = append(order, wk.GPUNote)
			}
			notes[wk.GPUNote] = append(notes[wk.GPUNote], wk.Name)
		}
	}
	for _, n := range order {
		fmt.Fprintf(w, "no GPUs on %s: %s\n", strings.Join(notes[n], ", "), n)
	}
	fmt.Fprintf(w, "\nqueue: %d actions queued, %d executing\n", s.Queue.QueuedActions, s.Queue.ExecutingActions)
	fmt.Fprintf(w, "actions: %d executed, %d cache hits, overhead p50 %.1f ms, p99 %.1f ms\n",
		s.Actions.Completed, s.Actions.CacheHits, s.Actions.OverheadP50Ms, s.Actions.OverheadP99Ms)
	if len(s.Jobs) == 0 {
		fmt.Fprintln(w, "jobs: none")
		return
	}
	var states []string
	for k, v := range s.Jobs {
		states = append(states, fmt.Sprintf("%s %d", k, v))
	}
	sort.Strings(states)
	fmt.Fprintf(w, "jobs: %s\n", strings.Join(states, ", "))
}
