package server

import (
	"context"

	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Bounds on the messages the server reads from the CAS on a client's word.
// Each is far above what Bazel writes, and keeps one request from making
// the server hold an arbitrary amount of memory.
const (
	maxActionSize  = 1 << 20
	maxCommandSize = 16 << 20
	maxTreeSize    = 64 << 20
	maxResultSize  = 16 << 20
	// maxDirectorySize keeps one Directory within a GetTree page.
	maxDirectorySize = maxMessageSize / 2
)

// readProto reads the CAS blob d into m, refusing with InvalidArgument one
// larger than limit before reading it. what names the message in errors.
// A missing blob is reported as blobstore's NotFound.
func readProto(ctx context.Context, cas blobstore.Store, d digest.Digest, limit int64, what string, m proto.Message) ([]byte, error) {
	if d.Size() > limit {
		return nil, status.Errorf(codes.InvalidArgument, "%s %s is %d bytes, over this server's limit of %d bytes", what, d, d.Size(), limit)
	}
	b, err := blobstore.GetBytesMax(ctx, cas, d, limit)
	if err != nil {
		return nil, err
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "blob %s is not a %s: %v", d, what, err)
	}
	return b, nil
}
