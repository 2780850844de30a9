package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

type execution struct {
	repb.UnimplementedExecutionServer
	sched   *scheduler.Scheduler
	cas     blobstore.Store
	ac      blobstore.Store
	metrics *metrics
}

// missing is the FAILED_PRECONDITION error REAPI prescribes for blobs an
// Execute needs that the CAS lacks; clients upload them and retry.
func missing(ds ...digest.Digest) error {
	st := status.Newf(codes.FailedPrecondition, "%d blobs the action needs are missing from the CAS (first: %s)", len(ds), ds[0])
	pf := &errdetails.PreconditionFailure{}
	for _, d := range ds {
		pf.Violations = append(pf.Violations, &errdetails.PreconditionFailure_Violation{
			Type: "MISSING", Subject: fmt.Sprintf("blobs/%s/%d", d.Hash(), d.Size()),
		})
	}
	if withDetails, err := st.WithDetails(pf); err == nil {
		st = withDetails
	}
	return st.Err()
}

// getProto reads a message of at most limit bytes from the CAS and returns
// its bytes too; a missing one is the FAILED_PRECONDITION REAPI prescribes.
func (e *execution) getProto(ctx context.Context, d digest.Digest, limit int64, what string, m proto.Message) ([]byte, error) {
	b, err := readProto(ctx, e.cas, d, limit, what, m)
	if blobstore.IsNotFound(err) {
		return nil, missing(d)
	}
	return b, err
}

// maxInlineProto bounds the Action and Command bytes sent with an
// assignment; larger ones the worker reads from the CAS.
const maxInlineProto = 1 << 20

func (e *execution) Execute(req *repb.ExecuteRequest, stream repb.Execution_ExecuteServer) error {
	ctx := stream.Context()
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return err
	}
	d, err := digest.FromProto(req.ActionDigest)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if !req.SkipCacheLookup {
		res, err := GetValidatedActionResult(ctx, e.ac, e.cas, d)
		e.metrics.lookedUp("Execute", err)
		if err == nil {
			e.sched.CacheHit(d, res)
			return stream.Send(operation("cached/"+d.Hash(), d, scheduler.Completed, &repb.ExecuteResponse{Result: res, CachedResult: true, Status: statusProto(nil)}))
		}
		if !blobstore.IsNotFound(err) {
			return err
		}
	}
	a, err := e.load(ctx, d)
	if err != nil {
		return err
	}
	if req.ExecutionPolicy != nil {
		a.Priority = req.ExecutionPolicy.Priority
	}
	op, err := e.sched.Submit(a)
	if err != nil {
		return err
	}
	return e.follow(op.Name, stream)
}

// load reads what scheduling needs from the Action and Command, and checks
// that the input root is present.
func (e *execution) load(ctx context.Context, d digest.Digest) (scheduler.Action, error) {
	action := &repb.Action{}
	actionBlob, err := e.getProto(ctx, d, maxActionSize, "Action", action)
	if err != nil {
		return scheduler.Action{}, err
	}
	cd, err := digest.FromProto(action.CommandDigest)
	if err != nil {
		return scheduler.Action{}, status.Errorf(codes.InvalidArgument, "action %s: command digest: %v", d, err)
	}
	rd, err := digest.FromProto(action.InputRootDigest)
	if err != nil {
		return scheduler.Action{}, status.Errorf(codes.InvalidArgument, "action %s: input root digest: %v", d, err)
	}
	command := &repb.Command{}
	commandBlob, err := e.getProto(ctx, cd, maxCommandSize, "Command", command)
	if err != nil {
		return scheduler.Action{}, err
	}
	if gone, err := e.cas.FindMissing(ctx, []digest.Digest{rd}); err != nil {
		return scheduler.Action{}, err
	} else if len(gone) > 0 {
		return scheduler.Action{}, missing(gone...)
	}
	platform := action.Platform
	if len(platform.GetProperties()) == 0 {
		platform = command.Platform // REAPI 2.0 clients put it on the Command
	}
	a := scheduler.Action{Digest: d, DoNotCache: action.DoNotCache}
	if len(actionBlob)+len(commandBlob) <= maxInlineProto {
		a.ActionBlob, a.CommandBlob = actionBlob, commandBlob
	}
	for _, p := range platform.GetProperties() {
		a.Platform = append(a.Platform, scheduler.Property{Name: p.Name, Value: p.Value})
	}
	if action.Timeout != nil {
		if a.Timeout = action.Timeout.AsDuration(); a.Timeout < 0 {
			return scheduler.Action{}, status.Errorf(codes.InvalidArgument, "action %s: negative timeout %s", d, a.Timeout)
		}
	}
	return a, nil
}

func (e *execution) WaitExecution(req *repb.WaitExecutionRequest, stream repb.Execution_WaitExecutionServer) error {
	d, name, ok := parseOpName(req.Name)
	if !ok {
		return status.Errorf(codes.NotFound, "operation %q not found", req.Name)
	}
	if _, err := e.sched.Watch(name); status.Code(err) == codes.NotFound {
		// An operation this server did not start: one of the server it
		// took over from. Its action, in the cluster's CAS, answers for
		// it: the cached result, else an execution of its own.
		return e.resume(stream.Context(), d, stream)
	}
	return e.follow(name, stream)
}

// resume answers for an operation on action d that another server started:
// with the action's result in the action cache, or by executing it.
func (e *execution) resume(ctx context.Context, d digest.Digest, stream repb.Execution_WaitExecutionServer) error {
	if res, err := GetValidatedActionResult(ctx, e.ac, e.cas, d); err == nil {
		return stream.Send(operation("cached/"+d.Hash(), d, scheduler.Completed, &repb.ExecuteResponse{Result: res, CachedResult: true, Status: statusProto(nil)}))
	} else if !blobstore.IsNotFound(err) {
		return err
	}
	a, err := e.load(ctx, d)
	if err != nil {
		return err
	}
	op, err := e.sched.Resume(a)
	if err != nil {
		return err
	}
	return e.follow(op.Name, stream)
}

// opName is the name clients know an operation by: its action's digest,
// then the scheduler's name for it, so that a server that did not start the
// operation (one that took over from the server that did) can still answer
// for it.
func opName(d digest.Digest, name string) string {
	return d.Hash() + "-" + strconv.FormatInt(d.Size(), 10) + "/" + name
}

// parseOpName splits a name opName made.
func parseOpName(s string) (d digest.Digest, name string, ok bool) {
	action, name, ok := strings.Cut(s, "/")
	hash, size, ok2 := strings.Cut(action, "-")
	if !ok || !ok2 || name == "" {
		return digest.Digest{}, "", false
	}
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		return digest.Digest{}, "", false
	}
	if d, err = digest.New(hash, n); err != nil {
		return digest.Digest{}, "", false
	}
	return d, name, true
}

// follow streams an operation's state until it completes or the client
// goes away.
func (e *execution) follow(name string, stream interface {
	Send(*longrunningpb.Operation) error
	Context() context.Context
}) error {
	last := scheduler.Stage(-1)
	for {
		snap, err := e.sched.Watch(name)
		if err != nil {
			return err
		}
		if snap.Stage != last {
			if err := stream.Send(operation(opName(snap.Action, snap.Name), snap.Action, snap.Stage, snap.Response)); err != nil {
				return err
			}
			last = snap.Stage
		}
		if snap.Stage == scheduler.Completed {
			return nil
		}
		select {
		case <-snap.Changed:
		case <-stream.Context().Done():
			return stream.Context().Err()
		}
	}
}

func operation(name string, d digest.Digest, stage scheduler.Stage, resp *repb.ExecuteResponse) *longrunningpb.Operation {
	meta, _ := anypb.New(&repb.ExecuteOperationMetadata{Stage: stage.Proto(), ActionDigest: d.Proto()})
	op := &longrunningpb.Operation{Name: name, Metadata: meta}
	if stage == scheduler.Completed {
		op.Done = true
		r, _ := anypb.New(resp)
		op.Result = &longrunningpb.Operation_Response{Response: r}
	}
	return op
}
