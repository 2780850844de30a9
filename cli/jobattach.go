package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/proto/jobspb"
)

// attach runs `rbs job submit -i` after the submission: it says on stderr
// which job it submitted, feeds it this process's stdin, copies its output
// to stdout, and fails unless the job COMPLETED, with the job's exit code
// as rbs's exit status (1 when it has none: cancelled before it ran, say).
func attach(jobs jobspb.JobsClient, id int64, parsable bool) error {
	if parsable {
		fmt.Fprintln(os.Stderr, id)
	} else {
		fmt.Fprintf(os.Stderr, "Submitted job %d\n", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := jobs.Attach(ctx)
	if err != nil {
		return fmt.Errorf("attaching to job %d: %w", id, err)
	}
	if err := stream.Send(&jobspb.AttachRequest{Id: fmt.Sprint(id)}); err != nil {
		return fmt.Errorf("attaching to job %d: %w", id, err)
	}
	go sendStdin(stream)
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return fmt.Errorf("job %d: the server ended the stream before the job ended; see rbs job show %d", id, id)
		}
		if err != nil {
			return fmt.Errorf("attached to job %d: %w", id, err)
		}
		if _, err := os.Stdout.Write(resp.Data); err != nil {
			return err
		}
		if j := resp.Job; j != nil {
			r := j.Record
			switch {
			case r.State == "COMPLETED":
				return nil
			case r.State == "PENDING":
				return fmt.Errorf("job %s can never start (%s): see rbs job show %s", j.Id, r.PendingReason, j.Id)
			case r.ExitCode == 0:
				return fmt.Errorf("job %s ended %s", j.Id, r.State)
			}
			return exitError{fmt.Errorf("job %s ended %s (exit %d)", j.Id, r.State, r.ExitCode), int(r.ExitCode)}
		}
	}
}

// sendStdin sends this process's stdin to the attached job, then its end.
// It stops when the stream breaks; the receiving side reports why.
func sendStdin(stream jobspb.Jobs_AttachClient) {
	buf := make([]byte, sched.MaxStdinChunk)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			if stream.Send(&jobspb.AttachRequest{Data: append([]byte(nil), buf[:n]...)}) != nil {
				return
			}
		}
		if err != nil {
			// End of file, or stdin cannot be read: either way the job's
			// stdin ends here.
			if stream.Send(&jobspb.AttachRequest{Eof: true}) == nil {
				stream.CloseSend()
			}
			return
		}
	}
}
