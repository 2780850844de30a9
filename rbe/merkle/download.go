package merkle

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/proto"
)

// Download writes the Directory tree root, read from cas, to dir, which
// must not exist yet: the tree is checked by CheckLayout first (every name
// a plain name used once, so nothing lands outside dir; symlinks are made
// as they are and never followed), laid out in a temporary directory beside
// dir, and renamed into place once complete. It returns the files written and their bytes.
func Download(ctx context.Context, cas *client.CAS, root digest.Digest, dir string) (files int, bytes int64, err error) {
	if _, err := os.Lstat(dir); err == nil {
		return 0, 0, fmt.Errorf("%s already exists: remove it or give another destination", dir)
	}
	dirs := map[digest.Digest]*repb.Directory{}
	for level := []digest.Digest{root}; len(level) > 0; {
		blobs, err := readAll(ctx, cas, level)
		if err != nil {
			return 0, 0, err
		}
		var next []digest.Digest
		for _, d := range level {
			if _, done := dirs[d]; done {
				continue
			}
			m := &repb.Directory{}
			if err := proto.Unmarshal(blobs[d], m); err != nil {
				return 0, 0, fmt.Errorf("directory %s: %w", d, err)
			}
			dirs[d] = m
			for _, sub := range m.Directories {
				sd, err := digest.FromProto(sub.Digest)
				if err != nil {
					return 0, 0, fmt.Errorf("directory %q: %w", sub.Name, err)
				}
				next = append(next, sd)
			}
		}
		level = next
	}
	if err := CheckLayout(root, dirs); err != nil {
		return 0, 0, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".partial-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(tmp)
	var lay func(d digest.Digest, at string) error
	lay = func(d digest.Digest, at string) error {
		m := dirs[d]
		var small []digest.Digest
		for _, f := range m.Files {
			if fd, _ := digest.FromProto(f.Digest); fd.Size() <= client.BatchLimit {
				small = append(small, fd)
			}
		}
		contents, err := cas.ReadBatch(ctx, small)
		if err != nil {
			return err
		}
		for _, f := range m.Files {
			fd, _ := digest.FromProto(f.Digest)
			mode := os.FileMode(0o644)
			if f.IsExecutable {
				mode = 0o755
			}
			out, err := os.OpenFile(filepath.Join(at, f.Name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			if b, ok := contents[fd]; ok {
				_, err = out.Write(b)
			} else {
				err = cas.Read(ctx, fd, out)
			}
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("%s: %w", f.Name, err)
			}
			files++
			bytes += fd.Size()
		}
		for _, l := range m.Symlinks {
			if err := os.Symlink(l.Target, filepath.Join(at, l.Name)); err != nil {
				return err
			}
		}
		for _, sub := range m.Directories {
			sd, _ := digest.FromProto(sub.Digest)
			p := filepath.Join(at, sub.Name)
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			if err := lay(sd, p); err != nil {
				return err
			}
		}
		return nil
	}
	if err := lay(root, tmp); err != nil {
		return 0, 0, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, 0, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return 0, 0, err
	}
	return files, bytes, nil
}

// readAll reads blobs: small ones in batches, large ones one by one.
func readAll(ctx context.Context, cas *client.CAS, ds []digest.Digest) (map[digest.Digest][]byte, error) {
	var small []digest.Digest
	out := map[digest.Digest][]byte{}
	for _, d := range ds {
		if d.Size() <= client.BatchLimit {
			small = append(small, d)
			continue
		}
		var b bytesBuffer
		if err := cas.Read(ctx, d, &b); err != nil {
			return nil, err
		}
		out[d] = b
	}
	got, err := cas.ReadBatch(ctx, small)
	if err != nil {
		return nil, err
	}
	for d, b := range got {
		out[d] = b
	}
	return out, nil
}

// bytesBuffer collects what is written to it.
type bytesBuffer []byte

func (b *bytesBuffer) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}

// ReadPath reads the file at path p (slash-separated, relative) in the
// Directory tree root from cas, refusing one over max bytes. No symlink is
// followed.
func ReadPath(ctx context.Context, cas *client.CAS, root digest.Digest, p string, max int64) ([]byte, error) {
	if err := CheckPath(p); err != nil {
		return nil, err
	}
	parts := strings.Split(p, "/")
	d := root
	for i, name := range parts {
		blobs, err := readAll(ctx, cas, []digest.Digest{d})
		if err != nil {
			return nil, err
		}
		dir := &repb.Directory{}
		if err := proto.Unmarshal(blobs[d], dir); err != nil {
			return nil, fmt.Errorf("directory %s: %w", d, err)
		}
		last := i == len(parts)-1
		var next *repb.Digest
		for _, f := range dir.Files {
			if f.Name == name && last {
				next = f.Digest
			}
		}
		for _, s := range dir.Directories {
			if s.Name == name && !last {
				next = s.Digest
			}
		}
		if next == nil {
			return nil, fmt.Errorf("%s: no such file", p)
		}
		if d, err = digest.FromProto(next); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if d.Size() > max {
		return nil, fmt.Errorf("%s is %d bytes, over %d", p, d.Size(), max)
	}
	var b bytes.Buffer
	if err := cas.Read(ctx, d, &b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
