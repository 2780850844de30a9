package rules

// Targets of the well-known repositories (@bazel_tools//tools/bash/runfiles,
// @platforms//os:linux): their packages live in rbs's embedded files and are
// addressed as packages of the workspace under external/REPO/ (the
// directory Bazel gives them too). Their source files become outputs under
// the output root, written from the embedded copy, and an executable's
// runfiles tree holds them at REPO/PATH beside the workspace's, where
// Bazel's runfiles libraries look.

import (
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strings"

	"github.com/rbs-build/rbs/starlark/label"
)

// externalDir is the package directory of the repositories' packages.
const externalDir = label.ExternalDir

// onDisk is the directory of package name on this machine: in the
// workspace, or in a local repository; false for rbs's own repositories.
func (w *Workspace) onDisk(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, externalDir+"/")
	if !ok {
		return filepath.Join(w.Root, filepath.FromSlash(name)), true
	}
	repo, dir, _ := strings.Cut(rest, "/")
	r, ok := w.reg.repos[repo]
	if !ok {
		return "", false
	}
	rd, err := r.path()
	if err != nil {
		return "", false
	}
	return filepath.Join(rd, filepath.FromSlash(dir)), true
}

// canonical is l with a repository's package addressed under external/.
func canonical(l label.Label) label.Label {
	if l.Repo == "" {
		return l
	}
	return label.Label{Pkg: path.Join(externalDir, l.Repo, l.Pkg), Name: l.Name}
}

// externalPackage returns the files and the directory in them of package
// name when it is one of another repository's ("external/REPO/PKG").
func (w *Workspace) externalPackage(name string) (fs.FS, string, bool) {
	rest, ok := strings.CutPrefix(name, externalDir+"/")
	if !ok {
		return nil, "", false
	}
	repo, dir, _ := strings.Cut(rest, "/")
	fsys, ok := w.repos[repo]
	if !ok || repo == "rbs" {
		return nil, "", false
	}
	if dir == "" {
		dir = "."
	}
	return fsys, dir, true
}

// externalFile is the target of file name in external package pkg: the
// file written from the repository's copy of it (rbs's, or a local
// repository's, which the analysis then counts as read).
func (an *analyzer) externalFile(pkg *Package, l label.Label) (*Configured, error) {
	b, err := fs.ReadFile(pkg.fsys, path.Join(pkg.fsDir, l.Name))
	if err != nil {
		return nil, fmt.Errorf("no such target %s: no rule and no file of that name in the package", l)
	}
	if dir, ok := an.ws.onDisk(pkg.Name); ok {
		an.repoFiles = append(an.repoFiles, filepath.Join(dir, filepath.FromSlash(l.Name)))
	}
	f := &File{ShortPath: path.Join(pkg.Name, l.Name), Generated: true, Bin: an.ws.BinDir(), Owner: l}
	a := &Action{Owner: l, Mnemonic: "ExternalFile", Progress: "Writing " + f.ShortPath, Outputs: []*File{f}, Write: true, Content: string(b)}
	if info, err := fs.Stat(pkg.fsys, path.Join(pkg.fsDir, l.Name)); err == nil && info.Mode()&0o111 != 0 {
		a.Executable = true
	}
	an.actions[f.Path()] = a
	an.byFile[f.Path()] = f
	return &Configured{Label: l, Files: []*File{f}, Actions: []*Action{a}}, nil
}

// RunfilesPaths are where file f goes in a runfiles tree of workspace
// wsName, relative to its root: WORKSPACE/SHORT_PATH, and for a file of a
// repository also REPO/PATH.
func RunfilesPaths(wsName string, f *File) []string {
	out := []string{wsName + "/" + f.ShortPath}
	if rest, ok := strings.CutPrefix(f.ShortPath, externalDir+"/"); ok {
		out = append(out, rest)
	}
	return out
}
