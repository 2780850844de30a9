package worker

import (
	"io"
	"os"
	"path/filepath"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// outputKind says which REAPI field an output was declared in.
type outputKind int

const (
	declaredPath outputKind = iota // Command.output_paths (REAPI 2.1+)
	declaredFile                   // Command.output_files (2.0)
	declaredDir                    // Command.output_directories (2.0)
)

type declared struct {
	path string
	kind outputKind
}

// declaredOutputs lists a Command's outputs: output_paths when given,
// otherwise the 2.0 output_files and output_directories.
func declaredOutputs(cmd *repb.Command) ([]declared, error) {
	var out []declared
	if len(cmd.OutputPaths) > 0 {
		for _, p := range cmd.OutputPaths {
			out = append(out, declared{p, declaredPath})
		}
	} else {
		for _, p := range cmd.OutputFiles {
			out = append(out, declared{p, declaredFile})
		}
		for _, p := range cmd.OutputDirectories {
			out = append(out, declared{p, declaredDir})
		}
	}
	for _, o := range out {
		if err := checkRelPath(o.path); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "output %v", err)
		}
	}
	return out, nil
}

// collector gathers outputs into an ActionResult and the blobs to upload.
type collector struct {
	root  string // the input root, with symlinks resolved
	res   *repb.ActionResult
	blobs []client.Blob
}

func fileBlob(p string) (client.Blob, error) {
	d, err := merkle.HashFile(p)
	if err != nil {
		return client.Blob{}, err
	}
	return client.Blob{Digest: d, Open: func() (io.ReadCloser, error) { return os.Open(p) }}, nil
}

func dataBlob(b []byte) client.Blob { return client.Blob{Digest: digest.FromBytes(b), Data: b} }

// inside reports whether p, with its parent's symlinks resolved, lies in the
// input root, so that an output path can never read outside it.
func (c *collector) inside(p string) error {
	parent, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		return err
	}
	if parent != c.root && !strings.HasPrefix(parent, c.root+string(filepath.Separator)) {
		return status.Errorf(codes.InvalidArgument, "output %s resolves outside the input root", p)
	}
	return nil
}

// add records one declared output found at abs; absent outputs are skipped,
// as REAPI allows.
func (c *collector) add(o declared, abs string) error {
	if err := c.inside(abs); err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	info, err := os.Lstat(abs)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return err
		}
		link := &repb.OutputSymlink{Path: o.path, Target: target}
		switch o.kind {
		case declaredFile:
			c.res.OutputFileSymlinks = append(c.res.OutputFileSymlinks, link)
		case declaredDir:
			c.res.OutputDirectorySymlinks = append(c.res.OutputDirectorySymlinks, link)
		default:
			c.res.OutputSymlinks = append(c.res.OutputSymlinks, link)
		}
	case info.IsDir():
		tree, err := merkle.TreeOf(abs, func(p string, d digest.Digest, _ bool) {
			c.blobs = append(c.blobs, client.Blob{Digest: d, Open: func() (io.ReadCloser, error) { return os.Open(p) }})
		})
		if err != nil {
			return err
		}
		b, err := proto.Marshal(tree)
		if err != nil {
			return err
		}
		blob := dataBlob(b)
		c.blobs = append(c.blobs, blob)
		c.res.OutputDirectories = append(c.res.OutputDirectories, &repb.OutputDirectory{Path: o.path, TreeDigest: blob.Digest.Proto()})
	case info.Mode().IsRegular():
		blob, err := fileBlob(abs)
		if err != nil {
			return err
		}
		c.blobs = append(c.blobs, blob)
		c.res.OutputFiles = append(c.res.OutputFiles, &repb.OutputFile{Path: o.path, Digest: blob.Digest.Proto(), IsExecutable: info.Mode()&0o111 != 0})
	default:
		return status.Errorf(codes.InvalidArgument, "output %s is neither a file, a directory nor a symlink", o.path)
	}
	return nil
}
