package executor

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rbe/process"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Local runs actions on this machine, each in a fresh scratch directory
// holding only its declared inputs, with a local CAS and action cache.
//
// The CAS keeps each blob as a read-only file, in two stores by mode (0444
// and 0555), so that inputs are hard links into it rather than copies.
type Local struct {
	tmp   string
	cache *execroot.Cache
	ac    blobstore.Store
}

var _ Executor = (*Local)(nil)

// NewLocal opens (creating if needed) a local executor whose CAS lives in
// cacheDir/cas, its action cache in cacheDir/ac and its scratch
// directories in cacheDir/tmp; the CAS and action cache together are
// bounded by about maxSize bytes (0 for no bound). Outputs too large for
// the bound are written but not cached. Scratch directories left by an earlier process are
// removed.
func NewLocal(cacheDir string, maxSize int64) (*Local, error) {
	if maxSize < 0 {
		return nil, fmt.Errorf("local cache %s: negative size bound %d", cacheDir, maxSize)
	}
	cacheDir, err := filepath.Abs(cacheDir)
	if err != nil {
		return nil, err
	}
	var acSize, casSize int64
	if maxSize > 0 {
		acSize = max(maxSize/32, 64<<10)
		casSize = max((maxSize-acSize)/2, 1)
	}
	cache, err := execroot.OpenCache(filepath.Join(cacheDir, "cas"), 2*casSize)
	if err != nil {
		return nil, err
	}
	ac, err := blobstore.NewDisk(filepath.Join(cacheDir, "ac"), acSize)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(cacheDir, "tmp")
	if err := removeAll(tmp); err != nil {
		return nil, fmt.Errorf("local cache %s: clearing scratch directories: %w", cacheDir, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	return &Local{tmp: tmp, cache: cache, ac: ac}, nil
}

// cas is the verifying view of a store of the cache.
func (l *Local) cas(exec bool) blobstore.Store {
	return blobstore.ContentAddressed(l.cache.Store(exec))
}

// Run implements Executor: it runs a, always; Cached(l.Cache(), l)
// serves it from the local action cache first.
func (l *Local) Run(ctx context.Context, a *Action, outRoot string) (*Result, error) {
	return prepared(ctx, l, a, outRoot)
}

func (l *Local) run(ctx context.Context, a *Action, p *Prepared, outRoot string, _ bool) (*Result, error) {
	if err := runsHere(a); err != nil {
		return nil, err
	}
	return l.execute(ctx, a, p, outRoot)
}

// PlatformError is an action for another platform than this machine's,
// which the local executor cannot run.
type PlatformError struct {
	Description string
	Want, Host  platform.Platform
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("%s needs a %s machine; this one is %s", e.Description, e.Want, e.Host)
}

// runsHere refuses an action whose OSFamily and ISA are not this
// machine's.
func runsHere(a *Action) error {
	want, ok := platform.FromProperties(a.Platform)
	if host := platform.Host(); ok && want != host {
		return &PlatformError{Description: describe(a), Want: want, Host: host}
	}
	return nil
}

// Cache is the local action cache and CAS.
func (l *Local) Cache() Cache { return localCache{l} }

// localCache is the action cache and CAS of a Local.
type localCache struct{ l *Local }

// lookup returns the cached result of p when there is one that succeeded
// and whose blobs are all in the CAS.
func (c localCache) lookup(ctx context.Context, p *Prepared) (*hit, error) {
	l := c.l
	b, err := blobstore.GetBytes(ctx, l.ac, p.ActionDigest)
	if blobstore.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ar := &repb.ActionResult{}
	if err := proto.Unmarshal(b, ar); err != nil || ar.ExitCode != 0 {
		return nil, nil
	}
	blobs, err := blobsOf(ctx, ar, readsTrees(c))
	if err != nil {
		return nil, nil // a Tree gone or unreadable: a miss
	}
	need := map[bool][]digest.Digest{}
	for _, b := range blobs {
		need[b.exec] = append(need[b.exec], b.d)
	}
	for exec, ds := range need {
		missing, err := l.cas(exec).FindMissing(ctx, ds)
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 {
			return nil, nil
		}
	}
	h := &hit{ar: ar}
	for _, s := range []struct {
		d   *repb.Digest
		out *[]byte
	}{{ar.StdoutDigest, &h.stdout}, {ar.StderrDigest, &h.stderr}} {
		if s.d == nil {
			continue
		}
		d, _ := digest.FromProto(s.d) // parsed by blobsOf
		if *s.out, err = blobstore.GetBytes(ctx, l.cas(false), d); err != nil {
			return nil, err
		}
	}
	return h, nil
}

func (c localCache) source() source { return &localSource{l: c.l} }

func (c localCache) open(ctx context.Context, d digest.Digest, exec bool) (io.ReadCloser, error) {
	return (&localSource{l: c.l}).open(ctx, fileReq{d: d, exec: exec})
}

// record puts res's result into the action cache, first copying into the
// CAS the blobs it names from where they are, when that is another cache.
func (c localCache) record(ctx context.Context, p *Prepared, res *Result) error {
	l := c.l
	if res.in != Cache(c) {
		blobs, err := blobsOf(ctx, res.ar, readsTrees(res.in))
		if err != nil {
			return err
		}
		for _, b := range blobs {
			if ok, err := l.put(ctx, b.exec, b.d, func() (io.ReadCloser, error) { return res.in.open(ctx, b.d, b.exec) }); err != nil || !ok {
				return err
			}
		}
	}
	b, err := marshal(res.ar)
	if err != nil {
		return err
	}
	if err := blobstore.PutBytes(ctx, l.ac, p.ActionDigest, b); status.Code(err) != codes.ResourceExhausted {
		return err
	}
	return nil
}

// execute runs the action in a scratch directory.
func (l *Local) execute(ctx context.Context, a *Action, p *Prepared, outRoot string) (*Result, error) {
	desc := describe(a)
	work, err := os.MkdirTemp(l.tmp, "run-")
	if err != nil {
		return nil, err
	}
	defer removeAll(work)
	root := filepath.Join(work, "root")
	tree, err := execroot.ParseTree(p.Tree.Root, p.Tree.Directories)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", desc, err)
	}
	env := make([]string, 0, len(p.Command.EnvironmentVariables))
	for _, v := range p.Command.EnvironmentVariables {
		env = append(env, v.Name+"="+v.Value)
	}
	stdout, err := os.Create(filepath.Join(work, "stdout"))
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(work, "stderr"))
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	var outs []execroot.Declared
	for _, o := range a.Outputs {
		outs = append(outs, execroot.Declared{Path: o, Kind: execroot.File})
	}
	for _, o := range a.OutputDirs {
		outs = append(outs, execroot.Declared{Path: o, Kind: execroot.Dir})
	}
	ran, err := l.cache.Run(ctx, execroot.Spec{
		Source: execroot.FileSource(p.Tree.Files), Tree: tree, Root: root, Outputs: outs, Strict: true,
		Process: process.Spec{Args: a.Args, Env: env, Stdout: stdout, Stderr: stderr, Timeout: a.Timeout},
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", desc, err)
	case ran.StartErr != nil:
		return nil, fmt.Errorf("%s: cannot run %q: %w", desc, a.Args[0], ran.StartErr)
	case ran.Unchecked != nil:
		return nil, fmt.Errorf("%s: checking its inputs: %w", desc, ran.Unchecked)
	case ran.Process.Cancelled:
		return nil, fmt.Errorf("%s: %w", desc, ctx.Err())
	case ran.Changed != "":
		return nil, fmt.Errorf("%s: input %s was written to while the action ran; inputs are hard links into the local cache and must not be modified (copy an input before changing it)", desc, ran.Changed)
	}
	res := &Result{ExitCode: ran.Process.ExitCode, Digest: p.ActionDigest}
	if ran.Process.TimedOut {
		res.ExitCode = -1
	}
	if res.Stdout, err = os.ReadFile(stdout.Name()); err != nil {
		return nil, err
	}
	if res.Stderr, err = os.ReadFile(stderr.Name()); err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return res, nil
	}
	out := ran.Outputs
	if err := checkUndeclared(root, a, desc); err != nil {
		return nil, err
	}
	if !a.NoCache {
		kept, err := l.fill(ctx, out, res)
		if err != nil {
			return nil, fmt.Errorf("%s: caching outputs: %w", desc, err)
		}
		res.ar, res.in, res.recordable = out.ActionResult, l.Cache(), kept
	}
	src := &localSource{l: l, scratch: map[digest.Digest]string{}, trees: out.Trees}
	for _, f := range out.Files {
		src.scratch[f.Digest] = f.Source
	}
	if err := materialize(ctx, out.ActionResult, a.Outputs, a.OutputDirs, outRoot, src, desc); err != nil {
		return nil, err
	}
	return res, nil
}

// fill puts the outputs, stdout and stderr into the CAS, and their
// digests into out's ActionResult; it reports whether all were kept, which
// outputs too large for the cache are not.
func (l *Local) fill(ctx context.Context, out *execroot.Result, res *Result) (kept bool, err error) {
	inMemory := func(b []byte) func() (io.ReadCloser, error) {
		return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	kept = true
	keep := func(exec bool, d digest.Digest, open func() (io.ReadCloser, error)) error {
		ok, err := l.put(ctx, exec, d, open)
		kept = kept && ok
		return err
	}
	for _, f := range out.Files {
		if err := keep(f.Executable, f.Digest, f.Open); err != nil {
			return false, err
		}
	}
	for d, b := range out.Trees {
		if err := keep(false, d, inMemory(b)); err != nil {
			return false, err
		}
	}
	for _, s := range []struct {
		b   []byte
		set func(*repb.Digest)
	}{{res.Stdout, func(d *repb.Digest) { out.ActionResult.StdoutDigest = d }}, {res.Stderr, func(d *repb.Digest) { out.ActionResult.StderrDigest = d }}} {
		d := digest.FromBytes(s.b)
		if err := keep(false, d, inMemory(s.b)); err != nil {
			return false, err
		}
		s.set(d.Proto())
	}
	return kept, nil
}

// put puts blob d into the CAS of its mode unless it is there; it reports
// false when the blob is too large for the cache.
func (l *Local) put(ctx context.Context, exec bool, d digest.Digest, open func() (io.ReadCloser, error)) (bool, error) {
	if missing, err := l.cas(exec).FindMissing(ctx, []digest.Digest{d}); err != nil || len(missing) == 0 {
		return err == nil, err
	}
	rc, err := open()
	if err != nil {
		return false, err
	}
	defer rc.Close()
	err = l.cas(exec).Put(ctx, d, rc)
	if status.Code(err) == codes.ResourceExhausted {
		return false, nil
	}
	return err == nil, err
}

// checkUndeclared reports the first file or directory (in path order) the
// action left in its scratch directory outside its declared outputs and
// its input tree.
//
// An input directory — one that holds an input file, other than the exec
// root itself — is the action's to write in, with everything below it: a
// runfiles tree, __pycache__ next to an imported .py file, a tool's scratch
// file next to its inputs. What is written there is dropped with the
// scratch directory: not an output, not cached. Anything else — a new entry
// in the exec root, or in a directory holding only outputs or other
// directories (next to a genrule's outs in rbs-out/k8-fastbuild/bin/pkg) — is an error
// naming it, as most likely an output the rule forgot to declare.
func checkUndeclared(root string, a *Action, desc string) error {
	known := map[string]bool{} // inputs and declared outputs: not looked into
	parents := map[string]bool{}
	inputDirs := map[string]bool{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			parents[d] = true
		}
	}
	for _, f := range a.Inputs {
		known[f.Path] = true
		addParents(f.Path)
		inputDirs[path.Dir(f.Path)] = true
	}
	for _, list := range [][]string{a.Outputs, a.OutputDirs} {
		for _, o := range list {
			known[o] = true
			addParents(o)
		}
	}
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			p := path.Join(rel, e.Name())
			switch {
			case known[p] || inputDirs[p] && e.IsDir():
			case parents[p] && e.IsDir():
				if err := walk(p); err != nil {
					return err
				}
			default:
				return fmt.Errorf("%s wrote %s, which is not one of its declared outputs", desc, p)
			}
		}
		return nil
	}
	return walk("")
}

// localSource reads output blobs from the scratch directory of the run
// that made them, or else from the local CAS.
type localSource struct {
	l       *Local
	scratch map[digest.Digest]string
	trees   map[digest.Digest][]byte
}

func (s *localSource) bytes(ctx context.Context, d digest.Digest) ([]byte, error) {
	if b, ok := s.trees[d]; ok {
		return b, nil
	}
	return blobstore.GetBytes(ctx, s.l.cas(false), d)
}

func (s *localSource) open(ctx context.Context, f fileReq) (io.ReadCloser, error) {
	if p, ok := s.scratch[f.d]; ok {
		return os.Open(p)
	}
	rc, err := s.l.cas(f.exec).Get(ctx, f.d, 0)
	if blobstore.IsNotFound(err) {
		rc, err = s.l.cas(!f.exec).Get(ctx, f.d, 0)
	}
	return rc, err
}

func (s *localSource) writeFiles(ctx context.Context, reqs []fileReq) error {
	for _, f := range reqs {
		rc, err := s.open(ctx, f)
		if err != nil {
			return err
		}
		v := digest.NewVerifier(f.d)
		err = writeFile(f.dst, f.exec, func(w io.Writer) error {
			_, err := io.Copy(io.MultiWriter(w, v), rc)
			if err == nil {
				err = v.Check()
			}
			return err
		})
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
