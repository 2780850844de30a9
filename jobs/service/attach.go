package service

import (
	"context"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Attach implements the Jobs API: it feeds the client's stdin to an
// interactive job and streams back the job's output until it ends, then
// the job. The stdin goes through the Core, which holds at most
// sched.MaxStdin of it; while it holds that much, the next chunk waits and
// the client, by gRPC's flow control, with it.
func (s *Service) Attach(stream jobspb.Jobs_AttachServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.Id == "" {
		return status.Error(codes.InvalidArgument, "the first message of Attach must name the job")
	}
	k, err := s.one(ctx, first.Id)
	if err != nil {
		return err
	}
	if err := s.do(ctx, func(c *sched.Core) error { return c.Attach(k) }); err != nil {
		return err
	}
	defer s.post(func(c *sched.Core) error {
		c.Detach(k)
		return nil
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stdinErr := make(chan error, 1)
	go func() {
		err := s.stdin(ctx, k, first, stream)
		stdinErr <- err
		if err != nil {
			cancel()
		}
	}()
	if err := s.output(ctx, k, 0, true, &ranks{}, func(data []byte) error {
		return stream.Send(&jobspb.AttachResponse{Data: data})
	}); err != nil {
		return err
	}
	select {
	case err := <-stdinErr:
		if err != nil {
			return err
		}
	default:
	}
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	var jobs []*jobspb.JobInfo
	if err := s.do(ctx, func(c *sched.Core) error {
		jobs = c.Infos([]sched.Key{k}, false)
		return nil
	}); err != nil {
		return err
	}
	return stream.Send(&jobspb.AttachResponse{Job: jobs[0]})
}

// stdin passes the client's stdin, from m on, to the Core until the client
// closes it or goes away, which closes it too.
func (s *Service) stdin(ctx context.Context, k sched.Key, m *jobspb.AttachRequest, stream jobspb.Jobs_AttachServer) error {
	for {
		if len(m.Data) > sched.MaxStdinChunk {
			return status.Errorf(codes.InvalidArgument, "a stdin chunk of %d bytes: send at most %d at a time", len(m.Data), sched.MaxStdinChunk)
		}
		for {
			taken := false
			next, err := s.doNext(ctx, func(c *sched.Core) error {
				taken = c.Stdin(k, m.Data, m.Eof)
				return nil
			})
			if err != nil {
				return nil // the scheduler stopped: the output's end says so
			}
			if taken {
				break
			}
			select {
			case <-next:
			case <-ctx.Done():
				return nil
			}
		}
		if m.Eof {
			return nil
		}
		var err error
		if m, err = stream.Recv(); err != nil {
			s.post(func(c *sched.Core) error {
				c.Detach(k)
				return nil
			})
			return nil
		}
	}
}
