package server

import (
	"bytes"
	"context"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The fuzz targets feed the CAS handlers what a client could send: any
// bytes as a batch request, any blobs as a directory tree. They check that
// nothing panics, that errors carry a status code, and that the answers
// keep their bounds. `go test` runs their seeds; `go test -fuzz
// FuzzBatchUpdateBlobs ./rbe/server` explores further.

func marshal(m proto.Message) []byte {
	b, _ := proto.Marshal(m)
	return b
}

func FuzzBatchUpdateBlobs(f *testing.F) {
	hello := []byte("hello")
	enc, _ := zstd.NewWriter(nil)
	var bomb bytes.Buffer
	zw, _ := zstd.NewWriter(&bomb)
	zw.Write(make([]byte, 8<<20))
	zw.Close()
	for _, req := range []*repb.BatchUpdateBlobsRequest{
		{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: digest.FromBytes(hello).Proto(), Data: hello}}},
		{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: digest.FromBytes(hello).Proto(), Data: enc.EncodeAll(hello, nil), Compressor: repb.Compressor_ZSTD}}},
		{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: &repb.Digest{Hash: strings.Repeat("a", 64), SizeBytes: 1 << 62}, Data: bomb.Bytes(), Compressor: repb.Compressor_ZSTD}}},
		{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: &repb.Digest{Hash: strings.Repeat("a", 64), SizeBytes: 1 << 20}, Data: bomb.Bytes(), Compressor: repb.Compressor_ZSTD}}},
		{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: &repb.Digest{Hash: "zz", SizeBytes: -1}}}},
		{Requests: []*repb.BatchUpdateBlobsRequest_Request{{Digest: digest.FromBytes(hello).Proto(), Data: hello, Compressor: 99}}},
	} {
		f.Add(marshal(req))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &repb.BatchUpdateBlobsRequest{}
		if proto.Unmarshal(b, req) != nil {
			return
		}
		store := blobstore.ContentAddressed(blobstore.NewMemory())
		c := &cas{store: store}
		resp, err := c.BatchUpdateBlobs(context.Background(), req)
		if err != nil {
			if _, ok := status.FromError(err); !ok {
				t.Fatalf("error without a status: %v", err)
			}
			return
		}
		if len(resp.Responses) != len(req.Requests) {
			t.Fatalf("%d answers to %d requests", len(resp.Responses), len(req.Requests))
		}
		for i, r := range resp.Responses {
			if codes.Code(r.Status.GetCode()) != codes.OK {
				continue
			}
			d, err := digest.FromProto(req.Requests[i].Digest)
			if err != nil {
				t.Fatalf("blob %d stored under a bad digest: %v", i, err)
			}
			got, err := blobstore.GetBytes(context.Background(), store, d)
			if err != nil || digest.FromBytes(got) != d {
				t.Fatalf("blob %d stored as %v, %v", i, d, err)
			}
		}
	})
}

// treeStream collects what GetTree sends.
type treeStream struct {
	grpc.ServerStream
	pages []*repb.GetTreeResponse
}

func (s *treeStream) Send(r *repb.GetTreeResponse) error {
	s.pages = append(s.pages, r)
	return nil
}

func (s *treeStream) Context() context.Context { return context.Background() }

func FuzzGetTree(f *testing.F) {
	leaf := marshal(&repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: digest.Empty.Proto()}}})
	mid := marshal(&repb.Directory{Directories: []*repb.DirectoryNode{
		{Name: "a", Digest: digest.FromBytes(leaf).Proto()}, {Name: "b", Digest: digest.FromBytes(leaf).Proto()},
	}})
	bad := marshal(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "x", Digest: &repb.Digest{Hash: "nope", SizeBytes: -5}}}})
	f.Add(mid, leaf, int32(0), "")
	f.Add(mid, leaf, int32(1), "1")
	f.Add(bad, leaf, int32(0), "")
	f.Add([]byte("not a directory"), leaf, int32(0), "x")
	f.Fuzz(func(t *testing.T, root, child []byte, pageSize int32, token string) {
		store := blobstore.ContentAddressed(blobstore.NewMemory())
		for _, b := range [][]byte{root, child} {
			if err := blobstore.PutBytes(context.Background(), store, digest.FromBytes(b), b); err != nil {
				t.Fatal(err)
			}
		}
		c := &cas{store: store}
		s := &treeStream{}
		err := c.GetTree(&repb.GetTreeRequest{RootDigest: digest.FromBytes(root).Proto(), PageSize: pageSize, PageToken: token}, s)
		if err != nil {
			if _, ok := status.FromError(err); !ok {
				t.Fatalf("error without a status: %v", err)
			}
			return
		}
		if len(s.pages) != 1 {
			t.Fatalf("%d pages in one call", len(s.pages))
		}
		// Each distinct directory comes once: there are two blobs.
		if n := len(s.pages[0].Directories); n > 2 || n > maxTreePageSize {
			t.Fatalf("a page of %d directories from 2 blobs", n)
		}
	})
}
