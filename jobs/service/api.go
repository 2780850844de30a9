package service

import (
	"context"

	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/proto/jobspb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Submit implements the Jobs API.
func (s *Service) Submit(ctx context.Context, req *jobspb.SubmitRequest) (*jobspb.SubmitResponse, error) {
	if req.Spec == nil {
		return nil, status.Error(codes.InvalidArgument, "missing job spec")
	}
	var id int64
	err := s.do(ctx, func(c *sched.Core) error {
		var err error
		id, err = c.Submit(req.Spec)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &jobspb.SubmitResponse{JobId: id}, nil
}

// List implements the Jobs API.
func (s *Service) List(ctx context.Context, req *jobspb.ListRequest) (*jobspb.ListResponse, error) {
	f := sched.Filter{States: map[sched.State]bool{}, Queue: req.Queue, History: req.History}
	for _, st := range req.States {
		state := sched.State(st)
		if !state.Valid() {
			return nil, status.Errorf(codes.InvalidArgument, "unknown state %q (states: %v)", st, sched.States)
		}
		f.States[state] = true
	}
	resp := &jobspb.ListResponse{}
	err := s.do(ctx, func(c *sched.Core) error {
		resp.Jobs = c.List(f)
		return nil
	})
	return resp, err
}

// Show implements the Jobs API.
func (s *Service) Show(ctx context.Context, req *jobspb.ShowRequest) (*jobspb.ShowResponse, error) {
	resp := &jobspb.ShowResponse{}
	err := s.do(ctx, func(c *sched.Core) error {
		keys, err := c.Lookup(req.Id)
		if err != nil {
			return err
		}
		for _, k := range keys {
			resp.Jobs = append(resp.Jobs, c.Info(k))
		}
		return nil
	})
	return resp, err
}

// Cancel implements the Jobs API.
func (s *Service) Cancel(ctx context.Context, req *jobspb.CancelRequest) (*jobspb.CancelResponse, error) {
	resp := &jobspb.CancelResponse{}
	err := s.do(ctx, func(c *sched.Core) error {
		var all []sched.Key
		for _, id := range req.Ids {
			keys, err := c.Lookup(id)
			if err != nil {
				return err
			}
			all = append(all, keys...)
		}
		c.Cancel(all)
		for _, k := range all {
			resp.Jobs = append(resp.Jobs, c.Info(k))
		}
		return nil
	})
	return resp, err
}

// Queues implements the Jobs API.
func (s *Service) Queues(ctx context.Context, _ *jobspb.QueuesRequest) (*jobspb.QueuesResponse, error) {
	resp := &jobspb.QueuesResponse{}
	err := s.do(ctx, func(c *sched.Core) error {
		resp.Queues = c.Queues()
		return nil
	})
	return resp, err
}

// Wait implements the Jobs API: it returns once every named job has ended.
func (s *Service) Wait(ctx context.Context, req *jobspb.WaitRequest) (*jobspb.WaitResponse, error) {
	var keys []sched.Key
	if err := s.do(ctx, func(c *sched.Core) error {
		for _, id := range req.Ids {
			k, err := c.Lookup(id)
			if err != nil {
				return err
			}
			keys = append(keys, k...)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for {
		changed := s.changes()
		resp := &jobspb.WaitResponse{}
		ended := false
		if err := s.do(ctx, func(c *sched.Core) error {
			if ended = c.AllEnded(keys); ended {
				for _, k := range keys {
					resp.Jobs = append(resp.Jobs, c.Info(k))
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if ended {
			return resp, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
}

// Logs implements the Jobs API: a job's stored output, then, with follow,
// what arrives until the job ends.
func (s *Service) Logs(req *jobspb.LogsRequest, stream jobspb.Jobs_LogsServer) error {
	ctx := stream.Context()
	var keys []sched.Key
	if err := s.do(ctx, func(c *sched.Core) error {
		var err error
		keys, err = c.Lookup(req.Id)
		return err
	}); err != nil {
		return err
	}
	if len(keys) != 1 {
		return status.Errorf(codes.InvalidArgument, "job %s is an array of %d tasks: ask for one task, such as %s", req.Id, len(keys), keys[0])
	}
	k := keys[0]
	var after int64
	for {
		changed := s.changes()
		ended := false
		if req.Follow {
			if err := s.do(ctx, func(c *sched.Core) error {
				ended = c.AllEnded(keys)
				return nil
			}); err != nil {
				return err
			}
		}
		for {
			data, last, err := s.store.Logs(k.ID, k.Index, after, logsPart)
			if err != nil {
				return status.Errorf(codes.Internal, "reading output of job %s: %v", k, err)
			}
			if len(data) == 0 {
				break
			}
			after = last
			for len(data) > 0 {
				n := min(len(data), 1<<20)
				if err := stream.Send(&jobspb.LogsResponse{Data: data[:n]}); err != nil {
					return err
				}
				data = data[n:]
			}
		}
		if !req.Follow || ended {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil
		}
	}
}
