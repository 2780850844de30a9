package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/google/uuid"
	"github.com/rbs-build/rbs/rbe/digest"
	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// batchLimit keeps batch calls under the server's advertised limit with
	// room for message overhead.
	batchLimit = 3 << 20
	chunkSize  = 1 << 20
)

// CAS is a client of a content-addressable storage.
type CAS struct {
	Instance string
	cas      repb.ContentAddressableStorageClient
	bs       bspb.ByteStreamClient
}

// NewCAS returns a CAS client over conn.
func NewCAS(conn *grpc.ClientConn, instance string) *CAS {
	return &CAS{Instance: instance, cas: repb.NewContentAddressableStorageClient(conn), bs: bspb.NewByteStreamClient(conn)}
}

func capabilities(ctx context.Context, conn *grpc.ClientConn) (*repb.ServerCapabilities, error) {
	return repb.NewCapabilitiesClient(conn).GetCapabilities(ctx, &repb.GetCapabilitiesRequest{})
}

func (c *CAS) prefix() string {
	if c.Instance == "" {
		return ""
	}
	return c.Instance + "/"
}

// FindMissing returns those of ds the server does not have.
func (c *CAS) FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error) {
	req := &repb.FindMissingBlobsRequest{InstanceName: c.Instance, BlobDigests: digest.Protos(ds)}
	resp, err := c.cas.FindMissingBlobs(ctx, req)
	if err != nil {
		return nil, err
	}
	out := make([]digest.Digest, 0, len(resp.MissingBlobDigests))
	for _, p := range resp.MissingBlobDigests {
		d, err := digest.FromProto(p)
		if err != nil {
			return nil, fmt.Errorf("server returned a bad digest: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// Blob is content to upload: in memory, or opened on demand.
type Blob struct {
	Digest digest.Digest
	Data   []byte                        // set for in-memory blobs
	Open   func() (io.ReadCloser, error) // set otherwise
}

func (b Blob) bytes() ([]byte, error) {
	if b.Data != nil || b.Open == nil {
		return b.Data, nil
	}
	rc, err := b.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func (b Blob) reader() (io.ReadCloser, error) {
	if b.Open != nil {
		return b.Open()
	}
	return io.NopCloser(bytes.NewReader(b.Data)), nil
}

// UploadOption adjusts what Upload reports while it runs.
type UploadOption func(*uploadOptions)

type uploadOptions struct {
	missing  func([]digest.Digest)
	progress func(n int64)
}

// OnMissing has Upload call f once, after the server has said what it
// lacks and before anything is sent, with the digests Upload is about to
// send: the blobs the server is missing, each once.
func OnMissing(f func(missing []digest.Digest)) UploadOption {
	return func(o *uploadOptions) { o.missing = f }
}

// OnProgress has Upload call f with each amount of bytes sent, as it goes:
// the bytes of a batch once the server has accepted it, and those of a
// large blob chunk by chunk as they are streamed. When Upload succeeds the
// amounts add up to the size it returns.
func OnProgress(f func(n int64)) UploadOption {
	return func(o *uploadOptions) { o.progress = f }
}

// Upload sends the blobs the server is missing: small ones in batches, large
// ones over ByteStream. It returns how many blobs and bytes it sent.
func (c *CAS) Upload(ctx context.Context, blobs []Blob, opts ...UploadOption) (sent int, size int64, err error) {
	var o uploadOptions
	for _, opt := range opts {
		opt(&o)
	}
	progress := o.progress
	if progress == nil {
		progress = func(int64) {}
	}
	byDigest := map[digest.Digest]Blob{}
	ds := make([]digest.Digest, 0, len(blobs))
	for _, b := range blobs {
		if _, dup := byDigest[b.Digest]; !dup {
			byDigest[b.Digest] = b
			ds = append(ds, b.Digest)
		}
	}
	missing, err := c.FindMissing(ctx, ds)
	if err != nil {
		return 0, 0, err
	}
	// A server that names a digest twice, or one nobody asked about, does
	// not make Upload send or count anything twice.
	unique := missing[:0]
	asked := map[digest.Digest]bool{}
	for _, d := range missing {
		if _, ok := byDigest[d]; ok && !asked[d] {
			asked[d] = true
			unique = append(unique, d)
		}
	}
	missing = unique
	sort.Slice(missing, func(i, j int) bool { return missing[i].Size() < missing[j].Size() })
	if o.missing != nil {
		o.missing(append([]digest.Digest(nil), missing...))
	}
	var batch []*repb.BatchUpdateBlobsRequest_Request
	var batchBytes int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		resp, err := c.cas.BatchUpdateBlobs(ctx, &repb.BatchUpdateBlobsRequest{InstanceName: c.Instance, Requests: batch})
		if err != nil {
			return err
		}
		for _, r := range resp.Responses {
			if r.Status.GetCode() != 0 {
				return fmt.Errorf("uploading %s/%d: %s", r.Digest.GetHash(), r.Digest.GetSizeBytes(), r.Status.GetMessage())
			}
		}
		progress(batchBytes)
		batch, batchBytes = nil, 0
		return nil
	}
	for _, d := range missing {
		b := byDigest[d]
		if d.Size() > BatchLimit {
			if err := c.write(ctx, b, progress); err != nil {
				return sent, size, err
			}
		} else {
			if batchBytes+d.Size() > batchLimit {
				if err := flush(); err != nil {
					return sent, size, err
				}
			}
			data, err := b.bytes()
			if err != nil {
				return sent, size, err
			}
			batch = append(batch, &repb.BatchUpdateBlobsRequest_Request{Digest: d.Proto(), Data: data})
			batchBytes += d.Size()
		}
		sent++
		size += d.Size()
	}
	return sent, size, flush()
}

// chunks holds the buffers write streams blobs through: a buffer of a
// chunk for every upload would cost more than a small blob's whole write.
var chunks = sync.Pool{New: func() any {
	b := make([]byte, chunkSize)
	return &b
}}

// Write uploads one blob over ByteStream, whether or not the server has it.
func (c *CAS) Write(ctx context.Context, b Blob) error { return c.write(ctx, b, nil) }

// write streams b to the server, calling progress (if set) with the bytes
// of each chunk sent; once the server has committed the blob the amounts
// add up to its size, even when the server ended the stream early because
// it had the blob already.
func (c *CAS) write(ctx context.Context, b Blob, progress func(int64)) error {
	if progress == nil {
		progress = func(int64) {}
	}
	rc, err := b.reader()
	if err != nil {
		return err
	}
	defer rc.Close()
	stream, err := c.bs.Write(ctx)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("%suploads/%s/blobs/%s/%d", c.prefix(), uuid.NewString(), b.Digest.Hash(), b.Digest.Size())
	bp := chunks.Get().(*[]byte)
	defer chunks.Put(bp)
	buf := *bp
	var off, reported int64
	report := func() {
		if n := min(off, b.Digest.Size()) - reported; n > 0 {
			progress(n)
			reported += n
		}
	}
	for {
		n, rerr := io.ReadFull(rc, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			stream.CloseSend()
			return rerr
		}
		last := rerr != nil
		req := &bspb.WriteRequest{WriteOffset: off, Data: buf[:n], FinishWrite: last}
		if off == 0 {
			req.ResourceName = name
		}
		if err := stream.Send(req); err != nil {
			if err == io.EOF {
				break // the server ended early; CloseAndRecv says why
			}
			return err
		}
		off += int64(n)
		report()
		if last {
			break
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil {
		return fmt.Errorf("uploading %s: %w", b.Digest, err)
	}
	if resp.CommittedSize != b.Digest.Size() {
		return fmt.Errorf("uploading %s: server committed %d bytes", b.Digest, resp.CommittedSize)
	}
	off = b.Digest.Size()
	report()
	return nil
}

// Read streams the blob d into w, verifying its digest.
func (c *CAS) Read(ctx context.Context, d digest.Digest, w io.Writer) error {
	return c.ReadOffset(ctx, d, 0, w)
}

// ReadOffset streams the blob d into w from offset bytes in, with
// ByteStream's read_offset. A whole blob (offset 0) is verified against its
// digest; the rest of one is checked to have the length the digest says.
func (c *CAS) ReadOffset(ctx context.Context, d digest.Digest, offset int64, w io.Writer) error {
	stream, err := c.bs.Read(ctx, &bspb.ReadRequest{ResourceName: fmt.Sprintf("%sblobs/%s/%d", c.prefix(), d.Hash(), d.Size()), ReadOffset: offset})
	if err != nil {
		return err
	}
	var v *digest.Verifier
	if offset == 0 {
		v = digest.NewVerifier(d)
		w = io.MultiWriter(w, v)
	}
	var n int64
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", d, err)
		}
		if _, err := w.Write(resp.Data); err != nil {
			return fmt.Errorf("reading %s: %w", d, err)
		}
		n += int64(len(resp.Data))
	}
	if v != nil {
		return v.Check()
	}
	if n != d.Size()-offset {
		return fmt.Errorf("reading %s from offset %d: server sent %d bytes, want %d", d, offset, n, d.Size()-offset)
	}
	return nil
}

// BatchLimit is the largest blob ReadBatch fetches; larger ones must be read
// with Read.
const BatchLimit = batchLimit / 4

// ReadBatch fetches small blobs (each at most BatchLimit bytes) with as few
// BatchReadBlobs calls as the size limit allows, verifying each.
func (c *CAS) ReadBatch(ctx context.Context, ds []digest.Digest) (map[digest.Digest][]byte, error) {
	out := make(map[digest.Digest][]byte, len(ds))
	var batch []*repb.Digest
	var batchBytes int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		resp, err := c.cas.BatchReadBlobs(ctx, &repb.BatchReadBlobsRequest{InstanceName: c.Instance, Digests: batch})
		if err != nil {
			return err
		}
		for _, r := range resp.Responses {
			d, err := digest.FromProto(r.Digest)
			if err != nil {
				return fmt.Errorf("server returned a bad digest: %w", err)
			}
			if code := codes.Code(r.Status.GetCode()); code != codes.OK {
				return status.Errorf(code, "reading %s: %s", d, r.Status.GetMessage())
			}
			if digest.FromBytes(r.Data) != d {
				return fmt.Errorf("reading %s: server sent bytes of another digest", d)
			}
			out[d] = r.Data
		}
		batch, batchBytes = nil, 0
		return nil
	}
	seen := map[digest.Digest]bool{}
	for _, d := range ds {
		if seen[d] {
			continue
		}
		seen[d] = true
		if d.Size() > BatchLimit {
			return nil, fmt.Errorf("blob %s is too large for a batch read", d)
		}
		if batchBytes+d.Size() > batchLimit || len(batch) >= 10000 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		batch = append(batch, d.Proto())
		batchBytes += d.Size()
	}
	return out, flush()
}
