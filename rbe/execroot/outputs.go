package execroot

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Kind is what an output is, or what it was declared as.
type Kind int

const (
	// Any is an output declared by its path alone (REAPI output_paths).
	Any Kind = iota
	File
	Dir
	Symlink
)

func (k Kind) String() string {
	switch k {
	case File:
		return "file"
	case Dir:
		return "directory"
	case Symlink:
		return "symlink"
	}
	return "output"
}

// Output is one output found in a Root.
type Output struct {
	// Kind is File, Dir or Symlink.
	Kind Kind
	// Abs is where the output is.
	Abs string
	// Digest and Executable are a file's.
	Digest     digest.Digest
	Executable bool
	// Target is a symlink's, kept as text and never resolved.
	Target string
	// Contents are a directory's.
	Contents *Contents
	// Size is the bytes of a file, or of the files under a directory.
	Size int64
}

// Contents is what an output directory holds, at paths relative to it. No
// symlink under it is followed.
type Contents struct {
	// Files have their Source set.
	Files []merkle.File
	Links []merkle.Symlink
	// Dirs are all its directories, empty ones included.
	Dirs []string
	// Skipped says which of its entries, neither files, directories nor
	// symlinks, were left out.
	Skipped []string
}

// Collect looks the output at p up (see Lookup) and records it.
func (r *Root) Collect(p string) (*Output, error) {
	abs, info, err := r.Lookup(p)
	if err != nil {
		return nil, err
	}
	return Record(p, abs, info)
}

// Record records the entry at abs, which info describes, as the output at
// p: a file is hashed, a symlink read, a directory walked.
func Record(p, abs string, info fs.FileInfo) (*Output, error) {
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return nil, err
		}
		return &Output{Kind: Symlink, Abs: abs, Target: target}, nil
	case info.Mode().IsRegular():
		d, err := merkle.Hash(abs)
		if err != nil {
			return nil, err
		}
		return &Output{Kind: File, Abs: abs, Digest: d, Executable: info.Mode()&0o111 != 0, Size: d.Size()}, nil
	case info.IsDir():
		c := &Contents{}
		size, err := c.walk(abs, "", p)
		if err != nil {
			return nil, err
		}
		return &Output{Kind: Dir, Abs: abs, Contents: c, Size: size}, nil
	}
	return nil, status.Errorf(codes.InvalidArgument, "neither a file, a directory nor a symlink (%s)", info.Mode().Type())
}

// walk adds what the directory abs, at rel in the output p, holds, and
// returns the size of its files.
func (c *Contents) walk(abs, rel, p string) (int64, error) {
	entries, err := os.ReadDir(abs)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, e := range entries {
		sub, at := filepath.Join(abs, e.Name()), path.Join(rel, e.Name())
		switch t := e.Type(); {
		case t&fs.ModeSymlink != 0:
			target, err := os.Readlink(sub)
			if err != nil {
				return 0, err
			}
			c.Links = append(c.Links, merkle.Symlink{Path: at, Target: target})
		case e.IsDir():
			c.Dirs = append(c.Dirs, at)
			n, err := c.walk(sub, at, p)
			if err != nil {
				return 0, err
			}
			total += n
		case t.IsRegular():
			info, err := e.Info()
			if err != nil {
				return 0, err
			}
			d, err := merkle.Hash(sub)
			if err != nil {
				return 0, err
			}
			c.Files = append(c.Files, merkle.File{Path: at, Digest: d, Executable: info.Mode()&0o111 != 0, Source: sub})
			total += d.Size()
		default:
			c.Skipped = append(c.Skipped, fmt.Sprintf("%s is neither a file, a directory nor a symlink (%s)", path.Join(p, at), t))
		}
	}
	return total, nil
}

// tree returns the directory as a REAPI Tree, serialized, and its digest.
// A directory with entries that were left out has none.
func (c *Contents) tree() ([]byte, digest.Digest, error) {
	if len(c.Skipped) > 0 {
		return nil, digest.Digest{}, status.Error(codes.InvalidArgument, c.Skipped[0])
	}
	t, err := merkle.BuildAll(c.Files, c.Links, c.Dirs)
	if err != nil {
		return nil, digest.Digest{}, err
	}
	parsed, err := ParseTree(t.Root, t.Directories)
	if err != nil {
		return nil, digest.Digest{}, err
	}
	// Children are listed once each, every one after those under it.
	tree := &repb.Tree{Root: parsed.Dirs[t.Root]}
	seen := map[digest.Digest]bool{}
	var add func(*repb.Directory)
	add = func(d *repb.Directory) {
		for _, sub := range d.Directories {
			sd, _ := digest.FromProto(sub.Digest) // made by BuildAll
			if seen[sd] {
				continue
			}
			seen[sd] = true
			add(parsed.Dirs[sd])
			tree.Children = append(tree.Children, parsed.Dirs[sd])
		}
	}
	add(tree.Root)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(tree)
	if err != nil {
		return nil, digest.Digest{}, err
	}
	return b, digest.FromBytes(b), nil
}

// Declared is an output as a command declares it.
type Declared struct {
	// Path is relative to the command's working directory.
	Path string
	// Kind is File or Dir for REAPI's output_files and output_directories,
	// Any for output_paths.
	Kind Kind
}

// Result gathers outputs into a REAPI ActionResult and the blobs it
// references.
type Result struct {
	ActionResult *repb.ActionResult
	// Files are the contents of the output files, those under output
	// directories included, with their Source set.
	Files []merkle.File
	// Trees holds the serialized Tree of each output directory, by digest.
	Trees map[digest.Digest][]byte
}

// NewResult returns a Result that adds outputs to ar.
func NewResult(ar *repb.ActionResult) *Result {
	return &Result{ActionResult: ar, Trees: map[digest.Digest][]byte{}}
}

// Add records o, found for the declared output d, in the result. A
// symlink goes to the field of its declaration.
func (r *Result) Add(d Declared, o *Output) error {
	ar := r.ActionResult
	switch o.Kind {
	case File:
		r.Files = append(r.Files, merkle.File{Path: d.Path, Digest: o.Digest, Executable: o.Executable, Source: o.Abs})
		ar.OutputFiles = append(ar.OutputFiles, &repb.OutputFile{Path: d.Path, Digest: o.Digest.Proto(), IsExecutable: o.Executable})
	case Dir:
		b, td, err := o.Contents.tree()
		if err != nil {
			return err
		}
		r.Trees[td] = b
		r.Files = append(r.Files, o.Contents.Files...)
		ar.OutputDirectories = append(ar.OutputDirectories, &repb.OutputDirectory{Path: d.Path, TreeDigest: td.Proto()})
	case Symlink:
		link := &repb.OutputSymlink{Path: d.Path, Target: o.Target}
		switch d.Kind {
		case File:
			ar.OutputFileSymlinks = append(ar.OutputFileSymlinks, link)
		case Dir:
			ar.OutputDirectorySymlinks = append(ar.OutputDirectorySymlinks, link)
		default:
			ar.OutputSymlinks = append(ar.OutputSymlinks, link)
		}
	}
	return nil
}

// Blobs returns the blobs the result references, once each: the trees and
// the files.
func (r *Result) Blobs() []client.Blob {
	seen := map[digest.Digest]bool{}
	var out []client.Blob
	for d, b := range r.Trees {
		seen[d] = true
		out = append(out, client.Blob{Digest: d, Data: b})
	}
	for _, f := range r.Files {
		if !seen[f.Digest] {
			seen[f.Digest] = true
			out = append(out, client.Blob{Digest: f.Digest, Open: f.Open})
		}
	}
	return out
}
