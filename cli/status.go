package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/workerpb"
)

func printStatus(w io.Writer, st *workerpb.StatusResponse) {
	s := schema.FromStatus(st)
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
