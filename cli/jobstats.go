package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/jobs/accounting"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
)

// JobStatsCmd is `rbs job stats`.
type JobStatsCmd struct {
	RemoteFlags
	Since    when   `help:"Jobs that ended from then: a time ago (90m, 2h, 7d, or Slurm's [D-]HH:MM:SS, a bare number being minutes) or a time (2026-12-01, 2026-12-01T15:04, RFC 3339)." default:"1d" placeholder:"WHEN"`
	Until    when   `help:"Jobs that ended before then, as --since (default: now)." placeholder:"WHEN"`
	Queue    string `help:"Only the jobs of this queue."`
	User     string `help:"Only the jobs of this user."`
	Worst    int    `help:"How many of the jobs that used their CPUs worst to list." default:"5"`
	JSON     bool   `name:"json" help:"Print the report as JSON."`
	Parsable bool   `help:"Print one job a line, fields separated by '|', with a header line, as sacct --parsable2 does."`
	Array    string `help:"Compare the tasks of this array (a sweep's, say) instead: each task's sweep values, state, wall time and --metric." placeholder:"ID"`
	Metric   string `help:"With --array, a number each task wrote to one of its outputs, FILE:KEY: a JSON file and the key of a number in it (a.b for a key of an object), such as out/metrics.json:loss." placeholder:"FILE:KEY"`
}

// Run implements the command.
func (c *JobStatsCmd) Run() error {
	now := time.Now()
	since, until := c.Since.at(now), now
	if c.Until != (when{}) {
		until = c.Until.at(now)
	}
	if !until.After(since) {
		return fmt.Errorf("--until %s is not after --since %s", until.Format(time.RFC3339), since.Format(time.RFC3339))
	}
	if c.Worst < 0 {
		return fmt.Errorf("invalid --worst: %d: want 0 or more", c.Worst)
	}
	var m metric
	if c.Metric != "" {
		var err error
		if m, err = parseMetric(c.Metric); err != nil {
			return err
		}
	}
	if m.file != "" && c.Array == "" {
		return fmt.Errorf("--metric compares the tasks of an array: give --array ID too")
	}
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	if c.Array != "" {
		return c.compare(jobs, client.NewCAS(conn, ""), m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	all, err := collect(jobs.List(ctx, &jobspb.ListRequest{Queue: c.Queue, EndedAfterUnixMs: since.UnixMilli(), EndedBeforeUnixMs: until.UnixMilli()}))
	if err != nil {
		return err
	}
	var mine []*jobspb.JobInfo
	for _, j := range all {
		if c.User == "" || j.Record.Spec.GetUser() == c.User {
			mine = append(mine, j)
		}
	}
	rep := accounting.New(mine, c.Worst)
	switch {
	case c.JSON:
		return schema.Write(os.Stdout, statsJSON(rep, since, until))
	case c.Parsable:
		printParsable(os.Stdout, rep.Jobs)
	default:
		printStats(os.Stdout, rep, since, until)
	}
	return nil
}

// when is a time --since and --until read: a duration before now, a
// date, or a time.
type when struct {
	ago  time.Duration
	time time.Time
}

// UnmarshalText lets kong read a when.
func (w *when) UnmarshalText(b []byte) error {
	s := string(b)
	if d, err := spec.ParseDuration(s); err == nil {
		*w = when{ago: d}
		return nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			*w = when{time: t}
			return nil
		}
	}
	return fmt.Errorf("%q: want a time ago (90m, 2h, 7d) or a time (2026-12-01, 2026-12-01T15:04, RFC 3339)", s)
}

// at is the time w stands for when it is now.
func (w when) at(now time.Time) time.Time {
	if w.ago > 0 {
		return now.Add(-w.ago)
	}
	return w.time
}

// percent formats an efficiency, "-" for a job that never ran.
func percent(e float64) string {
	if e < 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*e)
}

func memText(n int64) string {
	if n == 0 {
		return "-"
	}
	return units.Human(n)
}

func printStats(w io.Writer, rep *accounting.Report, since, until time.Time) {
	fmt.Fprintf(w, "Jobs ended from %s to %s: %d\n\n", since.Format(time.RFC3339), until.Format(time.RFC3339), len(rep.Jobs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOBID\tNAME\tUSER\tQUEUE\tSTATE\tNODES\tCPUS\tWALL\tCPUTIME\tCPU_EFF\tPEAK_MEM\tREQ_MEM\tGPU_HOURS")
	for _, u := range rep.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%.2f\n", u.ID, u.Name, u.User, u.Queue, u.State, u.Nodes, u.CPUs,
			spec.FormatDuration(u.Wall), spec.FormatDuration(u.CPUTime), percent(u.Efficiency), memText(u.PeakMemory), memText(u.MemoryRequest), u.GPUHours)
	}
	tw.Flush()
	for _, g := range []struct {
		title, col string
		totals     []accounting.Total
	}{{"By queue", "QUEUE", rep.Queues}, {"By user", "USER", rep.Users}} {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\tJOBS\tWALL\tCPUTIME\tCPU_EFF\tGPU_HOURS\n", g.col)
		for _, t := range g.totals {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%.2f\n", t.Name, t.Jobs, spec.FormatDuration(t.Wall), spec.FormatDuration(t.CPUTime), percent(t.Efficiency), t.GPUHours)
		}
		tw.Flush()
	}
	if len(rep.Worst) > 0 {
		fmt.Fprintf(w, "\nWorst CPU efficiency:\n")
		for _, u := range rep.Worst {
			fmt.Fprintf(w, "  %s (%s, %s): %s of %d CPUs for %s\n", u.ID, u.Name, u.User, percent(u.Efficiency), u.CPUs, spec.FormatDuration(u.Wall))
		}
	}
}

func printParsable(w io.Writer, jobs []accounting.Usage) {
	fmt.Fprintln(w, "JobID|Name|User|Queue|State|Nodes|CPUs|WallSeconds|CPUSeconds|CPUEfficiency|PeakMemoryBytes|MemoryRequestBytes|GPUHours")
	clean := strings.NewReplacer("|", " ", "\n", " ")
	for _, u := range jobs {
		eff := ""
		if u.Efficiency >= 0 {
			eff = fmt.Sprintf("%.4f", u.Efficiency)
		}
		fmt.Fprintf(w, "%s|%s|%s|%s|%s|%d|%d|%.3f|%.3f|%s|%d|%d|%.4f\n", u.ID, clean.Replace(u.Name), u.User, u.Queue, u.State, u.Nodes, u.CPUs,
			u.Wall.Seconds(), u.CPUTime.Seconds(), eff, u.PeakMemory, u.MemoryRequest, u.GPUHours)
	}
}

type usageJSON struct {
	ID                 string   `json:"id"`
	Name               string   `json:"name"`
	User               string   `json:"user"`
	Queue              string   `json:"queue"`
	State              string   `json:"state"`
	Nodes              int32    `json:"nodes"`
	CPUs               int32    `json:"cpus"`
	GPUs               int32    `json:"gpus"`
	WallSeconds        float64  `json:"wall_seconds"`
	CPUSeconds         float64  `json:"cpu_seconds"`
	CPUEfficiency      *float64 `json:"cpu_efficiency"`
	PeakMemoryBytes    int64    `json:"peak_memory_bytes"`
	MemoryRequestBytes int64    `json:"memory_request_bytes"`
	GPUHours           float64  `json:"gpu_hours"`
}

type totalJSON struct {
	Name          string   `json:"name"`
	Jobs          int      `json:"jobs"`
	WallSeconds   float64  `json:"wall_seconds"`
	CPUSeconds    float64  `json:"cpu_seconds"`
	CPUEfficiency *float64 `json:"cpu_efficiency"`
	GPUHours      float64  `json:"gpu_hours"`
}

type statsReportJSON struct {
	Since  string      `json:"since"`
	Until  string      `json:"until"`
	Jobs   []usageJSON `json:"jobs"`
	Queues []totalJSON `json:"queues"`
	Users  []totalJSON `json:"users"`
	Worst  []usageJSON `json:"worst"`
}

// efficiency is e for JSON: null for none.
func efficiency(e float64) *float64 {
	if e < 0 {
		return nil
	}
	return &e
}

func statsJSON(rep *accounting.Report, since, until time.Time) statsReportJSON {
	usages := func(us []accounting.Usage) []usageJSON {
		out := []usageJSON{}
		for _, u := range us {
			out = append(out, usageJSON{u.ID, u.Name, u.User, u.Queue, u.State, u.Nodes, u.CPUs, u.GPUs, u.Wall.Seconds(), u.CPUTime.Seconds(),
				efficiency(u.Efficiency), u.PeakMemory, u.MemoryRequest, u.GPUHours})
		}
		return out
	}
	totals := func(ts []accounting.Total) []totalJSON {
		out := []totalJSON{}
		for _, t := range ts {
			out = append(out, totalJSON{t.Name, t.Jobs, t.Wall.Seconds(), t.CPUTime.Seconds(), efficiency(t.Efficiency), t.GPUHours})
		}
		return out
	}
	return statsReportJSON{
		Since: since.UTC().Format(time.RFC3339), Until: until.UTC().Format(time.RFC3339),
		Jobs: usages(rep.Jobs), Queues: totals(rep.Queues), Users: totals(rep.Users), Worst: usages(rep.Worst),
	}
}
