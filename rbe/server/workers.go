package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"github.com/rbs-build/rbs/rbe/session"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

type workers struct {
	workerpb.UnimplementedWorkersServer
	sched     *scheduler.Scheduler
	jobs      Jobs // nil without a batch scheduler
	ac        blobstore.Store
	heartbeat int64 // interval in milliseconds
	log       logger
	metrics   *metrics
}

type logger interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}

// Connect holds one worker's stream: it registers the worker, forwards the
// scheduler's messages to it, and applies the heartbeats and results it
// sends.
func (ws *workers) Connect(stream workerpb.Workers_ConnectServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return status.Error(codes.InvalidArgument, "the first message of a worker stream must be Register")
	}
	var from net.Addr
	if p, ok := peer.FromContext(stream.Context()); ok {
		from = p.Addr
	}
	decoded, err := session.Decode(reg, from)
	if err != nil {
		return err
	}
	sess := session.New(decoded, time.Now())
	w, err := ws.sched.RegisterWorker(sess)
	if err != nil {
		return err
	}
	ws.log.Info("worker registered", "worker", w.ID(), "action_slots", reg.ActionSlots, "job_slots", reg.JobSlots)
	reason := "stream ended"
	defer func() {
		ws.sched.Disconnect(w)
		if ws.jobs != nil {
			ws.jobs.WorkerDown(sess)
		}
		ws.log.Info("worker disconnected", "worker", w.ID(), "reason", reason)
	}()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	var stored map[string]int64
	if ws.jobs != nil {
		stored = ws.jobs.WorkerUp(sess)
	}
	if err := stream.Send(&workerpb.ServerMessage{Kind: &workerpb.ServerMessage_Registered{Registered: &workerpb.Registered{
		WorkerId: w.ID(), HeartbeatIntervalMs: ws.heartbeat, JobOutput: stored,
	}}}); err != nil {
		return err
	}

	sendErr := make(chan error, 1)
	go func() {
		for {
			m, err := sess.Next(ctx)
			if err == nil {
				err = stream.Send(m)
			}
			if err != nil {
				sendErr <- err
				cancel()
				return
			}
		}
	}()
	// Receive in a goroutine of its own: a worker that is dropped for
	// missing its heartbeats (stopped, or cut off while its connection
	// stays open) ends the stream from the send side, which returning
	// here does; its Recv then fails.
	recvEnd := make(chan string, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				why := "stream ended"
				if err != io.EOF {
					why = err.Error()
				}
				recvEnd <- why
				return
			}
			sess.Heard(time.Now())
			switch k := m.Kind.(type) {
			case *workerpb.WorkerMessage_Heartbeat:
				if !sess.Reg.WholeHeartbeats {
					break
				}
				report := session.DecodeReport(k.Heartbeat)
				ws.sched.Reconcile(w, report)
				if ws.jobs != nil {
					ws.jobs.Reconcile(sess, report)
				}
			case *workerpb.WorkerMessage_Result:
				ws.complete(ctx, w, m.GetResult())
			case *workerpb.WorkerMessage_JobLog, *workerpb.WorkerMessage_JobEnded, *workerpb.WorkerMessage_JobStdinAck, *workerpb.WorkerMessage_JobStarted:
				if ws.jobs != nil {
					ws.jobs.FromWorker(sess, m)
				}
			}
		}
	}()
	select {
	case reason = <-recvEnd:
	case err := <-sendErr:
		reason = err.Error()
	}
	return nil
}

// complete turns a worker's TaskResult into an ExecuteResponse, with the
// time the server received the action as its queued timestamp, records its
// phases, writes successful results to the action cache, and reports the
// task done.
func (ws *workers) complete(ctx context.Context, w *scheduler.Worker, r *workerpb.TaskResult) {
	a, received, ok := ws.sched.Owned(w, r.TaskId)
	if !ok && r.ActionDigest != nil {
		// A task of the server this one took over from, which ended
		// before the worker reconnected.
		if d, err := digest.New(r.ActionDigest.Hash, r.ActionDigest.SizeBytes); err == nil {
			a, received, ok = ws.sched.AdoptFinished(w, r.TaskId, d)
		}
	}
	if !ok {
		w.Session().Ack(r.TaskId)
		return
	}
	resp := &repb.ExecuteResponse{Status: &spb.Status{Code: r.StatusCode, Message: r.StatusMessage}}
	if len(r.Result) > 0 {
		resp.Result = &repb.ActionResult{}
		if err := proto.Unmarshal(r.Result, resp.Result); err != nil {
			resp.Result = nil
			resp.Status = status.Newf(codes.Internal, "worker %s sent an unreadable action result: %v", w.ID(), err).Proto()
		} else if err := CheckResultPaths(resp.Result); err != nil {
			resp.Result = nil
			resp.Status = status.Newf(codes.Internal, "worker %s sent an action result that is refused: %v", w.ID(), err).Proto()
		}
	}
	if md := resp.Result.GetExecutionMetadata(); md != nil {
		if md.QueuedTimestamp == nil {
			md.QueuedTimestamp = timestamppb.New(received)
		}
		ws.metrics.observe(md)
	}
	if resp.Status.Code == int32(codes.OK) && resp.Result != nil && resp.Result.ExitCode == 0 && !a.DoNotCache {
		if err := PutActionResult(ctx, ws.ac, a.Digest, resp.Result); err != nil {
			ws.log.Warn("writing action result", "action", a.Digest.String(), "err", err)
		}
	}
	if resp.Result != nil && resp.Result.ExitCode != 0 {
		resp.Message = fmt.Sprintf("action %s exited with code %d on worker %s", a.Digest, resp.Result.ExitCode, w.ID())
	}
	ws.sched.Complete(w.ID(), r.TaskId, resp)
	w.Session().Ack(r.TaskId)
}

type cluster struct {
	workerpb.UnimplementedClusterServer
	sched *scheduler.Scheduler
	jobs  Jobs
}

func (c *cluster) Status(context.Context, *workerpb.StatusRequest) (*workerpb.StatusResponse, error) {
	return clusterStatus(c.sched, c.jobs), nil
}

// clusterStatus is the status of the workers, the action queue and the
// jobs.
func clusterStatus(sched *scheduler.Scheduler, jobs Jobs) *workerpb.StatusResponse {
	st := sched.Status()
	if jobs != nil {
		counts, slots := jobs.Status()
		for k, v := range counts {
			st.Jobs[k] = v
		}
		for _, w := range st.Workers {
			w.JobSlots.Used = slots[w.Id]
		}
	}
	return st
}
