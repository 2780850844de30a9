package execroot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sync"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// maxDirectorySize bounds one Directory message of an input tree read from
// a CAS, as the server bounds those it reads; it is checked before the
// message is read.
const maxDirectorySize = 8 << 20

// Tree is an input root: its Directory messages by digest.
type Tree struct {
	Root digest.Digest
	Dirs map[digest.Digest]*repb.Directory
}

// ParseTree returns the tree of the serialized Directory messages dirs
// (those of a merkle.Tree, say), whose root is root.
func ParseTree(root digest.Digest, dirs map[digest.Digest][]byte) (*Tree, error) {
	t := &Tree{Root: root, Dirs: make(map[digest.Digest]*repb.Directory, len(dirs))}
	for d, b := range dirs {
		dir, err := parseDir(d, b)
		if err != nil {
			return nil, err
		}
		t.Dirs[d] = dir
	}
	return t, nil
}

func parseDir(d digest.Digest, b []byte) (*repb.Directory, error) {
	dir := &repb.Directory{}
	if err := proto.Unmarshal(b, dir); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "input directory %s is not a Directory: %v", d, err)
	}
	return dir, nil
}

// LoadTree reads the Directory messages of the input root root, level by
// level, from the cache or else from src, keeping those it fetches.
func (c *Cache) LoadTree(ctx context.Context, src Source, root digest.Digest) (*Tree, error) {
	t := &Tree{Root: root, Dirs: map[digest.Digest]*repb.Directory{}}
	for level := []digest.Digest{root}; len(level) > 0; {
		var todo []digest.Digest
		for _, d := range level {
			if _, done := t.Dirs[d]; done {
				continue
			}
			if d.Size() > maxDirectorySize {
				return nil, status.Errorf(codes.InvalidArgument, "input directory %s is %d bytes, over the limit of %d bytes", d, d.Size(), maxDirectorySize)
			}
			t.Dirs[d] = nil
			todo = append(todo, d)
		}
		blobs, err := c.readDirs(ctx, src, todo)
		if err != nil {
			return nil, err
		}
		var next []digest.Digest
		for _, d := range todo {
			dir, err := parseDir(d, blobs[d])
			if err != nil {
				return nil, err
			}
			t.Dirs[d] = dir
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

// readDirs returns the blobs ds, from the plain store or else from src.
func (c *Cache) readDirs(ctx context.Context, src Source, ds []digest.Digest) (map[digest.Digest][]byte, error) {
	blobs := map[digest.Digest][]byte{}
	var need []digest.Digest
	for _, d := range ds {
		if d.Size() == 0 {
			continue
		}
		b, err := blobstore.GetBytes(ctx, c.plain, d)
		switch {
		case err == nil:
			blobs[d] = b
		case blobstore.IsNotFound(err):
			need = append(need, d)
		default:
			return nil, err
		}
	}
	if len(need) == 0 {
		return blobs, nil
	}
	var mu sync.Mutex
	err := src.Fetch(ctx, need, func(d digest.Digest, r io.Reader) error {
		buf := bytes.NewBuffer(make([]byte, 0, d.Size()))
		if _, err := buf.ReadFrom(r); err != nil {
			return err
		}
		if err := blobstore.PutBytes(ctx, c.plain, d, buf.Bytes()); err != nil && status.Code(err) != codes.ResourceExhausted {
			return err
		}
		mu.Lock()
		blobs[d] = buf.Bytes()
		mu.Unlock()
		return nil
	})
	if status.Code(err) == codes.NotFound {
		return nil, status.Errorf(codes.FailedPrecondition, "input tree incomplete in the CAS: %v", err)
	}
	return blobs, err
}

// Staged is an input tree laid out by Stage.
type Staged struct {
	c *Cache
	// linked holds each distinct file hard-linked into place, with the
	// first of its paths in path order.
	linked map[key]string
}

// Stage lays the tree t out in dir, once merkle.CheckTree has found it
// sound: directories are made, files hard-linked from the cache (fetched
// from src first where the cache lacks them, copied from src where they
// are too large for it), symlinks made as they are. The command must not
// write to the files: see Staged.Changed.
func (c *Cache) Stage(ctx context.Context, src Source, t *Tree, dir string) (*Staged, error) {
	s := &stager{c: c, src: src, t: t, staged: &Staged{c: c, linked: map[key]string{}}}
	if err := s.stage(ctx, dir); err != nil {
		return nil, err
	}
	return s.staged, nil
}

// StageCopies lays t out in dir as Stage does, but its files are writable
// copies of the cached blobs rather than hard links, so that nothing
// written to them reaches the cache.
func (c *Cache) StageCopies(ctx context.Context, src Source, t *Tree, dir string) error {
	return (&stager{c: c, src: src, t: t, copies: true}).stage(ctx, dir)
}

type stager struct {
	c      *Cache
	src    Source
	t      *Tree
	copies bool
	staged *Staged // nil for copies
	// tooLarge holds the blobs too large for the cache.
	tooLarge map[digest.Digest]bool
}

func (s *stager) stage(ctx context.Context, dir string) error {
	if err := merkle.CheckTree(s.t.Root, s.t.Dirs); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	var keys []key
	for _, d := range s.t.Dirs {
		for _, f := range d.Files {
			fd, _ := digest.FromProto(f.Digest) // checked
			keys = append(keys, key{fd, f.IsExecutable})
		}
	}
	if err := s.fill(ctx, keys); err != nil {
		return err
	}
	return s.dir(ctx, s.t.Root, dir, "")
}

func (s *stager) fill(ctx context.Context, keys []key) error {
	tooLarge, err := s.c.fill(ctx, s.src, keys)
	if status.Code(err) == codes.NotFound {
		return status.Errorf(codes.FailedPrecondition, "input files missing from the CAS: %v", err)
	}
	if s.tooLarge == nil {
		s.tooLarge = map[digest.Digest]bool{}
	}
	for d := range tooLarge {
		s.tooLarge[d] = true
	}
	return err
}

func (s *stager) dir(ctx context.Context, d digest.Digest, abs, rel string) error {
	dir := s.t.Dirs[d]
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	for _, f := range dir.Files {
		fd, _ := digest.FromProto(f.Digest)
		p := path.Join(rel, f.Name)
		if err := s.file(ctx, key{fd, f.IsExecutable}, filepath.Join(abs, f.Name), p); err != nil {
			return fmt.Errorf("staging %s: %w", p, err)
		}
	}
	for _, l := range dir.Symlinks {
		if err := os.Symlink(l.Target, filepath.Join(abs, l.Name)); err != nil {
			return err
		}
	}
	for _, sub := range dir.Directories {
		sd, _ := digest.FromProto(sub.Digest)
		if err := s.dir(ctx, sd, filepath.Join(abs, sub.Name), path.Join(rel, sub.Name)); err != nil {
			return err
		}
	}
	return nil
}

// file places the blob k at dst, the input p.
func (s *stager) file(ctx context.Context, k key, dst, p string) error {
	mode := os.FileMode(0o444)
	if k.Executable {
		mode = 0o555
	}
	if s.copies {
		mode |= 0o200
	}
	if k.Digest.Size() == 0 {
		return writeNew(dst, mode, bytes.NewReader(nil))
	}
	place := func() error {
		if s.copies {
			rc, err := s.c.Store(k.Executable).Get(ctx, k.Digest, 0)
			if err != nil {
				return err
			}
			defer rc.Close()
			return writeNew(dst, mode, rc)
		}
		return s.c.Store(k.Executable).Link(k.Digest, dst)
	}
	if !s.tooLarge[k.Digest] {
		err := place()
		if blobstore.IsNotFound(err) {
			// Evicted since it was fetched, or dropped as changed by an
			// earlier command: fetched again.
			if err := s.fill(ctx, []key{k}); err != nil {
				return err
			}
			err = place()
		}
		if !blobstore.IsNotFound(err) {
			if err == nil && !s.copies {
				if first, ok := s.staged.linked[k]; !ok || p < first {
					s.staged.linked[k] = p
				}
			}
			return err
		}
	}
	// Too large for the cache: copied from the source.
	wrote := false
	err := s.src.Fetch(ctx, []digest.Digest{k.Digest}, func(_ digest.Digest, r io.Reader) error {
		wrote = true
		return writeNew(dst, mode, r)
	})
	if err == nil && !wrote {
		err = status.Errorf(codes.NotFound, "blob %s not found", k.Digest)
	}
	return err
}

// writeNew creates the file dst, which must not exist, with mode and the
// content of r.
func writeNew(dst string, mode os.FileMode, r io.Reader) error {
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, mode)
	}
	return err
}

// Changed returns the path of a staged file whose cached blob was changed
// in place through its hard link since it was staged, the first in path
// order, if any. Such a blob is dropped from the cache (see
// blobstore.Disk.Unchanged), so no later command gets it; a blob whose
// mode alone changed is put back.
func (s *Staged) Changed() (string, error) {
	first := ""
	for k, p := range s.linked {
		ok, err := s.c.Store(k.Executable).Unchanged(k.Digest)
		if err != nil {
			return "", err
		}
		if !ok && (first == "" || p < first) {
			first = p
		}
	}
	return first, nil
}
