package execroot

import (
	"fmt"
	"path"
	"slices"
	"strings"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/proto"
)

// ConflictError is a path two merged trees both hold, differently.
type ConflictError struct{ Path string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%s is in both, with different contents", e.Path)
}

// Merge returns one tree holding what a and b hold: a directory in both
// holds the entries of both. A path both hold must be the same in both
// (a file of the same digest and mode, a symlink to the same target, or a
// directory on each side); otherwise the error is a *ConflictError naming
// it. The Directory messages of a and b are shared, not copied.
func Merge(a, b *Tree) (*Tree, error) {
	t := &Tree{Dirs: make(map[digest.Digest]*repb.Directory, len(a.Dirs)+len(b.Dirs))}
	root, err := t.merge(a, b, a.Root, b.Root, "")
	if err != nil {
		return nil, err
	}
	t.Root = root
	return t, nil
}

// merge merges directory da of a with db of b, at path p, into t and
// returns the merged directory's digest.
func (t *Tree) merge(a, b *Tree, da, db digest.Digest, p string) (digest.Digest, error) {
	if da == db {
		t.take(a, da)
		return da, nil
	}
	x, y := a.Dirs[da], b.Dirs[db]
	if x == nil || y == nil {
		return digest.Digest{}, fmt.Errorf("directory %s of %q is missing from its tree", da, p)
	}
	out := &repb.Directory{NodeProperties: x.NodeProperties}
	names := map[string]string{} // name → kind, in out
	at := func(name string) string { return strings.TrimPrefix(path.Join(p, name), "/") }
	for _, f := range x.Files {
		out.Files, names[f.Name] = append(out.Files, f), "file"
	}
	for _, l := range x.Symlinks {
		out.Symlinks, names[l.Name] = append(out.Symlinks, l), "symlink"
	}
	for _, f := range y.Files {
		switch names[f.Name] {
		case "":
			out.Files, names[f.Name] = append(out.Files, f), "file"
		case "file":
			i := slices.IndexFunc(out.Files, func(g *repb.FileNode) bool { return g.Name == f.Name })
			if g := out.Files[i]; !proto.Equal(g.Digest, f.Digest) || g.IsExecutable != f.IsExecutable {
				return digest.Digest{}, &ConflictError{at(f.Name)}
			}
		default:
			return digest.Digest{}, &ConflictError{at(f.Name)}
		}
	}
	for _, l := range y.Symlinks {
		switch names[l.Name] {
		case "":
			out.Symlinks, names[l.Name] = append(out.Symlinks, l), "symlink"
		case "symlink":
			i := slices.IndexFunc(out.Symlinks, func(g *repb.SymlinkNode) bool { return g.Name == l.Name })
			if out.Symlinks[i].Target != l.Target {
				return digest.Digest{}, &ConflictError{at(l.Name)}
			}
		default:
			return digest.Digest{}, &ConflictError{at(l.Name)}
		}
	}
	subs := map[string]*repb.DirectoryNode{}
	for _, d := range x.Directories {
		if names[d.Name] != "" {
			return digest.Digest{}, &ConflictError{at(d.Name)}
		}
		subs[d.Name] = d
	}
	for _, d := range y.Directories {
		if names[d.Name] != "" {
			return digest.Digest{}, &ConflictError{at(d.Name)}
		}
		other, ok := subs[d.Name]
		if !ok {
			dd, err := digest.FromProto(d.Digest)
			if err != nil {
				return digest.Digest{}, err
			}
			t.take(b, dd)
			subs[d.Name] = d
			continue
		}
		od, err := digest.FromProto(other.Digest)
		if err != nil {
			return digest.Digest{}, err
		}
		dd, err := digest.FromProto(d.Digest)
		if err != nil {
			return digest.Digest{}, err
		}
		m, err := t.merge(a, b, od, dd, at(d.Name))
		if err != nil {
			return digest.Digest{}, err
		}
		subs[d.Name] = &repb.DirectoryNode{Name: d.Name, Digest: m.Proto()}
	}
	for _, d := range x.Directories {
		if sub := subs[d.Name]; sub == d {
			dd, err := digest.FromProto(d.Digest)
			if err != nil {
				return digest.Digest{}, err
			}
			t.take(a, dd)
		}
	}
	for _, d := range subs {
		out.Directories = append(out.Directories, d)
	}
	slices.SortFunc(out.Files, func(f, g *repb.FileNode) int { return strings.Compare(f.Name, g.Name) })
	slices.SortFunc(out.Symlinks, func(f, g *repb.SymlinkNode) int { return strings.Compare(f.Name, g.Name) })
	slices.SortFunc(out.Directories, func(f, g *repb.DirectoryNode) int { return strings.Compare(f.Name, g.Name) })
	blob, err := proto.MarshalOptions{Deterministic: true}.Marshal(out)
	if err != nil {
		return digest.Digest{}, err
	}
	d := digest.FromBytes(blob)
	t.Dirs[d] = out
	return d, nil
}

// take copies the directory d of from, and those under it, into t.
func (t *Tree) take(from *Tree, d digest.Digest) {
	if _, ok := t.Dirs[d]; ok {
		return
	}
	dir := from.Dirs[d]
	if dir == nil {
		return
	}
	t.Dirs[d] = dir
	for _, sub := range dir.Directories {
		if sd, err := digest.FromProto(sub.Digest); err == nil {
			t.take(from, sd)
		}
	}
}
