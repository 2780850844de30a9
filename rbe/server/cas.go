package server

import (
	"context"
	"strconv"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

const (
	// maxTreePageSize is the number of directories per GetTree page when
	// the client asks for none or for more.
	maxTreePageSize = 1000
	// maxTreePageBytes bounds the directory bytes of one GetTree page, so
	// that it fits in a message.
	maxTreePageBytes = maxMessageSize / 2
)

type cas struct {
	repb.UnimplementedContentAddressableStorageServer
	store blobstore.Store
}

func parseDigests(ps []*repb.Digest) ([]digest.Digest, error) {
	ds := make([]digest.Digest, len(ps))
	for i, p := range ps {
		d, err := digest.FromProto(p)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		ds[i] = d
	}
	return ds, nil
}

func checkDigestFunction(f repb.DigestFunction_Value) error {
	if f != repb.DigestFunction_UNKNOWN && f != repb.DigestFunction_SHA256 {
		return status.Errorf(codes.InvalidArgument, "unsupported digest function %v: this server uses SHA256", f)
	}
	return nil
}

func (c *cas) FindMissingBlobs(ctx context.Context, req *repb.FindMissingBlobsRequest) (*repb.FindMissingBlobsResponse, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	ds, err := parseDigests(req.BlobDigests)
	if err != nil {
		return nil, err
	}
	missing, err := c.store.FindMissing(ctx, ds)
	if err != nil {
		return nil, err
	}
	return &repb.FindMissingBlobsResponse{MissingBlobDigests: digest.Protos(missing)}, nil
}

func (c *cas) BatchUpdateBlobs(ctx context.Context, req *repb.BatchUpdateBlobsRequest) (*repb.BatchUpdateBlobsResponse, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	// The declared sizes are bounded as well as the bytes sent, before
	// anything is decoded: a compressed blob cannot claim more room than
	// an uncompressed one.
	var total, declared int64
	for _, r := range req.Requests {
		total += int64(len(r.Data))
		if size := r.Digest.GetSizeBytes(); size > 0 {
			declared += min(size, MaxBatchSize+1)
		}
	}
	if max(total, declared) > MaxBatchSize {
		return nil, status.Errorf(codes.InvalidArgument, "batch of %d bytes exceeds the limit of %d bytes: upload large blobs with ByteStream", max(total, declared), MaxBatchSize)
	}
	resp := &repb.BatchUpdateBlobsResponse{Responses: make([]*repb.BatchUpdateBlobsResponse_Response, len(req.Requests))}
	for i, r := range req.Requests {
		resp.Responses[i] = &repb.BatchUpdateBlobsResponse_Response{Digest: r.Digest, Status: statusProto(c.update(ctx, r))}
	}
	return resp, nil
}

func (c *cas) update(ctx context.Context, r *repb.BatchUpdateBlobsRequest_Request) error {
	d, err := digest.FromProto(r.Digest)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	data := r.Data
	switch r.Compressor {
	case repb.Compressor_IDENTITY:
	case repb.Compressor_ZSTD:
		// BatchUpdateBlobs has bounded d's size; the decoder stops at
		// MaxBatchSize whatever the data claims.
		if data, err = zstdDecoder().DecodeAll(r.Data, make([]byte, 0, d.Size())); err != nil {
			return status.Errorf(codes.InvalidArgument, "blob %s: invalid zstd data: %v", d, err)
		}
		if int64(len(data)) != d.Size() {
			return status.Errorf(codes.InvalidArgument, "blob %s: zstd data decodes to %d bytes, not %d", d, len(data), d.Size())
		}
	default:
		return status.Errorf(codes.InvalidArgument, "blob %s: unsupported compressor %v", d, r.Compressor)
	}
	return blobstore.PutBytes(ctx, c.store, d, data)
}

func (c *cas) BatchReadBlobs(ctx context.Context, req *repb.BatchReadBlobsRequest) (*repb.BatchReadBlobsResponse, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	ds, err := parseDigests(req.Digests)
	if err != nil {
		return nil, err
	}
	var total int64
	for _, d := range ds {
		total += d.Size()
	}
	if total > MaxBatchSize {
		return nil, status.Errorf(codes.InvalidArgument, "batch of %d bytes exceeds the limit of %d bytes: read large blobs with ByteStream", total, MaxBatchSize)
	}
	resp := &repb.BatchReadBlobsResponse{Responses: make([]*repb.BatchReadBlobsResponse_Response, len(ds))}
	for i, d := range ds {
		data, err := blobstore.GetBytes(ctx, c.store, d)
		resp.Responses[i] = &repb.BatchReadBlobsResponse_Response{Digest: d.Proto(), Data: data, Status: statusProto(err)}
	}
	return resp, nil
}

// GetTree returns the directories under a root, breadth first, in pages.
// Each distinct directory is visited once, however many times the tree
// names it. The page token is the number of directories already returned;
// the walk is deterministic, so each page resumes where the previous one
// ended. Pages hold at most maxTreePageSize directories and stay within the
// message limit. Parts of the tree missing from the CAS are left out, as
// the API allows.
func (c *cas) GetTree(req *repb.GetTreeRequest, stream repb.ContentAddressableStorage_GetTreeServer) error {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return err
	}
	root, err := digest.FromProto(req.RootDigest)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	skip := 0
	if req.PageToken != "" {
		if skip, err = strconv.Atoi(req.PageToken); err != nil || skip < 0 {
			return status.Errorf(codes.InvalidArgument, "invalid page token %q", req.PageToken)
		}
	}
	pageSize := int(req.PageSize)
	if pageSize <= 0 || pageSize > maxTreePageSize {
		pageSize = maxTreePageSize
	}
	ctx := stream.Context()

	queue := []digest.Digest{root}
	queued := map[digest.Digest]bool{root: true}
	var page []*repb.Directory
	pageBytes := 0
	for seen := 0; len(queue) > 0; seen++ {
		d := queue[0]
		queue = queue[1:]
		dir, err := c.directory(ctx, d)
		if blobstore.IsNotFound(err) {
			if d == root {
				return status.Errorf(codes.NotFound, "root directory %s not found", root)
			}
			continue
		}
		if err != nil {
			return err
		}
		for _, child := range dir.Directories {
			cd, err := digest.FromProto(child.Digest)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "directory %s: child %q: %v", d, child.Name, err)
			}
			if !queued[cd] {
				queued[cd] = true
				queue = append(queue, cd)
			}
		}
		if seen < skip {
			continue
		}
		if size := int(d.Size()); len(page) > 0 && pageBytes+size > maxTreePageBytes {
			return stream.Send(&repb.GetTreeResponse{Directories: page, NextPageToken: strconv.Itoa(seen)})
		}
		page = append(page, dir)
		pageBytes += int(d.Size())
		if len(page) == pageSize && len(queue) > 0 {
			return stream.Send(&repb.GetTreeResponse{Directories: page, NextPageToken: strconv.Itoa(seen + 1)})
		}
	}
	return stream.Send(&repb.GetTreeResponse{Directories: page})
}

func (c *cas) directory(ctx context.Context, d digest.Digest) (*repb.Directory, error) {
	dir := &repb.Directory{}
	if _, err := readProto(ctx, c.store, d, maxDirectorySize, "Directory", dir); err != nil {
		return nil, err
	}
	return dir, nil
}
