package service

import (
	"context"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/memo"
	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/auth"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Submit implements the Jobs API. It is the API's edge for submissions:
// every manifest is decoded and validated here, into the typed jobs the
// core takes.
func (s *Service) Submit(ctx context.Context, req *jobspb.SubmitRequest) (*jobspb.SubmitResponse, error) {
	if len(req.Manifests) == 0 {
		return nil, status.Error(codes.InvalidArgument, "no job manifest in the request")
	}
	if len(req.IdempotencyKey) > maxKey {
		return nil, status.Errorf(codes.InvalidArgument, "idempotency key of %d bytes: at most %d", len(req.IdempotencyKey), maxKey)
	}
	// Who submits: the user of a named token, else whom the client says
	// it runs as.
	user := auth.UserName(ctx)
	named := user != ""
	if !named {
		if err := checkUser(req.User); err != nil {
			return nil, err
		}
		user = req.User
	}
	jobs := make([]*manifest.Job, len(req.Manifests))
	for i, b := range req.Manifests {
		m, err := manifest.Decode(b)
		if err == nil {
			jobs[i], err = m.Job(i + 1)
		}
		if err != nil {
			if len(req.Manifests) > 1 {
				return nil, status.Errorf(codes.InvalidArgument, "entry %d: %v", i+1, err)
			}
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		jobs[i].Spec.User = user
		if named && jobs[i].Spec.CacheKey != "" {
			// Each user's jobs are answered only from their own.
			jobs[i].Spec.CacheKey = memo.Scoped(jobs[i].Spec.CacheKey, user)
		}
	}
	var ids []int64
	cached := false
	err := s.run(ctx, &request{write: true, done: make(chan struct{}), event: "submit", fn: func(c *sched.Core) error {
		var err error
		ids, err = c.SubmitOnce(req.IdempotencyKey, jobs)
		cached = err == nil && c.Cached(ids)
		return err
	}})
	if err != nil {
		return nil, err
	}
	resp := &jobspb.SubmitResponse{JobId: ids[len(ids)-1], JobIds: ids}
	if !cached {
		return resp, nil
	}
	// The jobs the cache may answer are answered before the client is:
	// those whose entries are being checked, and those after them.
	for {
		settling := false
		next, err := s.doNext(ctx, func(c *sched.Core) error {
			if settling = c.Settling(ids); !settling {
				for _, id := range ids {
					n, from := c.CachedTasks(id)
					resp.CachedTasks, resp.CachedFrom = append(resp.CachedTasks, n), append(resp.CachedFrom, from)
				}
			}
			return nil
		})
		if err != nil || !settling {
			return resp, nil // submitted, whatever the cache did
		}
		if err := s.await(ctx, next); err != nil {
			return resp, nil
		}
	}
}

// maxKey bounds a submission's idempotency key.
const maxKey = 128

// checkUser holds the user a client says it runs as to a name's length and
// characters.
func checkUser(u string) error {
	if len(u) > 64 || strings.ContainsFunc(u, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return status.Errorf(codes.InvalidArgument, "user %q: want at most 64 characters, none of them spaces or control characters", u)
	}
	return nil
}

// List implements the Jobs API.
func (s *Service) List(req *jobspb.ListRequest, stream jobspb.Jobs_ListServer) error {
	jobs, err := s.ListJobs(req)
	if err != nil {
		return err
	}
	return sendPages(jobs, func(p []*jobspb.JobInfo) error { return stream.Send(&jobspb.ListResponse{Jobs: p}) })
}

// ListJobs lists the jobs req selects, as readers see them.
func (s *Service) ListJobs(req *jobspb.ListRequest) ([]*jobspb.JobInfo, error) {
	f := sched.Filter{States: map[sched.State]bool{}, Queue: req.Queue, History: req.History,
		EndedAfter: req.EndedAfterUnixMs, EndedBefore: req.EndedBeforeUnixMs}
	f.History = f.History || f.EndedAfter != 0 || f.EndedBefore != 0
	for _, st := range req.States {
		state := sched.State(st)
		if !state.Valid() {
			return nil, status.Errorf(codes.InvalidArgument, "unknown state %q (states: %v)", st, sched.States)
		}
		f.States[state] = true
	}
	var jobs []*jobspb.JobInfo
	s.read(func(c *sched.Core) { jobs = c.List(f) })
	return jobs, nil
}

// Show implements the Jobs API.
func (s *Service) Show(req *jobspb.ShowRequest, stream jobspb.Jobs_ShowServer) error {
	jobs, err := s.ShowJob(req.Id)
	if err != nil {
		return err
	}
	return sendPages(jobs, func(p []*jobspb.JobInfo) error { return stream.Send(&jobspb.ShowResponse{Jobs: p}) })
}

// ShowJob returns a job, or an array's tasks, as readers see them: a job
// alone in full, with its placement, queue position and expected start
// when it waits.
func (s *Service) ShowJob(id string) ([]*jobspb.JobInfo, error) {
	var jobs []*jobspb.JobInfo
	var err error
	s.read(func(c *sched.Core) {
		var keys []sched.Key
		if keys, err = c.Lookup(id); err == nil {
			jobs = c.Infos(keys, len(keys) == 1)
		}
	})
	return jobs, err
}

// Cancel implements the Jobs API.
func (s *Service) Cancel(req *jobspb.CancelRequest, stream jobspb.Jobs_CancelServer) error {
	jobs, ended, err := s.CancelJobs(stream.Context(), req.Ids)
	if err != nil {
		return err
	}
	return sendPages(jobs, func(p []*jobspb.JobInfo) error {
		resp := &jobspb.CancelResponse{Jobs: p}
		for _, j := range p {
			if ended[j.Id] {
				resp.AlreadyEnded = append(resp.AlreadyEnded, j.Id)
			}
		}
		return stream.Send(resp)
	})
}

// CancelJobs cancels jobs (an array id: all its tasks) and returns them as
// they are once that is durable, with the ids of those that had already
// ended, which it left as they were.
func (s *Service) CancelJobs(ctx context.Context, ids []string) ([]*jobspb.JobInfo, map[string]bool, error) {
	var jobs []*jobspb.JobInfo
	ended := map[string]bool{}
	err := s.doWrite(ctx, func(c *sched.Core) error {
		keys, err := s.lookup(c, ids)
		if err != nil {
			return err
		}
		for _, k := range c.Cancel(keys) {
			ended[k.String()] = true
		}
		jobs = c.Infos(keys, false)
		return nil
	})
	return jobs, ended, err
}

// Release implements the Jobs API.
func (s *Service) Release(ctx context.Context, req *jobspb.ReleaseRequest) (*jobspb.ReleaseResponse, error) {
	var jobs []*jobspb.JobInfo
	err := s.doWrite(ctx, func(c *sched.Core) error {
		keys, err := s.lookup(c, req.Ids)
		if err != nil {
			return err
		}
		released, err := c.Release(keys)
		if err != nil {
			return err
		}
		jobs = c.Infos(released, false)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &jobspb.ReleaseResponse{Jobs: jobs}, nil
}

// lookup resolves job ids, array ids standing for all their tasks.
func (s *Service) lookup(c *sched.Core, ids []string) ([]sched.Key, error) {
	var all []sched.Key
	for _, id := range ids {
		keys, err := c.Lookup(id)
		if err != nil {
			return nil, err
		}
		all = append(all, keys...)
	}
	return all, nil
}

// pageSize is the most jobs one streamed answer holds.
const pageSize = 1000

// sendPages sends jobs in pages of at most pageSize.
func sendPages(jobs []*jobspb.JobInfo, send func([]*jobspb.JobInfo) error) error {
	for len(jobs) > 0 {
		n := min(len(jobs), pageSize)
		if err := send(jobs[:n]); err != nil {
			return err
		}
		jobs = jobs[n:]
	}
	return nil
}

// Queues implements the Jobs API.
func (s *Service) Queues(_ context.Context, _ *jobspb.QueuesRequest) (*jobspb.QueuesResponse, error) {
	return &jobspb.QueuesResponse{Queues: s.QueueList()}, nil
}

// QueueList describes the queues and their occupancy, as readers see them.
func (s *Service) QueueList() (queues []*jobspb.QueueInfo) {
	s.read(func(c *sched.Core) { queues = c.Queues() })
	return queues
}

// Wait implements the Jobs API: it sends each named job once it is done
// with (sched.Core.Done), those of one round together, and ends once it
// has sent them all.
func (s *Service) Wait(req *jobspb.WaitRequest, stream jobspb.Jobs_WaitServer) error {
	ctx := stream.Context()
	var keys []sched.Key
	var err error
	s.read(func(c *sched.Core) { keys, err = s.lookup(c, req.Ids) })
	if err != nil {
		return err
	}
	// Once each job has been asked, each later read takes in only what
	// the publications since found done: a wait on a large array reads
	// each of its tasks once, not once a round. The marks are those of
	// one View (from): a reload makes a new one, which is asked anew.
	waiting := make(map[sched.Key]bool, len(keys))
	for _, k := range keys {
		waiting[k] = true
	}
	var from *sched.Core
	var mark uint64
	for {
		var done []*jobspb.JobInfo
		changed := s.readNext(func(c *sched.Core) {
			var ended []sched.Key
			ends, next, ok := c.EndedSince(mark)
			if c != from || !ok {
				for k := range waiting {
					if c.Done(k) {
						ended = append(ended, k)
					}
				}
			} else {
				for _, k := range ends {
					if waiting[k] && c.Done(k) {
						ended = append(ended, k)
					}
				}
			}
			from, mark = c, next
			for _, k := range ended {
				delete(waiting, k)
			}
			slices.SortFunc(ended, sched.Key.Compare)
			done = c.Infos(ended, false)
		})
		if err := sendPages(done, func(p []*jobspb.JobInfo) error { return stream.Send(&jobspb.WaitResponse{Jobs: p}) }); err != nil {
			return err
		}
		if len(waiting) == 0 {
			return nil
		}
		if err := s.await(ctx, changed); err != nil {
			return err
		}
	}
}

// Logs implements the Jobs API: a job's stored output, then, with follow,
// what arrives until the job ends.
func (s *Service) Logs(req *jobspb.LogsRequest, stream jobspb.Jobs_LogsServer) error {
	return s.Output(stream.Context(), req, func(data []byte) error {
		return stream.Send(&jobspb.LogsResponse{Data: data})
	})
}

// Output sends a job's output as req asks (one rank or all, from an
// offset, following it or not) to send, in pieces.
func (s *Service) Output(ctx context.Context, req *jobspb.LogsRequest, send func([]byte) error) error {
	k, err := s.one(ctx, req.Id)
	if err != nil {
		return err
	}
	// A job answered from the cache has the output of the one it was
	// answered with.
	s.read(func(c *sched.Core) { k = c.OutputOf(k) })
	if req.Offset < 0 {
		return status.Errorf(codes.InvalidArgument, "negative offset %d", req.Offset)
	}
	var nodes int
	s.read(func(c *sched.Core) { nodes = c.Nodes(k) })
	tr := &ranks{interleave: nodes > 1 && !req.OneRank, partial: map[int32][]byte{}}
	if req.OneRank {
		tr.rank = req.Rank
	}
	if req.OneRank && (req.Rank < 0 || int(req.Rank) >= nodes) {
		return status.Errorf(codes.InvalidArgument, "job %s has %d node(s): no rank %d (ranks: 0 to %d)", k, nodes, req.Rank, nodes-1)
	}
	return s.output(ctx, k, req.Offset, req.Follow, tr, send)
}

// one resolves an id that must name one job or array task.
func (s *Service) one(ctx context.Context, id string) (sched.Key, error) {
	var keys []sched.Key
	var err error
	s.read(func(c *sched.Core) { keys, err = c.Lookup(id) })
	if err != nil {
		return sched.Key{}, err
	}
	if len(keys) != 1 {
		return sched.Key{}, status.Errorf(codes.InvalidArgument, "job %s is an array of %d tasks: ask for one task, such as %s", id, len(keys), keys[0])
	}
	return keys[0], nil
}

// output sends job k's stored output, as tr gives it, from offset skip
// on, in pieces of at most 1 MiB, and, with follow, what arrives until the
// job is done with (it ends, or is found never to start) or ctx is done.
func (s *Service) output(ctx context.Context, k sched.Key, skip int64, follow bool, tr *ranks, send func([]byte) error) error {
	emit := func(data []byte) error {
		n := min(skip, int64(len(data)))
		data, skip = data[n:], skip-n
		for len(data) > 0 {
			n := min(len(data), 1<<20)
			if err := send(data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
		return nil
	}
	var after int64
	for {
		ended := false
		next := s.readNext(func(c *sched.Core) { ended = c.Done(k) })
		// Everything committed up to the round readers see is in the store.
		for {
			chunks, last, err := s.store.Logs(k.ID, k.Index, after, logsPart)
			if err != nil {
				return status.Errorf(codes.Internal, "reading output of job %s: %v", k, err)
			}
			if len(chunks) == 0 {
				break
			}
			after = last
			var data []byte
			for _, c := range chunks {
				data = append(data, tr.add(c)...)
			}
			if err := emit(data); err != nil {
				return err
			}
		}
		if ended {
			return emit(tr.flush())
		}
		if !follow {
			return nil
		}
		if err := s.await(ctx, next); err != nil {
			return nil
		}
	}
}

// Reserve implements the Jobs API.
func (s *Service) Reserve(ctx context.Context, req *jobspb.ReserveRequest) (*jobspb.ReserveResponse, error) {
	if req.Reservation == nil {
		return nil, status.Error(codes.InvalidArgument, "missing reservation")
	}
	err := s.doWrite(ctx, func(c *sched.Core) error { return c.Reserve(req.Reservation) })
	if err != nil {
		return nil, err
	}
	return &jobspb.ReserveResponse{Reservation: req.Reservation}, nil
}

// CancelReservation implements the Jobs API.
func (s *Service) CancelReservation(ctx context.Context, req *jobspb.CancelReservationRequest) (*jobspb.CancelReservationResponse, error) {
	err := s.doWrite(ctx, func(c *sched.Core) error { return c.Unreserve(req.Name) })
	if err != nil {
		return nil, err
	}
	return &jobspb.CancelReservationResponse{}, nil
}

// Reservations implements the Jobs API.
func (s *Service) Reservations(_ context.Context, _ *jobspb.ReservationsRequest) (*jobspb.ReservationsResponse, error) {
	return &jobspb.ReservationsResponse{Reservations: s.ReservationList()}, nil
}

// ReservationList lists the maintenance windows, the earliest first.
func (s *Service) ReservationList() (windows []*jobspb.Reservation) {
	s.read(func(c *sched.Core) { windows = c.Windows() })
	return windows
}

// Shares implements the Jobs API: fair share as readers see it.
func (s *Service) Shares(_ context.Context, _ *jobspb.SharesRequest) (resp *jobspb.SharesResponse, err error) {
	s.read(func(c *sched.Core) { resp = c.Shares() })
	return resp, nil
}
