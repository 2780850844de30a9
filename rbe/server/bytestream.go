package server

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/resource"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// uploadIdleTimeout is how long an interrupted upload waits to be resumed
// before its partial data is dropped.
const uploadIdleTimeout = 5 * time.Minute

type byteStream struct {
	bspb.UnimplementedByteStreamServer
	cas     blobstore.Store
	uploads *uploads
}

func (b *byteStream) Read(req *bspb.ReadRequest, stream bspb.ByteStream_ReadServer) error {
	name, err := resource.ParseRead(req.ResourceName)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	d := name.Digest
	if req.ReadOffset < 0 || req.ReadOffset > d.Size() {
		return status.Errorf(codes.OutOfRange, "read offset %d is outside blob %s", req.ReadOffset, d)
	}
	if req.ReadLimit < 0 {
		return status.Errorf(codes.InvalidArgument, "negative read limit %d", req.ReadLimit)
	}
	if name.Compressor != repb.Compressor_IDENTITY && req.ReadLimit != 0 {
		return status.Error(codes.InvalidArgument, "read limit must be zero for compressed-blobs")
	}
	rc, err := b.cas.Get(stream.Context(), d, req.ReadOffset)
	if err != nil {
		return err
	}
	defer rc.Close()
	var src io.Reader = rc
	if req.ReadLimit > 0 {
		src = io.LimitReader(rc, req.ReadLimit)
	}
	out := &chunkSender{stream: stream}
	if name.Compressor == repb.Compressor_ZSTD {
		enc, err := zstd.NewWriter(out, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return status.Errorf(codes.Internal, "zstd: %v", err)
		}
		if _, err := io.Copy(enc, src); err != nil {
			enc.Close()
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
		return out.flush()
	}
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	for {
		n, err := io.ReadFull(src, buf)
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			// A store's own status (a corrupt blob it removed is NOT_FOUND)
			// is the answer; what it read of this chunk is not sent.
			if _, ok := status.FromError(err); ok {
				return err
			}
			return status.Errorf(codes.Internal, "reading blob %s: %v", d, err)
		}
		if n > 0 {
			if serr := stream.Send(&bspb.ReadResponse{Data: buf[:n]}); serr != nil {
				return serr
			}
		}
		if err != nil {
			return nil
		}
	}
}

// chunks holds the buffers Read sends blobs through: a buffer of a chunk
// for every call would cost more than a small blob's whole read.
var chunks = sync.Pool{New: func() any {
	b := make([]byte, chunkSize)
	return &b
}}

// chunkSender turns writes into ReadResponses of at most chunkSize bytes.
type chunkSender struct {
	stream bspb.ByteStream_ReadServer
	buf    []byte
}

func (c *chunkSender) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		room := chunkSize - len(c.buf)
		take := min(room, len(p))
		c.buf = append(c.buf, p[:take]...)
		p = p[take:]
		if len(c.buf) == chunkSize {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (c *chunkSender) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.stream.Send(&bspb.ReadResponse{Data: c.buf})
	c.buf = c.buf[:0]
	return err
}

func (b *byteStream) Write(stream bspb.ByteStream_WriteServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	name, err := resource.ParseWrite(req.ResourceName)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	compressed := name.Compressor != repb.Compressor_IDENTITY
	if req.WriteOffset == 0 {
		missing, err := b.cas.FindMissing(stream.Context(), []digest.Digest{name.Digest})
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			// Someone already uploaded it: finish at once, as the API asks.
			committed := name.Digest.Size()
			if compressed {
				committed = -1
			}
			return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: committed})
		}
	}
	up, err := b.uploads.begin(stream.Context(), req.ResourceName, name, req.WriteOffset)
	if err != nil {
		return err
	}
	defer up.release()
	for {
		if req.WriteOffset != up.committed {
			return status.Errorf(codes.InvalidArgument, "write offset %d does not continue the upload of %s at %d", req.WriteOffset, req.ResourceName, up.committed)
		}
		if err := up.write(req.Data); err != nil {
			return err
		}
		if req.FinishWrite {
			if err := up.finish(); err != nil {
				return err
			}
			return stream.SendAndClose(&bspb.WriteResponse{CommittedSize: up.committed})
		}
		if req, err = stream.Recv(); err != nil {
			if err == io.EOF {
				return status.Errorf(codes.InvalidArgument, "upload of %s ended without finish_write", req.GetResourceName())
			}
			return err
		}
	}
}

func (b *byteStream) QueryWriteStatus(ctx context.Context, req *bspb.QueryWriteStatusRequest) (*bspb.QueryWriteStatusResponse, error) {
	name, err := resource.ParseWrite(req.ResourceName)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if committed, ok := b.uploads.committed(req.ResourceName); ok {
		return &bspb.QueryWriteStatusResponse{CommittedSize: committed}, nil
	}
	missing, err := b.cas.FindMissing(ctx, []digest.Digest{name.Digest})
	if err != nil {
		return nil, err
	}
	if len(missing) == 0 {
		return &bspb.QueryWriteStatusResponse{CommittedSize: name.Digest.Size(), Complete: true}, nil
	}
	return nil, status.Errorf(codes.NotFound, "no upload in progress for %s", req.ResourceName)
}

// uploads tracks ByteStream writes by resource name. Each upload streams
// through a pipe into one CAS Put that outlives any single Write call, so an
// interrupted upload can be resumed at its committed offset without the
// server buffering it; an upload left idle too long is abandoned.
type uploads struct {
	ctx context.Context
	cas blobstore.Store

	mu     sync.Mutex
	active map[string]*upload
	wg     sync.WaitGroup
}

type upload struct {
	key      string
	owner    *uploads
	inUse    chan struct{} // holds a token while a Write call feeds the upload
	pw       *io.PipeWriter
	done     chan struct{} // closed when Put has returned
	putErr   error
	idle     *time.Timer
	finished bool

	// committed is read by QueryWriteStatus under owner.mu.
	committed int64
}

func newUploads(ctx context.Context, cas blobstore.Store) *uploads {
	return &uploads{ctx: ctx, cas: cas, active: map[string]*upload{}}
}

// begin returns the upload for key, starting one when offset is 0, and
// holds it for the caller until release. A client resuming after a broken
// stream may arrive before the server has seen the old call end, so begin
// waits for the previous holder to let go.
func (u *uploads) begin(ctx context.Context, key string, name resource.Name, offset int64) (*upload, error) {
	u.mu.Lock()
	up, ok := u.active[key]
	if ok && offset == 0 && up.committed != 0 {
		// The client starts over: drop what it sent before.
		u.abandonLocked(up, errors.New("upload restarted"))
		ok = false
	}
	if !ok {
		if offset != 0 {
			u.mu.Unlock()
			return nil, status.Errorf(codes.InvalidArgument, "write offset %d for %s, but no upload is in progress", offset, key)
		}
		up = u.startLocked(key, name)
	}
	u.mu.Unlock()
	select {
	case up.inUse <- struct{}{}:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if up.finished {
		<-up.inUse
		return nil, status.Errorf(codes.Aborted, "upload %s ended while this call waited for it", key)
	}
	up.idle.Stop()
	return up, nil
}

func (u *uploads) startLocked(key string, name resource.Name) *upload {
	pr, pw := io.Pipe()
	up := &upload{key: key, owner: u, pw: pw, done: make(chan struct{}), inUse: make(chan struct{}, 1)}
	up.idle = time.AfterFunc(uploadIdleTimeout, func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.active[key] == up {
			u.abandonLocked(up, errors.New("upload abandoned"))
		}
	})
	u.active[key] = up
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		var src io.Reader = pr
		var dec *zstd.Decoder
		if name.Compressor == repb.Compressor_ZSTD {
			var err error
			if dec, err = zstd.NewReader(pr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxZstdWindow)); err != nil {
				up.putErr = status.Errorf(codes.Internal, "zstd: %v", err)
			}
			src = dec
		}
		if up.putErr == nil {
			up.putErr = u.cas.Put(u.ctx, name.Digest, src)
		}
		if dec != nil {
			dec.Close()
		}
		// Unblock a writer still sending after Put has stopped reading.
		if up.putErr != nil {
			pr.CloseWithError(up.putErr)
		} else {
			pr.CloseWithError(io.ErrClosedPipe)
		}
		close(up.done)
	}()
	return up
}

func (u *uploads) abandonLocked(up *upload, why error) {
	delete(u.active, up.key)
	up.idle.Stop()
	up.pw.CloseWithError(why)
}

func (u *uploads) committed(key string) (int64, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	up, ok := u.active[key]
	if !ok {
		return 0, false
	}
	return up.committed, true
}

// wait blocks until every upload's Put has returned; call after the
// uploads' context is cancelled.
func (u *uploads) wait() {
	u.mu.Lock()
	for _, up := range u.active {
		u.abandonLocked(up, errors.New("server stopping"))
	}
	u.mu.Unlock()
	u.wg.Wait()
}

func (up *upload) write(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if _, err := up.pw.Write(p); err != nil {
		<-up.done
		up.finished = true
		if up.putErr != nil {
			return up.putErr
		}
		return status.Errorf(codes.Aborted, "upload %s: %v", up.key, err)
	}
	up.owner.mu.Lock()
	up.committed += int64(len(p))
	up.owner.mu.Unlock()
	return nil
}

func (up *upload) finish() error {
	up.pw.Close()
	<-up.done
	up.finished = true
	return up.putErr
}

// release ends the caller's hold. An unfinished upload stays resumable until
// it has been idle for uploadIdleTimeout.
func (up *upload) release() {
	u := up.owner
	u.mu.Lock()
	if up.finished {
		if u.active[up.key] == up {
			delete(u.active, up.key)
		}
	} else if u.active[up.key] == up {
		up.idle.Reset(uploadIdleTimeout)
	}
	u.mu.Unlock()
	<-up.inUse
}
