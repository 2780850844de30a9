package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/merkle"
)

// targetManifests builds a job target, or a job_pipeline, with the job
// targets it runs after, and returns their manifests, in an order where
// every job comes after those it runs after (their dependencies naming
// those entries), and their input roots. The flags given apply to every
// job; the arguments after the target are appended to the one job a target
// names. A job target's environment is its env: --export applies to
// commands only.
func (c *JobSubmitCmd) targetManifests(ctx context.Context, target string, extra []string) ([]*manifest.Manifest, []*merkle.Tree, error) {
	if len(c.Inputs) > 0 {
		return nil, nil, fmt.Errorf("%s stages its own inputs: add them to its data instead of --inputs", target)
	}
	sess, err := c.buildSession()
	if err != nil {
		return nil, nil, err
	}
	defer sess.Close()
	jobs, err := sess.Pipeline(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	if len(jobs) > 1 && (len(extra) > 0 || c.Name != "") {
		return nil, nil, fmt.Errorf("%s submits %d jobs: arguments and --name apply to one job target", target, len(jobs))
	}
	entry := map[string]int{}
	var ms []*manifest.Manifest
	var trees []*merkle.Tree
	for i, j := range jobs {
		m := j.Manifest
		for k, d := range m.After {
			m.After[k].Entry = entry[d.Label]
		}
		m.Command = append(m.Command, extra...)
		c.o.Apply(m)
		entry[m.Label] = i + 1
		ms = append(ms, m)
		trees = append(trees, j.Tree)
	}
	return ms, trees, nil
}

// printPipeline prints the jobs of a pipeline as they were submitted: one
// line each with its id, name and the ids it runs after, or only the ids.
func printPipeline(w io.Writer, ms []*manifest.Manifest, resp *jobspb.SubmitResponse, parsable bool) {
	ids := resp.JobIds
	if parsable {
		for _, id := range ids {
			fmt.Fprintln(w, id)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cache := len(resp.CachedTasks) == len(ids)
	if cache {
		fmt.Fprintln(tw, "JOBID\tNAME\tCACHE\tAFTER")
	} else {
		fmt.Fprintln(tw, "JOBID\tNAME\tAFTER")
	}
	for i, m := range ms {
		var after []string
		for _, d := range m.After {
			id := d.Job
			if d.Entry > 0 {
				id = fmt.Sprint(ids[d.Entry-1])
			}
			after = append(after, d.Kind+":"+id)
		}
		if cache {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", ids[i], m.Name, cacheWord(resp, i, m), strings.Join(after, ","))
		} else {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", ids[i], m.Name, strings.Join(after, ","))
		}
	}
	tw.Flush()
}

// checkPartitions asks the server for its queues when a job target names
// a partition, and refuses an unknown one, naming the target and the
// attribute, before anything is uploaded.
func checkPartitions(jobs jobspb.JobsClient, ms []*manifest.Manifest) error {
	var queues map[string]bool
	var names []string
	for _, m := range ms {
		if m.Label == "" || m.Queue == "" {
			continue
		}
		if queues == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			resp, err := jobs.Queues(ctx, &jobspb.QueuesRequest{})
			cancel()
			if err != nil {
				return fmt.Errorf("asking the server for its queues: %w", err)
			}
			queues = map[string]bool{}
			for _, q := range resp.Queues {
				queues[q.Name] = true
				names = append(names, q.Name)
			}
		}
		if !queues[m.Queue] {
			return fmt.Errorf("%s: partition: unknown queue %q (the server's queues: %s)", m.Label, m.Queue, strings.Join(names, ", "))
		}
	}
	return nil
}

// cacheWord says what the job cache did for entry i of a submission:
// "cached" (from job N), "runs", or for an array how many of its tasks
// were cached.
func cacheWord(resp *jobspb.SubmitResponse, i int, m *manifest.Manifest) string {
	n := resp.CachedTasks[i]
	switch {
	case resp.CachedFrom[i] != "":
		return "cached from job " + resp.CachedFrom[i]
	case m.Array == "" && len(m.Sweep) == 0 && n == 0:
		return "runs"
	case n == 0:
		return "runs (no task cached)"
	}
	return fmt.Sprintf("%d task(s) cached, the rest run", n)
}

// cacheNote is cacheWord for the line of a single job's submission; "" when
// the job does not use the cache.
func cacheNote(resp *jobspb.SubmitResponse, i int, m *manifest.Manifest) string {
	if len(resp.CachedTasks) <= i {
		return ""
	}
	return " (" + cacheWord(resp, i, m) + ")"
}
