package blobstore

import (
	"bytes"
	"context"
	"io"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// findMissingBatch is how many digests one FindMissingBlobs call asks about,
// well under any server's message size limit.
const findMissingBatch = 10000

// Remote is a Store over the CAS of another REAPI server (another rbs,
// bazel-remote, Buildbarn): Get reads over ByteStream, from an offset with
// read_offset; Put writes over ByteStream; FindMissing is FindMissingBlobs.
// The remote's errors keep their gRPC codes, so an absent blob is NotFound
// and an unreachable server Unavailable.
type Remote struct {
	cas *client.CAS
}

var _ Store = (*Remote)(nil)

// NewRemote returns a Store over the CAS served on conn under instance
// (often ""). The caller owns conn.
func NewRemote(conn *grpc.ClientConn, instance string) *Remote {
	return &Remote{cas: client.NewCAS(conn, instance)}
}

// Get implements Store. It returns once the remote has answered: with the
// first bytes, the end of an empty read, or an error such as NotFound.
func (r *Remote) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	if offset < 0 || offset > d.Size() {
		return nil, badOffset(d, offset, d.Size())
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	fw := &firstWrite{w: pw, started: make(chan error, 1)}
	go func() {
		err := r.cas.ReadOffset(ctx, d, offset, fw)
		fw.start(err)
		pw.CloseWithError(err)
	}()
	if err := <-fw.started; err != nil {
		cancel()
		return nil, err
	}
	return cancelOnClose{pr, cancel}, nil
}

// firstWrite reports on started when the first bytes come, or else how the
// read ended.
type firstWrite struct {
	w       io.Writer
	once    sync.Once
	started chan error
}

func (f *firstWrite) start(err error) { f.once.Do(func() { f.started <- err }) }

func (f *firstWrite) Write(p []byte) (int, error) {
	f.start(nil)
	return f.w.Write(p)
}

// cancelOnClose ends the read behind a pipe when its reader is closed.
type cancelOnClose struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	c.cancel()
	return c.PipeReader.Close()
}

// Put implements Store. A failed read of rd abandons the upload, so the
// remote does not commit the blob.
func (r *Remote) Put(ctx context.Context, d digest.Digest, rd io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return r.cas.Write(ctx, client.Blob{Digest: d, Open: func() (io.ReadCloser, error) { return io.NopCloser(rd), nil }})
}

// FindMissing implements Store, in calls of at most findMissingBatch
// digests.
func (r *Remote) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	var missing []digest.Digest
	for len(ds) > 0 {
		n := min(len(ds), findMissingBatch)
		m, err := r.cas.FindMissing(ctx, ds[:n])
		if err != nil {
			return nil, err
		}
		missing, ds = append(missing, m...), ds[n:]
	}
	return missing, nil
}

// maxActionResult bounds the serialized ActionResult RemoteActionCache.Put
// accepts.
const maxActionResult = 16 << 20

// remoteLookups bounds the GetActionResult calls one FindMissing makes at
// once.
const remoteLookups = 16

// RemoteActionCache is a Store over the action cache of another REAPI
// server. Its blobs are serialized ActionResults, as the server's own action
// cache holds: Get is GetActionResult marshalled to bytes, Put unmarshals an
// ActionResult and calls UpdateActionResult, and FindMissing calls
// GetActionResult for each key (NotFound: missing). The remote decides what
// a hit is: an rbs server, like bazel-remote, answers only results whose
// blobs its CAS still holds.
type RemoteActionCache struct {
	instance string
	ac       repb.ActionCacheClient
}

var _ Store = (*RemoteActionCache)(nil)

// NewRemoteActionCache returns a Store over the action cache served on conn
// under instance. The caller owns conn.
func NewRemoteActionCache(conn *grpc.ClientConn, instance string) *RemoteActionCache {
	return &RemoteActionCache{instance: instance, ac: repb.NewActionCacheClient(conn)}
}

func (r *RemoteActionCache) get(ctx context.Context, d digest.Digest) (*repb.ActionResult, error) {
	return r.ac.GetActionResult(ctx, &repb.GetActionResultRequest{InstanceName: r.instance, ActionDigest: d.Proto()})
}

// Get implements Store.
func (r *RemoteActionCache) Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error) {
	res, err := r.get(ctx, d)
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(res)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encoding the action result of %s: %v", d, err)
	}
	if offset < 0 || offset > int64(len(b)) {
		return nil, badOffset(d, offset, int64(len(b)))
	}
	return io.NopCloser(bytes.NewReader(b[offset:])), nil
}

// Put implements Store.
func (r *RemoteActionCache) Put(ctx context.Context, d digest.Digest, rd io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(rd, maxActionResult+1))
	if err != nil {
		return err
	}
	if len(b) > maxActionResult {
		return TooLarge(d, int64(len(b)), maxActionResult)
	}
	res := &repb.ActionResult{}
	if err := proto.Unmarshal(b, res); err != nil {
		return status.Errorf(codes.InvalidArgument, "action result for %s: not an ActionResult: %v", d, err)
	}
	_, err = r.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: r.instance, ActionDigest: d.Proto(), ActionResult: res})
	return err
}

// FindMissing implements Store, with at most remoteLookups calls at once.
func (r *RemoteActionCache) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	absent := make([]bool, len(ds))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(remoteLookups)
	for i, d := range ds {
		g.Go(func() error {
			_, err := r.get(gctx, d)
			if IsNotFound(err) {
				absent[i] = true
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var missing []digest.Digest
	for i, d := range ds {
		if absent[i] {
			missing = append(missing, d)
		}
	}
	return missing, nil
}
