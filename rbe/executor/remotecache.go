package executor

import (
	"context"
	"fmt"
	"io"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// RemoteCache runs actions locally but shares results through a remote
// action cache and CAS (rbs build --remote_cache): a remote hit is
// downloaded; a miss runs on the Local executor and its result is uploaded.
type RemoteCache struct {
	remote *Remote
	local  *Local
}

var _ Executor = (*RemoteCache)(nil)

// NewRemoteCache combines a remote cache with a local executor.
func NewRemoteCache(remote *Remote, local *Local) *RemoteCache {
	return &RemoteCache{remote: remote, local: local}
}

// Run implements Executor.
func (rc *RemoteCache) Run(ctx context.Context, a *Action, outRoot string) (*Result, error) {
	if a.NoCache {
		return rc.local.Run(ctx, a, outRoot)
	}
	p, err := Prepare(a)
	if err != nil {
		return nil, err
	}
	desc := describe(a)
	r := rc.remote
	ar, err := r.ac.GetActionResult(ctx, &repb.GetActionResultRequest{
		InstanceName: r.instance, ActionDigest: p.ActionDigest.Proto(), InlineStdout: true, InlineStderr: true,
	})
	switch {
	case err == nil:
		res, err := r.finish(ctx, a, p, ar, outRoot, desc)
		if err == nil {
			res.Cached = true
			return res, nil
		}
		if status.Code(err) != codes.NotFound {
			return nil, err
		}
	case status.Code(err) != codes.NotFound:
		return nil, fmt.Errorf("%s: looking up the remote cache: %w", desc, err)
	}
	res, err := rc.local.Run(ctx, a, outRoot)
	if err != nil || res.ExitCode != 0 {
		return res, err
	}
	if err := rc.upload(ctx, p); err != nil {
		return nil, fmt.Errorf("%s: uploading the result to the remote cache: %w", desc, err)
	}
	return res, nil
}

// upload sends the local result of p and its blobs to the remote cache.
func (rc *RemoteCache) upload(ctx context.Context, p *Prepared) error {
	h, err := rc.local.lookup(ctx, p)
	if err != nil || h == nil {
		return err // outputs too large to cache locally are not shared either
	}
	var blobs []client.Blob
	add := func(pd *repb.Digest, exec bool) error {
		if pd == nil {
			return nil
		}
		d, err := digest.FromProto(pd)
		if err != nil {
			return err
		}
		store := rc.local.cas(exec)
		blobs = append(blobs, client.Blob{Digest: d, Open: func() (io.ReadCloser, error) { return store.Get(ctx, d, 0) }})
		return nil
	}
	for _, f := range h.ar.OutputFiles {
		if err := add(f.Digest, f.IsExecutable); err != nil {
			return err
		}
	}
	for _, s := range []*repb.Digest{h.ar.StdoutDigest, h.ar.StderrDigest} {
		if err := add(s, false); err != nil {
			return err
		}
	}
	for _, od := range h.ar.OutputDirectories {
		if err := add(od.TreeDigest, false); err != nil {
			return err
		}
		td, _ := digest.FromProto(od.TreeDigest)
		tb, err := blobstore.GetBytes(ctx, rc.local.cas(false), td)
		if err != nil {
			return err
		}
		tree := &repb.Tree{}
		if err := proto.Unmarshal(tb, tree); err != nil {
			return err
		}
		for _, dir := range append([]*repb.Directory{tree.Root}, tree.Children...) {
			for _, f := range dir.GetFiles() {
				if err := add(f.Digest, f.IsExecutable); err != nil {
					return err
				}
			}
		}
	}
	blobs = append(blobs, client.Blob{Digest: p.CommandDigest, Data: p.CommandBlob}, client.Blob{Digest: p.ActionDigest, Data: p.ActionBlob})
	if _, _, err := rc.remote.cas.Upload(ctx, blobs); err != nil {
		return err
	}
	_, err = rc.remote.ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{InstanceName: rc.remote.instance, ActionDigest: p.ActionDigest.Proto(), ActionResult: h.ar})
	return err
}
