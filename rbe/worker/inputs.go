package worker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// fileCache is the worker's local copy of CAS blobs. Files are kept twice
// over by mode — read-only and executable — so that inputs are hard links
// into the cache and a repeated input costs no transfer and no copy.
type fileCache struct {
	cas        *client.CAS
	plain, exe *blobstore.Disk
}

func newFileCache(dir string, maxSize int64, cas *client.CAS) (*fileCache, error) {
	plain, err := blobstore.NewDisk(filepath.Join(dir, "r"), maxSize/2, blobstore.WithFileMode(0o444))
	if err != nil {
		return nil, err
	}
	exe, err := blobstore.NewDisk(filepath.Join(dir, "x"), maxSize/2, blobstore.WithFileMode(0o555))
	if err != nil {
		return nil, err
	}
	return &fileCache{cas: cas, plain: plain, exe: exe}, nil
}

func (fc *fileCache) store(executable bool) *blobstore.Disk {
	if executable {
		return fc.exe
	}
	return fc.plain
}

// fetch makes sure every (digest, mode) pair is in the local cache,
// downloading what is missing: small blobs in batches, large ones streamed.
func (fc *fileCache) fetch(ctx context.Context, files map[fileKey]bool) error {
	var small []digest.Digest
	need := map[digest.Digest][]bool{}
	var large []fileKey
	for k := range files {
		if k.d.Size() == 0 {
			continue
		}
		missing, err := fc.store(k.exec).FindMissing(ctx, []digest.Digest{k.d})
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			continue
		}
		if k.d.Size() > client.BatchLimit {
			large = append(large, k)
			continue
		}
		if need[k.d] == nil {
			small = append(small, k.d)
		}
		need[k.d] = append(need[k.d], k.exec)
	}
	if len(small) > 0 {
		blobs, err := fc.cas.ReadBatch(ctx, small)
		if err != nil {
			return err
		}
		for d, b := range blobs {
			for _, exec := range need[d] {
				if err := blobstore.PutBytes(ctx, fc.store(exec), d, b); err != nil {
					return err
				}
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, k := range large {
		g.Go(func() error {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(fc.cas.Read(gctx, k.d, pw)) }()
			err := fc.store(k.exec).Put(gctx, k.d, pr)
			pr.CloseWithError(err)
			return err
		})
	}
	return g.Wait()
}

type fileKey struct {
	d    digest.Digest
	exec bool
}

// maxDirectorySize bounds one Directory message of an input tree, as the
// server bounds those it reads.
const maxDirectorySize = 8 << 20

// inputTree is an action's input root, read from the CAS.
type inputTree struct {
	root digest.Digest
	dirs map[digest.Digest]*repb.Directory
	// linked holds each distinct file hard-linked into place, with one of
	// its paths, once staged.
	linked map[fileKey]string
	// copies stages the files as writable copies of the cached blobs
	// instead of hard links, so that nothing written to them reaches the
	// cache; none is then in linked.
	copies bool
}

// loadTree reads the input root's Directory messages, level by level, from
// the local cache or the CAS.
func (fc *fileCache) loadTree(ctx context.Context, root digest.Digest) (*inputTree, error) {
	t := &inputTree{root: root, dirs: map[digest.Digest]*repb.Directory{}}
	level := []digest.Digest{root}
	for len(level) > 0 {
		if err := fc.fetchDirs(ctx, level); err != nil {
			return nil, err
		}
		var next []digest.Digest
		for _, d := range level {
			if _, done := t.dirs[d]; done {
				continue
			}
			if d.Size() > maxDirectorySize {
				return nil, status.Errorf(codes.InvalidArgument, "input directory %s is %d bytes, over the limit of %d bytes", d, d.Size(), maxDirectorySize)
			}
			var b []byte
			if d.Size() > 0 {
				var err error
				if b, err = blobstore.GetBytes(ctx, fc.plain, d); err != nil {
					return nil, err
				}
			}
			dir := &repb.Directory{}
			if err := proto.Unmarshal(b, dir); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "input directory %s is not a Directory: %v", d, err)
			}
			t.dirs[d] = dir
			for _, sub := range dir.Directories {
				sd, err := digest.FromProto(sub.Digest)
				if err != nil {
					return nil, status.Errorf(codes.InvalidArgument, "input directory %q: %v", sub.Name, err)
				}
				next = append(next, sd)
			}
		}
		level = next
	}
	return t, nil
}

func (fc *fileCache) fetchDirs(ctx context.Context, ds []digest.Digest) error {
	keys := map[fileKey]bool{}
	for _, d := range ds {
		keys[fileKey{d: d}] = true
	}
	err := fc.fetch(ctx, keys)
	if status.Code(err) == codes.NotFound {
		return status.Errorf(codes.FailedPrecondition, "input tree incomplete in the CAS: %v", err)
	}
	return err
}

// stage materializes the tree under dir, once merkle.CheckTree found it
// sound: directories are created, files hard-linked from the cache,
// symlinks made as they are.
func (fc *fileCache) stage(ctx context.Context, t *inputTree, dir string) error {
	if err := merkle.CheckTree(t.root, t.dirs); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	files := map[fileKey]bool{}
	for _, d := range t.dirs {
		for _, f := range d.Files {
			fd, _ := digest.FromProto(f.Digest) // checked
			files[fileKey{fd, f.IsExecutable}] = true
		}
	}
	if err := fc.fetchFiles(ctx, files); err != nil {
		return err
	}
	t.linked = map[fileKey]string{}
	return fc.stageDir(ctx, t, t.root, dir, "")
}

func (fc *fileCache) fetchFiles(ctx context.Context, files map[fileKey]bool) error {
	err := fc.fetch(ctx, files)
	if status.Code(err) == codes.NotFound {
		return status.Errorf(codes.FailedPrecondition, "input files missing from the CAS: %v", err)
	}
	return err
}

func (fc *fileCache) stageDir(ctx context.Context, t *inputTree, d digest.Digest, abs, rel string) error {
	dir := t.dirs[d]
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	for _, f := range dir.Files {
		fd, _ := digest.FromProto(f.Digest)
		dst := filepath.Join(abs, f.Name)
		mode := os.FileMode(0o444)
		if f.IsExecutable {
			mode = 0o555
		}
		if t.copies {
			mode |= 0o200
		}
		if fd.Size() == 0 {
			if err := os.WriteFile(dst, nil, mode); err != nil {
				return err
			}
			continue
		}
		k, p := fileKey{fd, f.IsExecutable}, path.Join(rel, f.Name)
		place := func() error { return fc.store(k.exec).Link(fd, dst) }
		if t.copies {
			place = func() error { return fc.copyOut(ctx, k, dst, mode) }
		}
		err := place()
		if blobstore.IsNotFound(err) {
			// Evicted since it was fetched, or dropped as changed by an
			// earlier action: fetched again.
			if err = fc.fetchFiles(ctx, map[fileKey]bool{k: true}); err == nil {
				err = place()
			}
		}
		if err != nil {
			return fmt.Errorf("staging %s: %w", p, err)
		}
		if _, ok := t.linked[k]; !ok && !t.copies {
			t.linked[k] = p
		}
	}
	for _, s := range dir.Symlinks {
		if err := os.Symlink(s.Target, filepath.Join(abs, s.Name)); err != nil {
			return err
		}
	}
	for _, sub := range dir.Directories {
		sd, _ := digest.FromProto(sub.Digest)
		if err := fc.stageDir(ctx, t, sd, filepath.Join(abs, sub.Name), path.Join(rel, sub.Name)); err != nil {
			return err
		}
	}
	return nil
}

// copyOut writes the cached blob of k to the new file dst with mode.
func (fc *fileCache) copyOut(ctx context.Context, k fileKey, dst string, mode os.FileMode) error {
	rc, err := fc.store(k.exec).Get(ctx, k.d, 0)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// changed returns the path of an input file of t whose cached blob was
// changed in place through a hard link while the action ran, if any; the
// blob is then dropped from the cache (see blobstore.Disk.Unchanged).
func (fc *fileCache) changed(t *inputTree) (string, error) {
	first := ""
	for k, p := range t.linked {
		ok, err := fc.store(k.exec).Unchanged(k.d)
		if err != nil {
			return "", err
		}
		if !ok && (first == "" || p < first) {
			first = p
		}
	}
	return first, nil
}
