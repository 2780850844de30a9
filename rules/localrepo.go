package rules

// Repositories on this machine: local_repository and new_local_repository
// in WORKSPACE, and bazel_dep with local_path_override in MODULE.bazel.
// Their packages are evaluated from their directory, as rbs's own
// repositories are from its files: package PKG of repository REPO is the
// package external/REPO/PKG, a file of it is written into
// rbs-out/CPU-MODE/bin/external/REPO/ when a target uses it, and a runfiles tree
// holds it at REPO/PATH. A new_local_repository's BUILD file at its root
// is the one its build_file or build_file_content gives.

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rbs-build/rbs/starlark/label"
)

// localRepo is a repository in a directory of this machine: one given,
// or one a repository rule makes when it is first used (lazy).
type localRepo struct {
	dir   string // absolute
	build []byte // the root package's BUILD file, for new_local_repository; nil: its own
	pos   string // where it is declared
	lazy  *lazyDir
}

// path is the repository's directory; for a repository made by a rule,
// once made.
func (r localRepo) path() (string, error) {
	if r.lazy != nil {
		return r.lazy.path()
	}
	return r.dir, nil
}

// fsys is the repository's files, with its BUILD file given.
func (r localRepo) fsys() fs.FS {
	if r.lazy != nil {
		return lazyFS{r.lazy}
	}
	base := os.DirFS(r.dir)
	if r.build == nil {
		return base
	}
	return overlayFS{base: base, name: "BUILD.bazel", content: r.build}
}

// overlayFS is base with one file at its root replaced.
type overlayFS struct {
	base    fs.FS
	name    string
	content []byte
}

func (o overlayFS) Open(name string) (fs.File, error) {
	if name == "BUILD" && o.name == "BUILD.bazel" {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if name != o.name {
		return o.base.Open(name)
	}
	return &memFile{Reader: bytes.NewReader(o.content), name: name, size: int64(len(o.content))}, nil
}

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f, nil }
func (f *memFile) Close() error               { return nil }
func (f *memFile) Name() string               { return f.name }
func (f *memFile) Size() int64                { return f.size }
func (f *memFile) Mode() fs.FileMode          { return 0o444 }
func (f *memFile) ModTime() time.Time         { return time.Time{} }
func (f *memFile) IsDir() bool                { return false }
func (f *memFile) Sys() any                   { return nil }

var _ io.ReaderAt = (*memFile)(nil)

// repoSet is the repositories load() and labels reach: rbs's own and the
// workspace's local ones, which take the place of rbs's of the same name.
func repoSet(local map[string]localRepo) map[string]fs.FS {
	repos := maps.Clone(repositories())
	for name, r := range local {
		repos[name] = r.fsys()
	}
	return repos
}

// readBuildFile reads a new_local_repository's build_file: a label of the
// main repository, or a path from the workspace root.
func readBuildFile(root, s string) ([]byte, error) {
	p := s
	if l, err := parseMainLabel(s); err == nil {
		p = filepath.Join(l.Pkg, l.Name)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		return nil, fmt.Errorf("build_file %s: %v", s, err)
	}
	return b, nil
}

// parseMainLabel parses a label of the main repository: //x:y, @//x:y.
func parseMainLabel(s string) (label.Label, error) {
	s = strings.TrimLeft(s, "@")
	if !strings.HasPrefix(s, "//") {
		return label.Label{}, fmt.Errorf("%q is not a label of the main repository", s)
	}
	return label.Parse(s)
}

// addLocal declares repository name in directory dir (relative to root,
// or absolute), checking that it is one.
func (r *registrations) addLocal(root, name, dir string, build []byte, pos string) error {
	if name == "" || dir == "" {
		return fmt.Errorf("%s: a local repository needs a name and a path", pos)
	}
	if old, dup := r.repos[name]; dup {
		return fmt.Errorf("%s: repository @%s is declared twice (first at %s)", pos, name, old.pos)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, filepath.FromSlash(dir))
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return fmt.Errorf("%s: repository @%s: %s is not a directory", pos, name, dir)
	}
	if r.repos == nil {
		r.repos = map[string]localRepo{}
	}
	r.repos[name] = localRepo{dir: dir, build: build, pos: pos}
	return nil
}
