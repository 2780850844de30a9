package executor

import (
	"context"
	"fmt"
	"io"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Caching is one decorator: Cached looks an action up in a Cache, writes
// a hit's outputs from the Cache's CAS, and otherwise runs the action
// through the executor it wraps and records what that ran. Local and
// Remote alone always run; a build composes them once:
//
//	Cached(local.Cache(), local)                             // rbs build
//	Cached(remote.Cache(), remote)                           // --remote
//	Cached(remote.Cache(), Cached(local.Cache(), local))     // --remote_cache

// Cache is an action cache with the CAS its results' blobs live in.
// Local.Cache and Remote.Cache are the two there are.
type Cache interface {
	// lookup returns the result cached for p, with its stdout and
	// stderr; nil when there is none, or when the local cache lacks a
	// blob it names. An error with code NotFound says the entry is
	// broken: a blob it names is gone.
	lookup(ctx context.Context, p *Prepared) (*hit, error)
	// source is where a hit's outputs are written from.
	source() source
	// open reads a blob; exec is the mode of the file it is, where the
	// CAS keeps modes apart.
	open(ctx context.Context, d digest.Digest, exec bool) (io.ReadCloser, error)
	// record records res, what p ran to, whose blobs res.in holds.
	record(ctx context.Context, p *Prepared, res *Result) error
}

// hit is a cached result.
type hit struct {
	ar             *repb.ActionResult
	stdout, stderr []byte
}

// runner runs a prepared action. skip says that a cache above found p's
// entry broken, so what runs must not be served from an entry that may be
// the same: a remote server's cache is skipped, another cache is not.
type runner interface {
	run(ctx context.Context, a *Action, p *Prepared, outRoot string, skip bool) (*Result, error)
}

// prepared prepares a and runs it through r: the Run of every runner.
func prepared(ctx context.Context, r runner, a *Action, outRoot string) (*Result, error) {
	p, err := Prepare(a)
	if err != nil {
		return nil, err
	}
	return r.run(ctx, a, p, outRoot, false)
}

// Cached returns an executor that serves actions from c, and runs those c
// lacks through next, recording their results in c unless they are
// recorded where they ran (a remote execution's, by its server). An
// action with NoCache goes to next alone.
func Cached(c Cache, next Executor) Executor {
	r, ok := next.(runner)
	if !ok {
		r = prepares{next}
	}
	return &cached{c: c, next: r}
}

type cached struct {
	c    Cache
	next runner
}

// prepares runs actions through an Executor of another package, which
// prepares them itself and knows nothing of skip.
type prepares struct{ Executor }

func (e prepares) run(ctx context.Context, a *Action, _ *Prepared, outRoot string, _ bool) (*Result, error) {
	return e.Run(ctx, a, outRoot)
}

// Run implements Executor.
func (x *cached) Run(ctx context.Context, a *Action, outRoot string) (*Result, error) {
	return prepared(ctx, x, a, outRoot)
}

func (x *cached) run(ctx context.Context, a *Action, p *Prepared, outRoot string, skip bool) (*Result, error) {
	if a.NoCache {
		return x.next.run(ctx, a, p, outRoot, skip)
	}
	desc := describe(a)
	h, err := x.c.lookup(ctx, p)
	switch {
	case status.Code(err) == codes.NotFound:
		skip = true // run it again, past the broken entry
	case err != nil:
		return nil, fmt.Errorf("%s: looking up the action cache: %w", desc, err)
	case h != nil:
		res := &Result{ExitCode: int(h.ar.ExitCode), Stdout: h.stdout, Stderr: h.stderr, Cached: true, Digest: p.ActionDigest}
		if res.ExitCode != 0 {
			return res, nil
		}
		err := materialize(ctx, h.ar, a.Outputs, a.OutputDirs, outRoot, x.c.source(), desc)
		if err == nil {
			res.ar, res.in, res.recordable = h.ar, x.c, true
			return res, nil
		}
		if status.Code(err) != codes.NotFound {
			return nil, err
		}
		// A blob went between the lookup and now: run it again.
		skip = true
	}
	res, err := x.next.run(ctx, a, p, outRoot, skip)
	if err != nil || res.ExitCode != 0 || !res.recordable {
		return res, err
	}
	if err := x.c.record(ctx, p, res); err != nil {
		return nil, fmt.Errorf("%s: recording its result in the action cache: %w", desc, err)
	}
	return res, nil
}

// blob is a blob a result names, with the mode of the file it is.
type blob struct {
	d    digest.Digest
	exec bool
}

// blobsOf lists the blobs ar names: its output files, its output
// directories' Trees and the files in them (each Tree read through tree),
// and stdout and stderr. A digest that does not parse is an error.
func blobsOf(ctx context.Context, ar *repb.ActionResult, tree func(context.Context, digest.Digest) ([]byte, error)) ([]blob, error) {
	var out []blob
	add := func(pd *repb.Digest, exec bool) (digest.Digest, error) {
		d, err := digest.FromProto(pd)
		if err == nil {
			out = append(out, blob{d, exec})
		}
		return d, err
	}
	for _, f := range ar.OutputFiles {
		if _, err := add(f.Digest, f.IsExecutable); err != nil {
			return nil, err
		}
	}
	for _, od := range ar.OutputDirectories {
		td, err := add(od.TreeDigest, false)
		if err != nil {
			return nil, err
		}
		b, err := tree(ctx, td)
		if err != nil {
			return nil, err
		}
		t := &repb.Tree{}
		if err := proto.Unmarshal(b, t); err != nil {
			return nil, fmt.Errorf("tree %s: %w", td, err)
		}
		for _, dir := range append([]*repb.Directory{t.Root}, t.Children...) {
			for _, f := range dir.GetFiles() {
				if _, err := add(f.Digest, f.IsExecutable); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, pd := range []*repb.Digest{ar.StdoutDigest, ar.StderrDigest} {
		if pd == nil {
			continue
		}
		if _, err := add(pd, false); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readsTrees reads the Trees a result names from c, for blobsOf.
func readsTrees(c Cache) func(context.Context, digest.Digest) ([]byte, error) {
	return func(ctx context.Context, d digest.Digest) ([]byte, error) {
		rc, err := c.open(ctx, d, false)
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
}
