package server

import (
	"context"
	"fmt"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// maxInline bounds the stdout, stderr or output file bytes inlined into a
// GetActionResult response.
const maxInline = 1 << 20

type actionCache struct {
	repb.UnimplementedActionCacheServer
	ac      blobstore.Store
	cas     blobstore.Store
	metrics *metrics
}

func (a *actionCache) GetActionResult(ctx context.Context, req *repb.GetActionResultRequest) (*repb.ActionResult, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	key, err := digest.FromProto(req.ActionDigest)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	res, err := GetValidatedActionResult(ctx, a.ac, a.cas, key)
	a.metrics.lookedUp("GetActionResult", err)
	if err != nil {
		return nil, err
	}
	inline := map[string]bool{}
	for _, f := range req.InlineOutputFiles {
		inline[f] = true
	}
	budget := int64(maxInline)
	inlineBlob := func(p *repb.Digest) []byte {
		if p.GetSizeBytes() == 0 || p.GetSizeBytes() > budget {
			return nil
		}
		d, err := digest.FromProto(p)
		if err != nil {
			return nil
		}
		b, err := blobstore.GetBytes(ctx, a.cas, d)
		if err != nil {
			return nil
		}
		budget -= int64(len(b))
		return b
	}
	if req.InlineStdout {
		res.StdoutRaw = inlineBlob(res.StdoutDigest)
	}
	if req.InlineStderr {
		res.StderrRaw = inlineBlob(res.StderrDigest)
	}
	for _, f := range res.OutputFiles {
		if inline[f.Path] {
			f.Contents = inlineBlob(f.Digest)
		}
	}
	return res, nil
}

func (a *actionCache) UpdateActionResult(ctx context.Context, req *repb.UpdateActionResultRequest) (*repb.ActionResult, error) {
	if err := checkDigestFunction(req.DigestFunction); err != nil {
		return nil, err
	}
	key, err := digest.FromProto(req.ActionDigest)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if req.ActionResult == nil {
		return nil, status.Error(codes.InvalidArgument, "missing action_result")
	}
	if err := CheckResultPaths(req.ActionResult); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := PutActionResult(ctx, a.ac, key, req.ActionResult); err != nil {
		return nil, err
	}
	return req.ActionResult, nil
}

// CheckResultPaths checks that every output an action result names has a
// path that stays in the working directory: relative, clean, without "..".
// A client downloads each to its path.
func CheckResultPaths(res *repb.ActionResult) error {
	var paths []string
	for _, f := range res.OutputFiles {
		paths = append(paths, f.Path)
	}
	for _, d := range res.OutputDirectories {
		paths = append(paths, d.Path)
	}
	for _, group := range [][]*repb.OutputSymlink{res.OutputSymlinks, res.OutputFileSymlinks, res.OutputDirectorySymlinks} {
		for _, l := range group {
			paths = append(paths, l.Path)
		}
	}
	for _, p := range paths {
		if err := merkle.CheckPath(p); err != nil {
			return fmt.Errorf("action result output: %w", err)
		}
	}
	return nil
}

// PutActionResult stores res as the result of the action key.
func PutActionResult(ctx context.Context, ac blobstore.Store, key digest.Digest, res *repb.ActionResult) error {
	b, err := proto.Marshal(res)
	if err != nil {
		return status.Errorf(codes.Internal, "encoding action result: %v", err)
	}
	return blobstore.PutBytes(ctx, ac, key, b)
}

// GetValidatedActionResult returns the cached result of the action key, but
// only when every blob it references — output files, stdout, stderr, output
// directory trees and the files in them — is still in the CAS; otherwise it
// reports NotFound so that the client runs the action again.
func GetValidatedActionResult(ctx context.Context, ac, cas blobstore.Store, key digest.Digest) (*repb.ActionResult, error) {
	b, err := blobstore.GetBytesMax(ctx, ac, key, maxResultSize)
	if status.Code(err) == codes.InvalidArgument {
		return nil, status.Errorf(codes.NotFound, "action result for %s is unreadable: %v", key, err)
	}
	if err != nil {
		return nil, err
	}
	res := &repb.ActionResult{}
	if err := proto.Unmarshal(b, res); err != nil {
		return nil, status.Errorf(codes.NotFound, "action result for %s is unreadable: %v", key, err)
	}
	var refs []*repb.Digest
	add := func(p *repb.Digest) {
		if p != nil {
			refs = append(refs, p)
		}
	}
	for _, f := range res.OutputFiles {
		add(f.Digest)
	}
	add(res.StdoutDigest)
	add(res.StderrDigest)
	for _, dir := range res.OutputDirectories {
		add(dir.TreeDigest)
		td, err := digest.FromProto(dir.TreeDigest)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "action result for %s has a bad tree digest: %v", key, err)
		}
		tree := &repb.Tree{}
		if _, err := readProto(ctx, cas, td, maxTreeSize, "Tree", tree); blobstore.IsNotFound(err) {
			return nil, status.Errorf(codes.NotFound, "action result for %s: output tree %s is gone", key, td)
		} else if err != nil {
			return nil, status.Errorf(codes.NotFound, "action result for %s: output tree %s is unreadable: %v", key, td, err)
		}
		for _, d := range append([]*repb.Directory{tree.Root}, tree.Children...) {
			for _, f := range d.GetFiles() {
				add(f.Digest)
			}
		}
	}
	ds, err := parseDigests(refs)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "action result for %s references a bad digest: %v", key, err)
	}
	missing, err := cas.FindMissing(ctx, ds)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, status.Errorf(codes.NotFound, "action result for %s references %d blobs no longer in the CAS (first: %s)", key, len(missing), missing[0])
	}
	return res, nil
}
