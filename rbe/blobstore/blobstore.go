// Package blobstore provides Store, the one storage interface behind both the
// content-addressable storage (CAS) and the action cache (AC), its backends,
// the combinators that chain them, and its decorators:
//
//   - NewDisk: the default backend, content-addressed files written to a
//     temporary file and renamed into place, bounded in size with
//     least-recently-used eviction, and re-indexed from disk on restart.
//   - NewMemory: an in-memory backend for tests.
//   - NewRemote and NewRemoteActionCache: the CAS (ByteStream,
//     FindMissingBlobs) and the action cache (GetActionResult,
//     UpdateActionResult) of another REAPI server: another rbs,
//     bazel-remote, Buildbarn.
//   - NewShard: blobs spread over backends by weighted rendezvous hashing.
//   - NewMirror: every blob on two backends, going on from one while the
//     other is unavailable and repairing what one lacks when it is read.
//   - NewCache: a local Disk in front of a remote store, read-through.
//   - NewS3: a bucket of an S3-compatible object store (Amazon S3, Ceph's
//     radosgw, MinIO), one object per blob under a key prefix. Package
//     s3test starts a real S3 server for its tests.
//   - NewResident: a Disk's small blobs kept in memory as well, so that a
//     cache hit reads its action result and outputs without a system call.
//   - ContentAddressed: the CAS decorator, which rejects writes whose bytes
//     do not match their digest before they become visible.
//   - Metrics.Instrument: the metrics decorator, counting bytes read and
//     written, lookups and hits, and a Disk's evictions and size, for
//     Prometheus.
//
// A chain of backends is described by one spec, such as
// "cache(disk:/var/cache/rbs?max_size=50GiB, grpc://cas.internal:8980)":
// Parse checks the text once into a typed Spec (the grammar is at Spec), and
// Open builds it as a CAS or an action cache. FindMissing stays exact
// through every combinator.
//
// Errors use gRPC status codes as their vocabulary: a missing blob is
// codes.NotFound, a corrupt write codes.InvalidArgument, a backend that
// cannot be reached codes.Unavailable.
package blobstore

import (
	"bytes"
	"context"
	"io"

	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Store holds blobs keyed by digest. In the CAS the key is the digest of the
// content; in the action cache it is an action's digest and the content is
// the serialized ActionResult.
type Store interface {
	// Get opens the blob named by d for reading, starting offset bytes in.
	// It returns a codes.NotFound error when the blob is absent.
	Get(ctx context.Context, d digest.Digest, offset int64) (io.ReadCloser, error)
	// Put stores the bytes read from r until EOF under d. If reading r fails
	// the blob is not stored, and nothing of it becomes visible.
	Put(ctx context.Context, d digest.Digest, r io.Reader) error
	// FindMissing returns those of ds that are not stored. Blobs found count
	// as used for eviction purposes.
	FindMissing(ctx context.Context, ds []digest.Digest) ([]digest.Digest, error)
}

// GetBytes reads a whole blob into memory.
func GetBytes(ctx context.Context, s Store, d digest.Digest) ([]byte, error) {
	rc, err := s.Get(ctx, d, 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// GetBytesMax reads a whole blob into memory, but no more than max bytes of
// it: a longer blob fails with codes.InvalidArgument after at most max+1
// bytes were read. Callers that know the blob's size from a CAS digest
// should refuse it before calling.
func GetBytesMax(ctx context.Context, s Store, d digest.Digest, max int64) ([]byte, error) {
	rc, err := s.Get(ctx, d, 0)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, TooLarge(d, int64(len(b)), max)
	}
	return b, nil
}

// TooLarge is the error for a blob of size bytes (at least) where no more
// than max are accepted.
func TooLarge(d digest.Digest, size, max int64) error {
	return status.Errorf(codes.InvalidArgument, "blob %s is %d bytes or more, over the limit of %d bytes", d, size, max)
}

// PutBytes stores b under d.
func PutBytes(ctx context.Context, s Store, d digest.Digest, b []byte) error {
	return s.Put(ctx, d, bytes.NewReader(b))
}

// NotFound returns the error a Store reports for an absent blob.
func NotFound(d digest.Digest) error {
	return status.Errorf(codes.NotFound, "blob %s not found", d)
}

// IsNotFound reports whether err says a blob is absent.
func IsNotFound(err error) bool { return status.Code(err) == codes.NotFound }

func badOffset(d digest.Digest, offset, size int64) error {
	return status.Errorf(codes.OutOfRange, "offset %d is outside blob %s of %d bytes", offset, d, size)
}
