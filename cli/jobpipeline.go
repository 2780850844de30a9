package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/merkle"
)

// targetSpecs builds a job target, or a job_pipeline, with the job targets
// it runs after, and returns their specs, in an order where every job comes
// after those it runs after (their dependencies naming those entries), and
// their input roots. The flags given apply to every job; the arguments
// after the target are appended to the one job a target names. A job
// target's environment is its env: --export applies to commands only.
func (c *JobSubmitCmd) targetSpecs(target string, extra []string) ([]*jobspb.JobSpec, []*merkle.Tree, error) {
	if len(c.Inputs) > 0 {
		return nil, nil, fmt.Errorf("%s stages its own inputs: add them to its data instead of --inputs", target)
	}
	sess, err := c.buildSession()
	if err != nil {
		return nil, nil, err
	}
	defer sess.Close()
	jobs, err := sess.Pipeline(context.Background(), target)
	if err != nil {
		return nil, nil, err
	}
	if len(jobs) > 1 && (len(extra) > 0 || c.Name != "") {
		return nil, nil, fmt.Errorf("%s submits %d jobs: arguments and --name apply to one job target", target, len(jobs))
	}
	entry := map[string]int32{}
	var specs []*jobspb.JobSpec
	var trees []*merkle.Tree
	for i, j := range jobs {
		s, err := j.Manifest.Spec()
		if err != nil {
			return nil, nil, err
		}
		for _, d := range j.Manifest.After {
			s.Deps = append(s.Deps, &jobspb.Dependency{Kind: d.Kind, Index: -1, PipelineEntry: entry[d.Label]})
		}
		s.Command = append(s.Command, extra...)
		if err := c.override(s); err != nil {
			return nil, nil, err
		}
		entry[j.Manifest.Label] = int32(i + 1)
		specs = append(specs, s)
		trees = append(trees, j.Tree)
	}
	return specs, trees, nil
}

// printPipeline prints the jobs of a pipeline as they were submitted: one
// line each with its id, name and the ids it runs after, or only the ids.
func printPipeline(w io.Writer, specs []*jobspb.JobSpec, ids []int64, parsable bool) {
	if parsable {
		for _, id := range ids {
			fmt.Fprintln(w, id)
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOBID\tNAME\tAFTER")
	for i, s := range specs {
		var after []string
		for _, d := range s.Deps {
			id := d.JobId
			if d.PipelineEntry > 0 {
				id = ids[d.PipelineEntry-1]
			}
			after = append(after, fmt.Sprintf("%s:%d", d.Kind, id))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\n", ids[i], s.Name, strings.Join(after, ","))
	}
	tw.Flush()
}
