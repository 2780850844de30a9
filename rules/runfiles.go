package rules

// Runfiles, as Bazel lays them out: an executable's runfiles tree holds
// each file at MAIN/SHORT_PATH (MAIN is Workspace.Name: _main under
// modules) and a file of another repository also at REPO/PATH; a symlink
// of ctx.runfiles(symlinks = ...) at MAIN/PATH and a root symlink at PATH.
// Beside the files, the tree holds _repo_mapping, by which Bazel's
// runfiles libraries find the main repository under the name its module
// gives it too, and MANIFEST, each path and the file it stands for.

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"go.starlark.net/starlark"
)

// Runfiles is the set of files an executable needs at run time.
type Runfiles struct {
	files *Depset
	// symlinks and rootSymlinks hold SymlinkEntry values: a file at a
	// path below the main repository's directory, or below the tree's
	// root.
	symlinks, rootSymlinks *Depset
}

var _ starlark.HasAttrs = (*Runfiles)(nil)

func (r *Runfiles) String() string        { return "runfiles" }
func (r *Runfiles) Type() string          { return "runfiles" }
func (r *Runfiles) Freeze()               {}
func (r *Runfiles) Truth() starlark.Bool  { return true }
func (r *Runfiles) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: runfiles") }
func (r *Runfiles) AttrNames() []string {
	return []string{"empty_filenames", "files", "merge", "merge_all", "root_symlinks", "symlinks"}
}

func (r *Runfiles) Attr(name string) (starlark.Value, error) {
	switch name {
	case "files":
		return r.files, nil
	case "symlinks":
		return r.symlinks, nil
	case "root_symlinks":
		return r.rootSymlinks, nil
	case "empty_filenames":
		return &Depset{}, nil
	case "merge":
		return starlark.NewBuiltin("merge", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var other *Runfiles
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &other); err != nil {
				return nil, err
			}
			return mergeRunfiles([]*Runfiles{r, other}), nil
		}), nil
	case "merge_all":
		return starlark.NewBuiltin("merge_all", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var others starlark.Iterable
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &others); err != nil {
				return nil, err
			}
			all := []*Runfiles{r}
			it := others.Iterate()
			defer it.Done()
			var x starlark.Value
			for it.Next(&x) {
				o, ok := x.(*Runfiles)
				if !ok {
					return nil, fmt.Errorf("merge_all: want runfiles, got %s", x.Type())
				}
				all = append(all, o)
			}
			return mergeRunfiles(all), nil
		}), nil
	}
	return nil, nil
}

func emptyRunfiles() *Runfiles {
	return &Runfiles{files: &Depset{}, symlinks: &Depset{}, rootSymlinks: &Depset{}}
}

// mergeRunfiles is the runfiles of all of rs, the earlier first.
func mergeRunfiles(rs []*Runfiles) *Runfiles {
	out := emptyRunfiles()
	for _, r := range rs {
		out.files.transitive = append(out.files.transitive, r.files)
		out.symlinks.transitive = append(out.symlinks.transitive, r.symlinks)
		out.rootSymlinks.transitive = append(out.rootSymlinks.transitive, r.rootSymlinks)
	}
	return out
}

// symlinkEntry is a SymlinkEntry: a file at a path of a runfiles tree.
type symlinkEntry struct {
	path string
	file *File
}

var _ starlark.HasAttrs = symlinkEntry{}

func (e symlinkEntry) String() string {
	return fmt.Sprintf("SymlinkEntry(path = %q, target_file = %s)", e.path, e.file)
}
func (e symlinkEntry) Type() string          { return "SymlinkEntry" }
func (e symlinkEntry) Freeze()               {}
func (e symlinkEntry) Truth() starlark.Bool  { return true }
func (e symlinkEntry) Hash() (uint32, error) { return starlark.String(e.String()).Hash() }
func (e symlinkEntry) AttrNames() []string   { return []string{"path", "target_file"} }
func (e symlinkEntry) Attr(name string) (starlark.Value, error) {
	switch name {
	case "path":
		return starlark.String(e.path), nil
	case "target_file":
		return e.file, nil
	}
	return nil, nil
}

// symlinkDepset reads ctx.runfiles' symlinks or root_symlinks: a dict
// of paths to Files, or a depset of SymlinkEntry.
func symlinkDepset(arg string, v starlark.Value) (*Depset, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return &Depset{}, nil
	case *Depset:
		for _, x := range v.ToList() {
			if _, ok := x.(symlinkEntry); !ok {
				return nil, fmt.Errorf("runfiles: %s: want SymlinkEntry values in the depset, got %s", arg, x.Type())
			}
		}
		return v, nil
	case *starlark.Dict:
		d := &Depset{}
		for _, kv := range v.Items() {
			p, ok := starlark.AsString(kv[0])
			f, isFile := kv[1].(*File)
			if !ok || !isFile {
				return nil, fmt.Errorf("runfiles: %s: want a dict of paths to Files, got %s: %s", arg, kv[0].Type(), kv[1].Type())
			}
			clean := path.Clean(p)
			if p == "" || path.IsAbs(p) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("runfiles: %s: path %q must be relative and stay in the runfiles tree", arg, p)
			}
			d.direct = append(d.direct, symlinkEntry{path: clean, file: f})
		}
		return d, nil
	}
	return nil, fmt.Errorf("runfiles: %s: want a dict or a depset, got %s", arg, v.Type())
}

// Runfile is a file of a runfiles tree at its path from the tree's root.
type Runfile struct {
	Path string
	File *File
}

// layout is the runfiles tree of executable exe in workspace wsName: the
// executable and every file at their places, then the symlinks, then the
// root symlinks; a path taken keeps its first file.
func (r *Runfiles) layout(wsName string, exe *File) []Runfile {
	var out []Runfile
	taken := map[string]bool{}
	add := func(p string, f *File) {
		if !taken[p] {
			taken[p] = true
			out = append(out, Runfile{Path: p, File: f})
		}
	}
	for _, f := range append([]*File{exe}, r.files.Files()...) {
		for _, p := range RunfilesPaths(wsName, f) {
			add(p, f)
		}
	}
	for _, v := range r.symlinks.ToList() {
		e := v.(symlinkEntry)
		add(wsName+"/"+e.path, e.file)
	}
	for _, v := range r.rootSymlinks.ToList() {
		e := v.(symlinkEntry)
		add(e.path, e.file)
	}
	return out
}

// RunfileFiles are the files of a runfiles tree, each once.
func RunfileFiles(tree []Runfile) []*File {
	var out []*File
	seen := map[*File]bool{}
	for _, r := range tree {
		if !seen[r.File] {
			seen[r.File] = true
			out = append(out, r.File)
		}
	}
	return out
}

// RepoMapping is the _repo_mapping file of the workspace's runfiles
// trees, as Bazel writes it: for the main repository (the empty source),
// each name it knows a repository by and the repository's directory in
// the tree: its module's name for itself, and the well-known
// repositories.
func (w *Workspace) RepoMapping() string {
	var lines []string
	if w.reg.module != "" && w.reg.module != w.Name {
		lines = append(lines, ","+w.reg.module+","+w.Name)
	}
	for repo := range w.repos {
		if repo != "rbs" {
			lines = append(lines, ","+repo+","+repo)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}
