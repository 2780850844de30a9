package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
)

// metric is a --metric: a number at key (its parts) in a JSON file of a
// job's outputs.
type metric struct {
	file string
	key  []string
}

// maxMetricFile bounds the file a metric is read from.
const maxMetricFile = 16 << 20

// parseMetric reads FILE:KEY.
func parseMetric(s string) (metric, error) {
	file, key, ok := strings.Cut(s, ":")
	if !ok || key == "" {
		return metric{}, fmt.Errorf("invalid --metric %q: want FILE:KEY, such as out/metrics.json:loss", s)
	}
	if err := merkle.CheckPath(file); err != nil {
		return metric{}, fmt.Errorf("invalid --metric %q: %v; give a path among the job's outputs", s, err)
	}
	parts := strings.Split(key, ".")
	for _, p := range parts {
		if p == "" {
			return metric{}, fmt.Errorf("invalid --metric %q: key %q has an empty part", s, key)
		}
	}
	return metric{file: file, key: parts}, nil
}

func (m metric) name() string { return strings.Join(m.key, ".") }

// taskRow is one task of an array compared.
type taskRow struct {
	ID         string   `json:"id"`
	Sweep      []string `json:"sweep"`
	State      string   `json:"state"`
	CachedFrom string   `json:"cached_from,omitempty"`
	// WallSecs is the wall time of the attempt that made the task's
	// result: for a task answered from the cache, its origin's.
	WallSecs float64  `json:"wall_seconds"`
	Metric   *float64 `json:"metric,omitempty"`
	// MetricError says why the metric could not be read.
	MetricError string `json:"metric_error,omitempty"`
}

// compare prints the tasks of --array side by side.
func (c *JobStatsCmd) compare(jobs jobspb.JobsClient, cas *client.CAS, m metric) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tasks, err := collect(jobs.Show(ctx, &jobspb.ShowRequest{Id: c.Array}))
	if err != nil {
		return err
	}
	if len(tasks) == 0 || tasks[0].Record.Index < 0 {
		return fmt.Errorf("job %s is not an array: --array compares an array's tasks", c.Array)
	}
	// A cached task's wall time is its origin's.
	origins := map[string]*jobspb.JobInfo{}
	for _, t := range tasks {
		from := t.Record.CachedFrom
		if from == "" || origins[from] != nil {
			continue
		}
		id, err := spec.ParseJobID(from)
		if err != nil {
			continue
		}
		shown, err := collect(jobs.Show(ctx, &jobspb.ShowRequest{Id: strconv.FormatInt(id.ID, 10)}))
		if err != nil {
			continue // forgotten: no wall time
		}
		for _, o := range shown {
			origins[o.Id] = o
		}
	}
	var rows []taskRow
	for _, t := range tasks {
		r := t.Record
		row := taskRow{ID: t.Id, Sweep: t.Sweep, State: r.State, CachedFrom: r.CachedFrom}
		made := r
		if o := origins[r.CachedFrom]; o != nil {
			made = o.Record
		}
		if made.StartUnixMs > 0 && made.EndUnixMs >= made.StartUnixMs {
			row.WallSecs = float64(made.EndUnixMs-made.StartUnixMs) / 1000
		}
		if m.file != "" {
			v, err := m.read(ctx, cas, r.OutputRoot)
			if err != nil {
				row.MetricError = err.Error()
			} else {
				row.Metric = &v
			}
		}
		rows = append(rows, row)
	}
	if c.JSON {
		return schema.Write(os.Stdout, struct {
			Array  string    `json:"array"`
			Metric string    `json:"metric,omitempty"`
			Tasks  []taskRow `json:"tasks"`
		}{c.Array, c.Metric, rows})
	}
	printCompare(os.Stdout, rows, m)
	return nil
}

// read returns the metric's value in the outputs under root.
func (m metric) read(ctx context.Context, cas *client.CAS, root string) (float64, error) {
	if root == "" {
		return 0, fmt.Errorf("no outputs recorded")
	}
	d, err := digest.Parse(root)
	if err != nil {
		return 0, err
	}
	b, err := merkle.ReadPath(ctx, cas, d, m.file, maxMetricFile)
	if err != nil {
		return 0, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, fmt.Errorf("%s is not JSON: %v", m.file, err)
	}
	for _, k := range m.key {
		obj, ok := v.(map[string]any)
		if !ok {
			return 0, fmt.Errorf("%s: %s is not in an object", m.file, m.name())
		}
		if v, ok = obj[k]; !ok {
			return 0, fmt.Errorf("%s has no %s", m.file, m.name())
		}
	}
	f, ok := v.(float64)
	if !ok {
		return 0, fmt.Errorf("%s: %s is %v, not a number", m.file, m.name(), v)
	}
	return f, nil
}

// printCompare prints the tasks' table, then the lowest and highest metric.
func printCompare(w io.Writer, rows []taskRow, m metric) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "TASK\tSWEEP\tSTATE\tWALL"
	if m.file != "" {
		head += "\t" + strings.ToUpper(m.name())
	}
	fmt.Fprintln(tw, head)
	lo, hi := -1, -1
	for i, r := range rows {
		state := r.State
		if r.CachedFrom != "" {
			state += " (cached from " + r.CachedFrom + ")"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s", r.ID, strings.Join(r.Sweep, " "), state, wall(r.WallSecs))
		if m.file != "" {
			switch {
			case r.Metric != nil:
				line += "\t" + strconv.FormatFloat(*r.Metric, 'g', -1, 64)
				if lo < 0 || *r.Metric < *rows[lo].Metric {
					lo = i
				}
				if hi < 0 || *r.Metric > *rows[hi].Metric {
					hi = i
				}
			default:
				line += "\t- (" + r.MetricError + ")"
			}
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	if lo >= 0 {
		for _, e := range []struct {
			what string
			i    int
		}{{"Lowest", lo}, {"Highest", hi}} {
			r := rows[e.i]
			fmt.Fprintf(w, "%s %s: %s at %s", e.what, m.name(), strconv.FormatFloat(*r.Metric, 'g', -1, 64), r.ID)
			if len(r.Sweep) > 0 {
				fmt.Fprintf(w, " (%s)", strings.Join(r.Sweep, " "))
			}
			fmt.Fprintln(w)
		}
	}
}

// wall formats a wall time: seconds to a tenth under a minute, else as
// time limits are written.
func wall(secs float64) string {
	if secs < 60 {
		return strconv.FormatFloat(secs, 'f', 1, 64) + "s"
	}
	return spec.FormatDuration(time.Duration(secs * float64(time.Second)).Round(time.Second))
}
