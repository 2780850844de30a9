package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Remote runs actions on a REAPI server: an rbs cluster or any other.
type Remote struct {
	instance string
	cas      *client.CAS
	ac       repb.ActionCacheClient
	exec     repb.ExecutionClient
}

var _ Executor = (*Remote)(nil)

// NewRemote returns an executor sending actions over conn to the given
// instance of a REAPI server.
func NewRemote(conn *grpc.ClientConn, instance string) *Remote {
	return &Remote{
		instance: instance,
		cas:      client.NewCAS(conn, instance),
		ac:       repb.NewActionCacheClient(conn),
		exec:     repb.NewExecutionClient(conn),
	}
}

// Run implements Executor: it sends a to be executed; the server serves
// it from its action cache when it can. Cached(r.Cache(), r) looks it up
// before uploading its inputs.
func (r *Remote) Run(ctx context.Context, a *Action, outRoot string) (*Result, error) {
	return prepared(ctx, r, a, outRoot)
}

func (r *Remote) run(ctx context.Context, a *Action, p *Prepared, outRoot string, skip bool) (*Result, error) {
	desc := describe(a)
	for attempt := 0; ; attempt++ {
		blobs := append(p.Tree.Blobs(),
			client.Blob{Digest: p.CommandDigest, Data: p.CommandBlob},
			client.Blob{Digest: p.ActionDigest, Data: p.ActionBlob})
		if _, _, err := r.cas.Upload(ctx, blobs); err != nil {
			return nil, fmt.Errorf("%s: uploading inputs: %w", desc, err)
		}
		resp, err := r.execute(ctx, p, skip || a.NoCache)
		if err == nil && resp.Status.GetCode() != int32(codes.OK) {
			err = status.ErrorProto(resp.Status)
		}
		// Inputs evicted between the upload and the execution are uploaded
		// again once.
		if status.Code(err) == codes.FailedPrecondition && attempt == 0 {
			continue
		}
		if status.Code(err) == codes.DeadlineExceeded && resp != nil {
			res := &Result{ExitCode: -1, Digest: p.ActionDigest}
			if resp.Result != nil {
				if res.Stdout, res.Stderr, err = r.outputStreams(ctx, resp.Result); err != nil {
					return nil, fmt.Errorf("%s: %w", desc, err)
				}
			}
			return res, nil
		}
		if err != nil {
			msg := err.Error()
			if resp != nil && resp.Message != "" {
				msg += " (" + resp.Message + ")"
			}
			return nil, fmt.Errorf("%s: remote execution failed: %s", desc, msg)
		}
		if resp.Result == nil {
			return nil, fmt.Errorf("%s: remote execution returned no result", desc)
		}
		res := &Result{ExitCode: int(resp.Result.ExitCode), Digest: p.ActionDigest, Cached: resp.CachedResult}
		if res.Stdout, res.Stderr, err = r.outputStreams(ctx, resp.Result); err != nil {
			return nil, fmt.Errorf("%s: %w", desc, err)
		}
		if res.ExitCode == 0 {
			if err := materialize(ctx, resp.Result, a.Outputs, a.OutputDirs, outRoot, &remoteSource{cas: r.cas}, desc); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
}

// Cache is the server's action cache and CAS.
func (r *Remote) Cache() Cache { return remoteCache{r} }

// remoteCache is the action cache and CAS of a REAPI server.
type remoteCache struct{ r *Remote }

// lookup asks the server's action cache, with stdout and stderr inlined.
// Whether the blobs it names are all there shows as they are read.
func (c remoteCache) lookup(ctx context.Context, p *Prepared) (*hit, error) {
	ar, err := c.r.ac.GetActionResult(ctx, &repb.GetActionResultRequest{
		InstanceName: c.r.instance, ActionDigest: p.ActionDigest.Proto(), InlineStdout: true, InlineStderr: true,
	})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	h := &hit{ar: ar}
	if h.stdout, h.stderr, err = c.r.outputStreams(ctx, ar); err != nil {
		return nil, err
	}
	return h, nil
}

func (c remoteCache) source() source { return &remoteSource{cas: c.r.cas} }

func (c remoteCache) open(ctx context.Context, d digest.Digest, _ bool) (io.ReadCloser, error) {
	b, err := readBlob(ctx, c.r.cas, d)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// record uploads the blobs res names, from the cache that holds them,
// with the action and its command, and then the result.
func (c remoteCache) record(ctx context.Context, p *Prepared, res *Result) error {
	found, err := blobsOf(ctx, res.ar, readsTrees(res.in))
	if err != nil {
		return err
	}
	var blobs []client.Blob
	for _, b := range found {
		blobs = append(blobs, client.Blob{Digest: b.d, Open: func() (io.ReadCloser, error) { return res.in.open(ctx, b.d, b.exec) }})
	}
	blobs = append(blobs, client.Blob{Digest: p.CommandDigest, Data: p.CommandBlob}, client.Blob{Digest: p.ActionDigest, Data: p.ActionBlob})
	if _, _, err := c.r.cas.Upload(ctx, blobs); err != nil {
		return err
	}
	_, err = c.r.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: c.r.instance, ActionDigest: p.ActionDigest.Proto(), ActionResult: res.ar})
	return err
}

// execute calls Execute and follows the operation to its end.
func (r *Remote) execute(ctx context.Context, p *Prepared, skipCache bool) (*repb.ExecuteResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := r.exec.Execute(ctx, &repb.ExecuteRequest{
		InstanceName: r.instance, ActionDigest: p.ActionDigest.Proto(), SkipCacheLookup: skipCache,
	})
	if err != nil {
		return nil, err
	}
	var last *longrunningpb.Operation
	for {
		op, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		last = op
		if op.Done {
			break
		}
	}
	if last == nil || !last.Done {
		return nil, errors.New("the server ended the execution before it completed")
	}
	if e := last.GetError(); e != nil {
		return nil, status.ErrorProto(e)
	}
	resp := &repb.ExecuteResponse{}
	if last.GetResponse() == nil {
		return nil, errors.New("the completed operation has no response")
	}
	if err := last.GetResponse().UnmarshalTo(resp); err != nil {
		return nil, fmt.Errorf("the operation's response is not an ExecuteResponse: %w", err)
	}
	return resp, nil
}

func (r *Remote) outputStreams(ctx context.Context, ar *repb.ActionResult) (stdout, stderr []byte, err error) {
	get := func(raw []byte, pd *repb.Digest) ([]byte, error) {
		if pd == nil {
			return raw, nil
		}
		d, err := digest.FromProto(pd)
		if err != nil {
			return nil, err
		}
		if raw != nil && digest.FromBytes(raw) == d {
			return raw, nil
		}
		return readBlob(ctx, r.cas, d)
	}
	if stdout, err = get(ar.StdoutRaw, ar.StdoutDigest); err != nil {
		return nil, nil, fmt.Errorf("reading stdout: %w", err)
	}
	if stderr, err = get(ar.StderrRaw, ar.StderrDigest); err != nil {
		return nil, nil, fmt.Errorf("reading stderr: %w", err)
	}
	return stdout, stderr, nil
}

// readBlob reads one blob into memory.
func readBlob(ctx context.Context, cas *client.CAS, d digest.Digest) ([]byte, error) {
	switch {
	case d.Size() == 0:
		return []byte{}, nil
	case d.Size() <= client.BatchLimit:
		blobs, err := cas.ReadBatch(ctx, []digest.Digest{d})
		if err != nil {
			return nil, err
		}
		b, ok := blobs[d]
		if !ok {
			return nil, status.Errorf(codes.NotFound, "blob %s not found", d)
		}
		return b, nil
	default:
		var buf bytes.Buffer
		if err := cas.Read(ctx, d, &buf); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	}
}

// remoteSource downloads output blobs from a remote CAS.
type remoteSource struct{ cas *client.CAS }

// batchBytes bounds the memory a round of batched reads holds.
const batchBytes = 32 << 20

func (s *remoteSource) bytes(ctx context.Context, d digest.Digest) ([]byte, error) {
	return readBlob(ctx, s.cas, d)
}

func (s *remoteSource) writeFiles(ctx context.Context, reqs []fileReq) error {
	var small []fileReq
	var size int64
	flush := func() error {
		if len(small) == 0 {
			return nil
		}
		ds := make([]digest.Digest, len(small))
		for i, f := range small {
			ds[i] = f.d
		}
		blobs, err := s.cas.ReadBatch(ctx, ds)
		if err != nil {
			return err
		}
		for _, f := range small {
			b, ok := blobs[f.d]
			if !ok {
				return status.Errorf(codes.NotFound, "blob %s not found", f.d)
			}
			if err := writeFile(f.dst, f.exec, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
				return err
			}
		}
		small, size = nil, 0
		return nil
	}
	for _, f := range reqs {
		if f.d.Size() > client.BatchLimit {
			if err := writeFile(f.dst, f.exec, func(w io.Writer) error { return s.cas.Read(ctx, f.d, w) }); err != nil {
				return err
			}
			continue
		}
		if size+f.d.Size() > batchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
		small = append(small, f)
		size += f.d.Size()
	}
	return flush()
}
