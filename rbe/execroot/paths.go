package execroot

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// CheckRelPath validates a path from a Command (working directory, output
// path): relative, and staying inside the input root once cleaned. Input
// trees are checked by merkle.CheckTree, and paths that must be clean by
// merkle.CheckPath.
func CheckRelPath(p string) error {
	switch {
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case strings.ContainsRune(p, '\x00'):
		return fmt.Errorf("path %q contains NUL", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("path %q escapes the input root", p)
	}
	return nil
}

// Links says which symlinks a Root follows on the way to an output. The
// output itself, when it is a symlink, is never followed, nor is any
// symlink under an output directory.
type Links int

const (
	// NoLinks follows none: a symlink on the way to an output is an
	// error, a BlockedError. Jobs' outputs are found so.
	NoLinks Links = iota
	// LinksInside follows those that lead to directories inside the
	// root; one that leads out of it is an InvalidArgument error. Actions'
	// outputs are found so, as REAPI clients expect.
	LinksInside
)

// Root is a directory a command ran in, where its outputs are found.
type Root struct {
	dir   string // with symlinks resolved
	links Links
}

// NewRoot returns the root of the directory dir, finding outputs with the
// symlink policy links.
func NewRoot(dir string, links Links) (*Root, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	return &Root{dir: real, links: links}, nil
}

// BlockedError says that a path goes through an entry that is not a
// directory: a symlink a Root does not follow, or a file.
type BlockedError struct {
	// At is the part of the path that is not a directory.
	At   string
	Link bool
}

func (e *BlockedError) Error() string {
	if e.Link {
		return fmt.Sprintf("%s is a symlink, which outputs are not recorded through", e.At)
	}
	return fmt.Sprintf("not found (%s is not a directory)", e.At)
}

// errNotFound is what Lookup returns for a path that does not exist.
var errNotFound = fmt.Errorf("not found: %w", fs.ErrNotExist)

// Lookup returns where the entry at p (slash-separated, relative to the
// root) is, and what it is, without following it should it be a symlink.
// A missing entry is an error wrapping fs.ErrNotExist.
func (r *Root) Lookup(p string) (string, fs.FileInfo, error) {
	if err := CheckRelPath(p); err != nil {
		return "", nil, status.Error(codes.InvalidArgument, err.Error())
	}
	p = path.Clean(p)
	if r.links == LinksInside {
		return r.lookupInside(p)
	}
	abs := r.dir
	parts := strings.Split(p, "/")
	for i, name := range parts {
		abs = filepath.Join(abs, name)
		info, err := os.Lstat(abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", nil, errNotFound
		case err != nil:
			return "", nil, err
		case i == len(parts)-1:
			return abs, info, nil
		case info.Mode()&fs.ModeSymlink != 0:
			return "", nil, &BlockedError{At: path.Join(parts[:i+1]...), Link: true}
		case !info.IsDir():
			return "", nil, &BlockedError{At: path.Join(parts[:i+1]...)}
		}
	}
	panic("unreachable")
}

// lookupInside looks the clean path p up with the symlinks on the way to it
// resolved, so that it can never lead out of the root.
func (r *Root) lookupInside(p string) (string, fs.FileInfo, error) {
	abs := filepath.Join(r.dir, filepath.FromSlash(p))
	parent, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if missing(err) {
		return "", nil, errNotFound
	}
	if err != nil {
		return "", nil, err
	}
	if parent != r.dir && !strings.HasPrefix(parent, r.dir+string(filepath.Separator)) {
		return "", nil, status.Errorf(codes.InvalidArgument, "%s resolves outside the input root", p)
	}
	abs = filepath.Join(parent, filepath.Base(abs))
	info, err := os.Lstat(abs)
	if missing(err) {
		return "", nil, errNotFound
	}
	if err != nil {
		return "", nil, err
	}
	return abs, info, nil
}

// missing reports whether err says that a path does not exist, for want of
// the entry or of a directory on the way.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
