// Package merkle builds REAPI input roots: from a set of files (path in the
// root → content source) it makes the Directory messages and their digests,
// bottom up, and lists every blob a server needs.
package merkle

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/proto"
)

// File is one file of an input root.
type File struct {
	// Path is the file's place in the root: slash-separated, relative,
	// clean, without ".." (e.g. "pkg/a.txt").
	Path       string
	Digest     digest.Digest
	Executable bool
	// Source is the absolute path the content comes from, when it is on
	// disk; it is opened to upload the content.
	Source string
	// Data is the content of a small in-memory file (a generated script,
	// say); Source is "" then.
	Data []byte
}

// Open returns the file's content: Source opened, or Data.
func (f File) Open() (io.ReadCloser, error) {
	if f.Source != "" {
		return os.Open(f.Source)
	}
	return io.NopCloser(bytes.NewReader(f.Data)), nil
}

// Tree is an input root.
type Tree struct {
	// Root is the digest of the root Directory message.
	Root digest.Digest
	// Directories holds the serialized Directory messages, the root's
	// included, by digest.
	Directories map[digest.Digest][]byte
	// Files are the root's files, once each, sorted by path.
	Files []File
}

// marshal serializes m deterministically, so that equal messages always
// have the same digest.
func marshal(m proto.Message) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(m)
}

// CheckPath validates a path of a file in an input root: non-empty,
// slash-separated, relative, clean, without "..".
func CheckPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("empty path %q", p)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case strings.ContainsRune(p, '\x00'):
		return fmt.Errorf("path %q contains NUL", p)
	case p == ".." || strings.HasPrefix(p, "../") || strings.HasSuffix(p, "/..") || strings.Contains(p, "/../"):
		return fmt.Errorf("path %q contains \"..\"", p)
	case path.Clean(p) != p:
		return fmt.Errorf("path %q is not clean (want %q)", p, path.Clean(p))
	}
	return nil
}

// Symlink is one symlink of a tree: its place in the root, as a File's
// Path, and its target, kept as text and never resolved.
type Symlink struct {
	Path, Target string
}

// dir is a directory under construction.
type dir struct {
	path  string // in the root; "" for the root
	files map[string]File
	links map[string]Symlink
	dirs  map[string]*dir
}

func newDir(p string) *dir {
	return &dir{path: p, files: map[string]File{}, links: map[string]Symlink{}, dirs: map[string]*dir{}}
}

// Build makes the input root holding files. The same path may appear more
// than once only with the same content and executable bit. An empty set of
// files makes the empty root.
func Build(files []File) (*Tree, error) { return BuildAll(files, nil, nil) }

// BuildAll makes the tree holding files (as Build), symlinks and
// directories, which are kept even when empty. A path may be given twice
// only as the same entry: a file with the same content and executable bit,
// a symlink with the same target, or a directory.
func BuildAll(files []File, links []Symlink, dirs []string) (*Tree, error) {
	root := newDir("")
	byPath := map[string]File{}
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return nil, fmt.Errorf("input file: %w", err)
		}
		if f.Digest.IsZero() {
			return nil, fmt.Errorf("input file %q has no digest", f.Path)
		}
		if f.Source == "" && digest.FromBytes(f.Data) != f.Digest {
			return nil, fmt.Errorf("input file %q: its Data do not have digest %s", f.Path, f.Digest)
		}
		if prev, dup := byPath[f.Path]; dup {
			if prev.Digest != f.Digest || prev.Executable != f.Executable {
				return nil, fmt.Errorf("input file %q is given twice with different contents (%s%s and %s%s)",
					f.Path, prev.Digest, execSuffix(prev.Executable), f.Digest, execSuffix(f.Executable))
			}
			continue
		}
		d, name, err := root.parentOf(f.Path)
		if err != nil {
			return nil, err
		}
		if err := d.free(name, f.Path, "file"); err != nil {
			return nil, err
		}
		byPath[f.Path] = f
		d.files[name] = f
	}
	for _, l := range links {
		if err := CheckPath(l.Path); err != nil {
			return nil, fmt.Errorf("symlink: %w", err)
		}
		if l.Target == "" || strings.ContainsRune(l.Target, '\x00') {
			return nil, fmt.Errorf("symlink %q has an empty target or one with NUL", l.Path)
		}
		d, name, err := root.parentOf(l.Path)
		if err != nil {
			return nil, err
		}
		if prev, dup := d.links[name]; dup {
			if prev.Target != l.Target {
				return nil, fmt.Errorf("symlink %q is given twice with different targets (%q and %q)", l.Path, prev.Target, l.Target)
			}
			continue
		}
		if err := d.free(name, l.Path, "symlink"); err != nil {
			return nil, err
		}
		d.links[name] = l
	}
	for _, p := range dirs {
		if err := CheckPath(p); err != nil {
			return nil, fmt.Errorf("directory: %w", err)
		}
		d, name, err := root.parentOf(p)
		if err != nil {
			return nil, err
		}
		if _, ok := d.dirs[name]; ok {
			continue
		}
		if err := d.free(name, p, "directory"); err != nil {
			return nil, err
		}
		d.dirs[name] = newDir(p)
	}
	t := &Tree{Directories: map[digest.Digest][]byte{}}
	rd, err := t.add(root)
	if err != nil {
		return nil, err
	}
	t.Root = rd
	t.Files = make([]File, 0, len(byPath))
	for _, f := range byPath {
		t.Files = append(t.Files, f)
	}
	sort.Slice(t.Files, func(i, j int) bool { return t.Files[i].Path < t.Files[j].Path })
	return t, nil
}

// parentOf returns the directory that holds the checked path p, creating
// the directories on the way, and p's last name.
func (d *dir) parentOf(p string) (*dir, string, error) {
	parts := strings.Split(p, "/")
	for i, name := range parts[:len(parts)-1] {
		if other := d.entry(name); other != "" {
			return nil, "", fmt.Errorf("input %q is both a %s and the directory of input %q", path.Join(d.path, name), other, p)
		}
		sub, ok := d.dirs[name]
		if !ok {
			sub = newDir(strings.Join(parts[:i+1], "/"))
			d.dirs[name] = sub
		}
		d = sub
	}
	return d, parts[len(parts)-1], nil
}

// entry says what d holds as name besides a directory: "file", "symlink",
// or "".
func (d *dir) entry(name string) string {
	if _, ok := d.files[name]; ok {
		return "file"
	}
	if _, ok := d.links[name]; ok {
		return "symlink"
	}
	return ""
}

// free checks that d holds nothing as name yet, for the entry of the given
// kind at p.
func (d *dir) free(name, p, kind string) error {
	if sub, ok := d.dirs[name]; ok {
		return fmt.Errorf("input %q is both a %s and the directory of input %q", p, kind, sub.anyFile())
	}
	if other := d.entry(name); other != "" {
		return fmt.Errorf("input %q is both a %s and a %s", p, other, kind)
	}
	return nil
}

func execSuffix(x bool) string {
	if x {
		return " executable"
	}
	return ""
}

// anyFile returns the path of some file under d, for error messages.
func (d *dir) anyFile() string {
	for _, name := range sortedKeys(d.files) {
		return d.files[name].Path
	}
	for _, name := range sortedKeys(d.links) {
		return d.links[name].Path
	}
	for _, name := range sortedKeys(d.dirs) {
		return d.dirs[name].anyFile()
	}
	return d.path
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// add serializes d and its subdirectories, bottom up, and returns d's
// digest. Entries are sorted by name as REAPI requires.
func (t *Tree) add(d *dir) (digest.Digest, error) {
	msg := &repb.Directory{}
	for _, name := range sortedKeys(d.files) {
		f := d.files[name]
		msg.Files = append(msg.Files, &repb.FileNode{Name: name, Digest: f.Digest.Proto(), IsExecutable: f.Executable})
	}
	for _, name := range sortedKeys(d.dirs) {
		sd, err := t.add(d.dirs[name])
		if err != nil {
			return digest.Digest{}, err
		}
		msg.Directories = append(msg.Directories, &repb.DirectoryNode{Name: name, Digest: sd.Proto()})
	}
	for _, name := range sortedKeys(d.links) {
		msg.Symlinks = append(msg.Symlinks, &repb.SymlinkNode{Name: name, Target: d.links[name].Target})
	}
	b, err := marshal(msg)
	if err != nil {
		return digest.Digest{}, fmt.Errorf("encoding input directory %q: %w", d.path, err)
	}
	if b == nil {
		b = []byte{}
	}
	dd := digest.FromBytes(b)
	t.Directories[dd] = b
	return dd, nil
}

// Blobs returns every blob of the tree, once per digest: the Directory
// messages and the files' contents (in memory, or opened from Source).
func (t *Tree) Blobs() []client.Blob {
	seen := map[digest.Digest]bool{}
	out := make([]client.Blob, 0, len(t.Directories)+len(t.Files))
	dirs := make([]digest.Digest, 0, len(t.Directories))
	for d := range t.Directories {
		dirs = append(dirs, d)
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].Hash() < dirs[j].Hash() })
	for _, d := range dirs {
		seen[d] = true
		out = append(out, client.Blob{Digest: d, Data: t.Directories[d]})
	}
	for _, f := range t.Files {
		if seen[f.Digest] {
			continue
		}
		seen[f.Digest] = true
		if f.Source != "" {
			out = append(out, client.Blob{Digest: f.Digest, Open: f.Open})
		} else {
			data := f.Data
			if data == nil {
				data = []byte{}
			}
			out = append(out, client.Blob{Digest: f.Digest, Data: data})
		}
	}
	return out
}

// FileFromDisk hashes the regular file at abs (following symlinks) and
// returns it as the input path.
func FileFromDisk(path, abs string, executable bool) (File, error) {
	info, err := os.Stat(abs)
	if err != nil {
		return File{}, fmt.Errorf("input %q: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return File{}, fmt.Errorf("input %q: %s is not a regular file", path, abs)
	}
	d, err := HashFile(abs)
	if err != nil {
		return File{}, fmt.Errorf("input %q: reading %s: %w", path, abs, err)
	}
	return File{Path: path, Digest: d, Executable: executable, Source: abs}, nil
}
