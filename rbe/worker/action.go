package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rbe/process"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// actionGrace is how long an action's process group has between SIGTERM
// and SIGKILL when it times out or is cancelled.
const actionGrace = 2 * time.Second

// actionRunner executes REAPI actions in fresh directories.
type actionRunner struct {
	name string
	cas  *client.CAS
	// cache is the worker's local copy of CAS blobs, which inputs are
	// hard-linked from.
	cache    *execroot.Cache
	execRoot string
	reaper   *process.Reaper
	// user is who payloads run as (nil: the worker's own user).
	user *process.User
}

// source is where the blobs the cache lacks come from: the server's CAS.
func (r *actionRunner) source() execroot.Source { return execroot.CASSource(r.cas) }

// declaredOutputs lists a Command's outputs: output_paths when given,
// otherwise the 2.0 output_files and output_directories.
func declaredOutputs(cmd *repb.Command) ([]execroot.Declared, error) {
	var out []execroot.Declared
	if len(cmd.OutputPaths) > 0 {
		for _, p := range cmd.OutputPaths {
			out = append(out, execroot.Declared{Path: p, Kind: execroot.Any})
		}
	} else {
		for _, p := range cmd.OutputFiles {
			out = append(out, execroot.Declared{Path: p, Kind: execroot.File})
		}
		for _, p := range cmd.OutputDirectories {
			out = append(out, execroot.Declared{Path: p, Kind: execroot.Dir})
		}
	}
	for _, o := range out {
		if err := execroot.CheckRelPath(o.Path); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "output %v", err)
		}
	}
	return out, nil
}

// readProto reads a message from the CAS, unless inline holds its bytes.
func (r *actionRunner) readProto(ctx context.Context, d digest.Digest, inline []byte, m proto.Message) error {
	b, err := r.blob(ctx, d, inline)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return status.Errorf(codes.InvalidArgument, "blob %s is not a %s: %v", d, m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}

func (r *actionRunner) blob(ctx context.Context, d digest.Digest, inline []byte) ([]byte, error) {
	switch {
	case len(inline) > 0 && digest.FromBytes(inline) == d:
		return inline, nil
	case d.Size() == 0:
		return nil, nil
	case d.Size() > client.BatchLimit:
		var buf bytes.Buffer
		if err := r.cas.Read(ctx, d, &buf); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
	blobs, err := r.cas.ReadBatch(ctx, []digest.Digest{d})
	if err != nil {
		return nil, err
	}
	return blobs[d], nil
}

// run executes one action and returns what to report. Errors that prevent
// running the action become the result's status; a command that runs and
// fails is a normal result with its exit code.
func (r *actionRunner) run(ctx context.Context, a *workerpb.AssignAction, ad digest.Digest) *workerpb.TaskResult {
	tr := &workerpb.TaskResult{TaskId: a.TaskId}
	res, err := r.execute(ctx, a, ad, tr)
	if res != nil {
		b, merr := proto.Marshal(res)
		if merr != nil {
			err = merr
		}
		tr.Result = b
	}
	if err != nil {
		st := status.Convert(err)
		if st.Code() == codes.Unknown {
			st = status.New(codes.Internal, err.Error())
		}
		tr.StatusCode, tr.StatusMessage = int32(st.Code()), st.Message()
	}
	return tr
}

func (r *actionRunner) execute(ctx context.Context, a *workerpb.AssignAction, ad digest.Digest, tr *workerpb.TaskResult) (*repb.ActionResult, error) {
	taskID := a.TaskId
	meta := &repb.ExecutedActionMetadata{Worker: r.name, WorkerStartTimestamp: timestamppb.Now(), InputFetchStartTimestamp: timestamppb.Now()}
	tr.FetchStartNs = time.Now().UnixNano()
	action := &repb.Action{}
	if err := r.readProto(ctx, ad, a.Action, action); err != nil {
		return nil, err
	}
	cd, err := digest.FromProto(action.CommandDigest)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "command digest: %v", err)
	}
	rootDigest, err := digest.FromProto(action.InputRootDigest)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "input root digest: %v", err)
	}
	cmd := &repb.Command{}
	if err := r.readProto(ctx, cd, a.Command, cmd); err != nil {
		return nil, err
	}
	if len(cmd.Arguments) == 0 {
		return nil, status.Error(codes.InvalidArgument, "command has no arguments")
	}
	if err := execroot.CheckRelPath(cmd.WorkingDirectory); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "working directory: %v", err)
	}
	outs, err := declaredOutputs(cmd)
	if err != nil {
		return nil, err
	}

	// dir stays the worker's, with its stdout and stderr, closed to
	// payloads but for the input root in it.
	dir := filepath.Join(r.execRoot, taskID)
	if err := os.Mkdir(dir, 0o711); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")
	tree, err := r.cache.LoadTree(ctx, r.source(), rootDigest)
	if err != nil {
		return nil, err
	}
	env := make([]string, 0, len(cmd.EnvironmentVariables))
	for _, v := range cmd.EnvironmentVariables {
		env = append(env, v.Name+"="+v.Value)
	}
	sort.Strings(env)
	stdout, err := os.OpenFile(filepath.Join(dir, "stdout"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(filepath.Join(dir, "stderr"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	timeout := time.Duration(0)
	if action.Timeout != nil {
		timeout = action.Timeout.AsDuration()
	}
	ran, err := r.cache.Run(ctx, execroot.Spec{
		Source: r.source(), Tree: tree, Root: root, WorkingDir: cmd.WorkingDirectory, Outputs: outs,
		Before: func(root string) error {
			err := r.user.HandOver(root)
			meta.InputFetchCompletedTimestamp = timestamppb.Now()
			meta.ExecutionStartTimestamp = timestamppb.Now()
			tr.ExecutionStartNs = time.Now().UnixNano()
			return err
		},
		After: func(root string) error {
			tr.ExecutionEndNs = time.Now().UnixNano()
			meta.ExecutionCompletedTimestamp = timestamppb.Now()
			return r.user.Reclaim(root)
		},
		Process: r.reaper.Wrap(process.Spec{Args: cmd.Arguments, Env: env, Stdout: stdout, Stderr: stderr, Timeout: timeout, Grace: actionGrace, Credential: r.user.Credential()}),
	})
	if err != nil {
		return nil, err
	}
	pr := ran.Process
	if ran.StartErr != nil {
		fmt.Fprintf(stderr, "rbs worker %s: cannot run %q: %v\n", r.name, cmd.Arguments[0], ran.StartErr)
		pr.ExitCode = 127
	}
	if ran.Unchecked != nil {
		return nil, fmt.Errorf("checking its inputs: %w", ran.Unchecked)
	}
	if pr.Cancelled {
		return nil, status.Error(codes.Canceled, "action cancelled")
	}
	if ran.Changed != "" {
		// Its result may come from the changed content: it is not reported.
		return nil, status.Errorf(codes.Aborted, "input %s was written to while the action ran; inputs are hard links into the worker's cache and must not be modified (copy an input before changing it)", ran.Changed)
	}

	meta.OutputUploadStartTimestamp = timestamppb.Now()
	c := ran.Outputs
	if c == nil {
		c = execroot.NewResult(&repb.ActionResult{})
	}
	c.ActionResult.ExitCode, c.ActionResult.ExecutionMetadata = int32(pr.ExitCode), meta
	blobs := c.Blobs()
	for _, f := range []struct {
		file *os.File
		set  func(*repb.Digest)
	}{
		{stdout, func(d *repb.Digest) { c.ActionResult.StdoutDigest = d }},
		{stderr, func(d *repb.Digest) { c.ActionResult.StderrDigest = d }},
	} {
		d, err := merkle.Hash(f.file.Name())
		if err != nil {
			return nil, err
		}
		name := f.file.Name()
		blobs = append(blobs, client.Blob{Digest: d, Open: func() (io.ReadCloser, error) { return os.Open(name) }})
		f.set(d.Proto())
	}
	if _, _, err := r.cas.Upload(ctx, blobs); err != nil {
		return nil, fmt.Errorf("uploading outputs: %w", err)
	}
	meta.OutputUploadCompletedTimestamp = timestamppb.Now()
	meta.WorkerCompletedTimestamp = timestamppb.Now()
	tr.UploadEndNs = time.Now().UnixNano()
	if pr.TimedOut {
		// The partial stdout and stderr are kept in the result.
		return c.ActionResult, status.Errorf(codes.DeadlineExceeded, "action timed out after %s", timeout)
	}
	return c.ActionResult, nil
}
