package executor

import (
	"context"
	"errors"
	"fmt"
	"github.com/rbs-build/rbs/rbe/merkle"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/proto"
)

// fileReq is one output file to write.
type fileReq struct {
	dst  string // absolute
	d    digest.Digest
	exec bool
	data []byte // the content, when the server inlined it
}

// source is where output blobs come from: a local CAS, a scratch directory
// or a remote CAS.
type source interface {
	// bytes reads a small blob (a Tree message) into memory.
	bytes(ctx context.Context, d digest.Digest) ([]byte, error)
	// writeFiles writes each request's blob to its file, with writeFile.
	writeFiles(ctx context.Context, reqs []fileReq) error
}

// Modes of materialized outputs.
const (
	plainMode = 0o644
	execMode  = 0o755
)

func fileMode(exec bool) os.FileMode {
	if exec {
		return execMode
	}
	return plainMode
}

// writeFile atomically replaces dst with the bytes fill writes, with the
// mode of a plain or executable output. Whatever was at dst (a file, a
// directory of an earlier build) is replaced.
func writeFile(dst string, exec bool, fill func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".rbs-tmp-")
	if err != nil {
		return err
	}
	err = fill(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), fileMode(exec))
	}
	if err == nil {
		if info, lerr := os.Lstat(dst); lerr == nil && info.IsDir() {
			err = removeAll(dst)
		}
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// upToDate reports whether the output file is already in place: a regular
// file with the right mode and content (a no-op rebuild writes nothing).
func upToDate(f fileReq) bool {
	info, err := os.Lstat(f.dst)
	if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != fileMode(f.exec) || info.Size() != f.d.Size() {
		return false
	}
	d, err := merkle.HashFile(f.dst)
	return err == nil && d == f.d
}

// copyFile writes the content of src to dst as an output.
func copyFile(src, dst string, exec bool) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return writeFile(dst, exec, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
}

// removeAll removes p and everything under it, making read-only
// directories writable first where that is what stops it.
func removeAll(p string) error {
	if err := os.RemoveAll(p); err == nil {
		return nil
	}
	filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(q, 0o755)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// ensureDir makes rel (slash-separated, clean) a directory under root,
// replacing files or symlinks in the way (stale outputs of another shape).
func ensureDir(root, rel string) error {
	if rel == "." || rel == "" {
		return os.MkdirAll(root, 0o755)
	}
	if err := os.MkdirAll(filepath.Join(root, filepath.FromSlash(rel)), 0o755); err == nil {
		return nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	cur := root
	for _, name := range strings.Split(rel, "/") {
		cur = filepath.Join(cur, name)
		info, err := os.Stat(cur)
		switch {
		case err == nil && info.IsDir():
			continue
		case err == nil || errors.Is(err, os.ErrNotExist):
			if _, lerr := os.Lstat(cur); lerr == nil {
				if err := os.Remove(cur); err != nil {
					return err
				}
			}
			if err := os.Mkdir(cur, 0o755); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

// checkName validates one entry name of a Directory from a server.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("invalid file name %q", name)
	}
	return nil
}

// plan is the work of materializing an action's outputs, computed in full
// before anything is written.
type plan struct {
	files []fileReq
	dirs  []string // output directories to recreate, absolute
	mkdir []string // (sub)directories to create, absolute, parents first
	links []struct{ dst, target string }
}

// materialize writes the outputs res reports for the declared outputs
// under outRoot. A declared output the result lacks, or of the wrong kind,
// is an error naming it; results for undeclared paths are ignored.
func materialize(ctx context.Context, res *repb.ActionResult, outs, outDirs []string, outRoot string, src source, desc string) error {
	files := map[string]*repb.OutputFile{}
	for _, f := range res.OutputFiles {
		files[f.Path] = f
	}
	dirs := map[string]*repb.OutputDirectory{}
	for _, d := range res.OutputDirectories {
		dirs[d.Path] = d
	}
	links := map[string]string{}
	for _, list := range [][]*repb.OutputSymlink{res.OutputSymlinks, res.OutputFileSymlinks, res.OutputDirectorySymlinks} {
		for _, l := range list {
			links[l.Path] = l.Target
		}
	}
	abs := func(p string) string { return filepath.Join(outRoot, filepath.FromSlash(p)) }
	var pl plan
	addFile := func(dst string, f *repb.OutputFile, p string) error {
		d, err := digest.FromProto(f.Digest)
		if err != nil {
			return fmt.Errorf("%s: output %q: %w", desc, p, err)
		}
		pl.files = append(pl.files, fileReq{dst: dst, d: d, exec: f.IsExecutable, data: f.Contents})
		return nil
	}
	for _, p := range outs {
		switch {
		case files[p] != nil:
			if err := addFile(abs(p), files[p], p); err != nil {
				return err
			}
		case links[p] != "":
			// A link to another output file becomes a copy of it, as
			// local execution makes it.
			target := links[p]
			if to := files[path.Join(path.Dir(p), target)]; !path.IsAbs(target) && to != nil {
				if err := addFile(abs(p), to, p); err != nil {
					return err
				}
			} else {
				pl.links = append(pl.links, struct{ dst, target string }{abs(p), target})
			}
		case dirs[p] != nil:
			return fmt.Errorf("%s: declared output file %q is a directory", desc, p)
		default:
			return fmt.Errorf("%s did not create its declared output %q", desc, p)
		}
	}
	for _, p := range outDirs {
		switch {
		case dirs[p] != nil:
			if err := planTree(ctx, &pl, dirs[p], abs(p), src, desc, p); err != nil {
				return err
			}
		case links[p] != "":
			pl.links = append(pl.links, struct{ dst, target string }{abs(p), links[p]})
		case files[p] != nil:
			return fmt.Errorf("%s: declared output directory %q is a file", desc, p)
		default:
			return fmt.Errorf("%s did not create its declared output directory %q", desc, p)
		}
	}
	return pl.apply(ctx, outRoot, src, desc)
}

// planTree adds an output directory's contents to pl.
func planTree(ctx context.Context, pl *plan, od *repb.OutputDirectory, dst string, src source, desc, p string) error {
	td, err := digest.FromProto(od.TreeDigest)
	if err != nil {
		return fmt.Errorf("%s: output directory %q: %w", desc, p, err)
	}
	b, err := src.bytes(ctx, td)
	if err != nil {
		return fmt.Errorf("%s: reading the tree of output directory %q: %w", desc, p, err)
	}
	tree := &repb.Tree{}
	if err := proto.Unmarshal(b, tree); err != nil {
		return fmt.Errorf("%s: output directory %q: tree %s is not a Tree: %v", desc, p, td, err)
	}
	children := map[digest.Digest]*repb.Directory{}
	for _, c := range tree.Children {
		cb, err := marshal(c)
		if err != nil {
			return err
		}
		children[digest.FromBytes(cb)] = c
	}
	pl.dirs = append(pl.dirs, dst)
	var walk func(d *repb.Directory, at string, depth int) error
	walk = func(d *repb.Directory, at string, depth int) error {
		if depth > 1000 {
			return fmt.Errorf("%s: output directory %q is too deep", desc, p)
		}
		pl.mkdir = append(pl.mkdir, at)
		seen := map[string]bool{}
		claim := func(name string) error {
			if err := checkName(name); err != nil {
				return fmt.Errorf("%s: output directory %q: %w", desc, p, err)
			}
			if seen[name] {
				return fmt.Errorf("%s: output directory %q: %q appears twice", desc, p, name)
			}
			seen[name] = true
			return nil
		}
		for _, f := range d.GetFiles() {
			if err := claim(f.Name); err != nil {
				return err
			}
			fd, err := digest.FromProto(f.Digest)
			if err != nil {
				return fmt.Errorf("%s: output directory %q: file %q: %w", desc, p, f.Name, err)
			}
			pl.files = append(pl.files, fileReq{dst: filepath.Join(at, f.Name), d: fd, exec: f.IsExecutable})
		}
		for _, s := range d.GetSymlinks() {
			if err := claim(s.Name); err != nil {
				return err
			}
			pl.links = append(pl.links, struct{ dst, target string }{filepath.Join(at, s.Name), s.Target})
		}
		for _, sub := range d.GetDirectories() {
			if err := claim(sub.Name); err != nil {
				return err
			}
			sd, err := digest.FromProto(sub.Digest)
			if err != nil {
				return fmt.Errorf("%s: output directory %q: %q: %w", desc, p, sub.Name, err)
			}
			child, ok := children[sd]
			if !ok {
				return fmt.Errorf("%s: output directory %q: the tree lacks directory %s", desc, p, sd)
			}
			if err := walk(child, filepath.Join(at, sub.Name), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(tree.Root, dst, 0)
}

// apply writes the planned outputs.
func (pl *plan) apply(ctx context.Context, outRoot string, src source, desc string) error {
	parent := func(dst string) error {
		rel, err := filepath.Rel(outRoot, filepath.Dir(dst))
		if err != nil {
			return err
		}
		return ensureDir(outRoot, filepath.ToSlash(rel))
	}
	for _, d := range pl.dirs {
		if err := parent(d); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
		if err := removeAll(d); err != nil {
			return fmt.Errorf("%s: replacing %s: %w", desc, d, err)
		}
	}
	for _, d := range pl.mkdir {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
	}
	for _, l := range pl.links {
		if err := parent(l.dst); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
		if info, err := os.Lstat(l.dst); err == nil {
			if info.IsDir() {
				err = removeAll(l.dst)
			} else {
				err = os.Remove(l.dst)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", desc, err)
			}
		}
		if err := os.Symlink(l.target, l.dst); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
	}
	// Each distinct blob is fetched once; its other copies are made from
	// the first.
	first := map[digest.Digest]string{}
	var fetch []fileReq
	var copies []fileReq
	for _, f := range pl.files {
		if upToDate(f) {
			continue
		}
		if err := parent(f.dst); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
		switch {
		case f.d.Size() == 0:
			if err := writeFile(f.dst, f.exec, func(io.Writer) error { return nil }); err != nil {
				return fmt.Errorf("%s: %w", desc, err)
			}
		case f.data != nil && digest.FromBytes(f.data) == f.d:
			data := f.data
			if err := writeFile(f.dst, f.exec, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
				return fmt.Errorf("%s: %w", desc, err)
			}
		case first[f.d] != "":
			copies = append(copies, f)
		default:
			first[f.d] = f.dst
			fetch = append(fetch, f)
		}
	}
	if err := src.writeFiles(ctx, fetch); err != nil {
		return fmt.Errorf("%s: writing outputs: %w", desc, err)
	}
	for _, f := range copies {
		if err := copyFile(first[f.d], f.dst, f.exec); err != nil {
			return fmt.Errorf("%s: %w", desc, err)
		}
	}
	// What was written has the digest it was written from: the actions
	// that read it need not hash it.
	for _, f := range pl.files {
		merkle.Remember(f.dst, f.d)
	}
	return nil
}
