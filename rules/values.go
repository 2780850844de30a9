package rules

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// Label is a label as a Starlark value (ctx.label, dep.label).
type Label struct{ label.Label }

var (
	_ starlark.HasAttrs   = Label{}
	_ starlark.Comparable = Label{}
)

func (l Label) String() string        { return l.shown().String() }
func (l Label) Type() string          { return "Label" }
func (l Label) Freeze()               {}
func (l Label) Truth() starlark.Bool  { return true }
func (l Label) Hash() (uint32, error) { return starlark.String(l.String()).Hash() }
func (l Label) AttrNames() []string {
	return []string{"name", "package", "relative", "repo_name", "same_package_label", "workspace_name", "workspace_root"}
}

// shown is the label as rules see it: a target of a well-known
// repository, which rbs addresses as a package under external/, in its
// repository (@platforms//os:linux), as Bazel shows it.
func (l Label) shown() label.Label {
	if l.Repo != "" {
		return l.Label
	}
	rest, ok := strings.CutPrefix(l.Pkg, externalDir+"/")
	if !ok {
		return l.Label
	}
	repo, pkg, _ := strings.Cut(rest, "/")
	return label.Label{Repo: repo, Pkg: pkg, Name: l.Name}
}

func (l Label) Attr(name string) (starlark.Value, error) {
	l = Label{l.shown()}
	switch name {
	case "relative":
		return starlark.NewBuiltin("relative", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var rel string
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &rel); err != nil {
				return nil, err
			}
			return parseLabelIn(b.Name(), rel, l.Repo, l.Pkg)
		}), nil
	case "same_package_label":
		return starlark.NewBuiltin("same_package_label", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var target string
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &target); err != nil {
				return nil, err
			}
			if strings.Contains(target, ":") {
				return nil, fmt.Errorf("%s: %q is a target name, not a label", b.Name(), target)
			}
			return parseLabelIn(b.Name(), ":"+target, l.Repo, l.Pkg)
		}), nil
	case "name":
		return starlark.String(l.Name), nil
	case "package":
		return starlark.String(l.Pkg), nil
	case "workspace_name", "repo_name":
		return starlark.String(l.Repo), nil
	case "workspace_root":
		if l.Repo == "" {
			return starlark.String(""), nil
		}
		return starlark.String("external/" + l.Repo), nil
	}
	return nil, nil
}

func (l Label) CompareSameType(op syntax.Token, y starlark.Value, depth int) (bool, error) {
	return starlark.Compare(op, starlark.String(l.String()), starlark.String(y.(Label).String()))
}

// parseLabelIn parses s as a label written in package pkg of repository
// repo: an absolute label as it is, a relative one in that package.
func parseLabelIn(fn, s, repo, pkg string) (Label, error) {
	l, err := label.ParseRelative(s, pkg)
	if err != nil {
		return Label{}, fmt.Errorf("%s: %v", fn, err)
	}
	if !strings.HasPrefix(s, "@") {
		l.Repo = repo
	}
	return Label{l}, nil
}

// labelBuiltin is Label(s): s parsed as a label, a relative one in the
// package of the file that calls Label.
func labelBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &s); err != nil {
		return nil, err
	}
	repo, pkg := callerPackage(thread)
	return parseLabelIn(b.Name(), s, repo, pkg)
}

// labelArg is a label given as a Label or as an absolute label string.
func labelArg(v starlark.Value) (label.Label, error) {
	switch x := v.(type) {
	case Label:
		return x.Label, nil
	case starlark.String:
		return label.Parse(string(x))
	}
	return label.Label{}, fmt.Errorf("want a label, got %s", v.Type())
}

// callerPackage is the repository and package of the Starlark file that
// called the builtin running on thread.
func callerPackage(thread *starlark.Thread) (repo, pkg string) {
	repo, p := starlarkFile(thread.CallFrame(1).Pos.Filename())
	if pkg = path.Dir(p); pkg == "." {
		pkg = ""
	}
	return repo, pkg
}

// File is a source or generated file (ctx.file, ctx.outputs, declare_file).
type File struct {
	// ShortPath is the path relative to the workspace root: "pkg/out.txt".
	ShortPath string
	// Generated files live under the output root of their platform, Bin
	// (BinDir).
	Generated bool
	Bin       string
	Owner     label.Label
	// IsDirectory marks a declared output directory.
	IsDirectory bool
}

var (
	_ starlark.HasAttrs   = (*File)(nil)
	_ starlark.Comparable = (*File)(nil)
)

// BinDir is where the generated files of a build for p in compilation mode
// mode live, relative to the exec root, named as Bazel names its output
// directories: rbs-out/k8-fastbuild/bin for this machine (x86_64) in the
// default mode, rbs-out/aarch64-opt/bin for linux-arm64 with -c opt. Each
// platform's and mode's outputs are so kept apart.
func BinDir(p platform.Platform, mode string) string {
	if p.IsZero() {
		p = platform.Host()
	}
	if mode == "" {
		mode = "fastbuild"
	}
	return "rbs-out/" + cpuValue(p) + "-" + mode + "/bin"
}

// Path is the exec path: where the file is relative to the exec root.
func (f *File) Path() string {
	if f.Generated {
		return f.Bin + "/" + f.ShortPath
	}
	return f.ShortPath
}

func (f *File) String() string {
	if f.Generated {
		return fmt.Sprintf("<generated file %s>", f.ShortPath)
	}
	return fmt.Sprintf("<source file %s>", f.ShortPath)
}
func (f *File) Type() string          { return "File" }
func (f *File) Freeze()               {}
func (f *File) Truth() starlark.Bool  { return true }
func (f *File) Hash() (uint32, error) { return starlark.String(f.Path()).Hash() }

// CompareSameType orders files by their exec path, so that sorted() and
// comparisons work on them.
func (f *File) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	return threeway(op, strings.Compare(f.Path(), y.(*File).Path())), nil
}

// threeway is the outcome of comparison op given cmp (-1, 0 or 1).
func threeway(op syntax.Token, cmp int) bool {
	switch op {
	case syntax.EQL:
		return cmp == 0
	case syntax.NEQ:
		return cmp != 0
	case syntax.LT:
		return cmp < 0
	case syntax.LE:
		return cmp <= 0
	case syntax.GT:
		return cmp > 0
	}
	return cmp >= 0 // syntax.GE
}
func (f *File) AttrNames() []string {
	return []string{"basename", "dirname", "extension", "is_directory", "is_source", "owner", "path", "root", "short_path"}
}

func (f *File) Attr(name string) (starlark.Value, error) {
	switch name {
	case "path":
		return starlark.String(f.Path()), nil
	case "short_path":
		return starlark.String(f.ShortPath), nil
	case "basename":
		return starlark.String(path.Base(f.ShortPath)), nil
	case "dirname":
		return starlark.String(path.Dir(f.Path())), nil
	case "extension":
		return starlark.String(strings.TrimPrefix(path.Ext(f.ShortPath), ".")), nil
	case "is_source":
		return starlark.Bool(!f.Generated), nil
	case "is_directory":
		return starlark.Bool(f.IsDirectory), nil
	case "owner":
		return Label{f.Owner}, nil
	case "root":
		root := ""
		if f.Generated {
			root = f.Bin
		}
		return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{"path": starlark.String(root)}), nil
	}
	return nil, nil
}

// Depset is an immutable set of values built from direct elements and
// transitive depsets, flattened in order on demand. Its order is one of
// depsetOrders.
type Depset struct {
	direct     []starlark.Value
	transitive []*Depset
	order      string
}

// depsetOrders are the orders a depset may have; "default" is postorder.
var depsetOrders = []string{"default", "postorder", "preorder", "topological"}

// kind is the depset's order; one made by rbs itself has the default.
func (d *Depset) kind() string {
	if d.order == "" {
		return "default"
	}
	return d.order
}

var _ starlark.HasAttrs = (*Depset)(nil)

func (d *Depset) String() string        { return fmt.Sprintf("depset(%v)", d.ToList()) }
func (d *Depset) Type() string          { return "depset" }
func (d *Depset) Freeze()               {}
func (d *Depset) Truth() starlark.Bool  { return len(d.ToList()) > 0 }
func (d *Depset) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: depset") }
func (d *Depset) AttrNames() []string   { return []string{"to_list"} }

func (d *Depset) Attr(name string) (starlark.Value, error) {
	if name != "to_list" {
		return nil, nil
	}
	return starlark.NewBuiltin("to_list", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 0); err != nil {
			return nil, err
		}
		return starlark.NewList(d.ToList()), nil
	}), nil
}

// ToList flattens the depset, each value once, as Bazel flattens it. Each
// depset lays out its members when it is made, by its own order: its
// transitive depsets and then its direct values (postorder and default),
// or the other way round (preorder and topological). A walk goes through
// those layouts, depth first, skipping a depset met before; for a
// topological depset the walk goes through each layout backwards and its
// result is reversed, so that a depset comes before what it includes.
func (d *Depset) ToList() []starlark.Value {
	var out []starlark.Value
	seen := map[string]bool{}
	visited := map[*Depset]bool{}
	backwards := d.kind() == "topological"
	var walk func(*Depset)
	add := func(v starlark.Value) {
		if k := key(v); !seen[k] {
			seen[k] = true
			out = append(out, v)
		}
	}
	walk = func(x *Depset) {
		if x == nil || visited[x] {
			return
		}
		visited[x] = true
		directFirst := x.kind() == "preorder" || x.kind() == "topological"
		if directFirst == backwards {
			for i := range x.transitive {
				walk(x.transitive[index(i, len(x.transitive), backwards)])
			}
		}
		for i := range x.direct {
			add(x.direct[index(i, len(x.direct), backwards)])
		}
		if directFirst != backwards {
			for i := range x.transitive {
				walk(x.transitive[index(i, len(x.transitive), backwards)])
			}
		}
	}
	walk(d)
	if backwards {
		slices.Reverse(out)
	}
	return out
}

// index is the i-th of n positions, counted from the end when backwards.
func index(i, n int, backwards bool) int {
	if backwards {
		return n - 1 - i
	}
	return i
}

func key(v starlark.Value) string {
	if f, ok := v.(*File); ok {
		return "file:" + f.Path()
	}
	return v.Type() + ":" + v.String()
}

// Files returns the depset's File members.
func (d *Depset) Files() []*File {
	var out []*File
	for _, v := range d.ToList() {
		if f, ok := v.(*File); ok {
			out = append(out, f)
		}
	}
	return out
}

func newDepset(files []*File, transitive ...*Depset) *Depset {
	d := &Depset{transitive: transitive}
	for _, f := range files {
		d.direct = append(d.direct, f)
	}
	return d
}

func depsetBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var direct, transitive *starlark.List
	order := "default"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "direct?", &direct, "order?", &order, "transitive?", &transitive); err != nil {
		return nil, err
	}
	if !slices.Contains(depsetOrders, order) {
		return nil, fmt.Errorf("depset: invalid order %q: want one of %s", order, strings.Join(depsetOrders, ", "))
	}
	d := &Depset{order: order}
	if direct != nil {
		for i := 0; i < direct.Len(); i++ {
			d.direct = append(d.direct, direct.Index(i))
		}
	}
	if transitive != nil {
		for i := 0; i < transitive.Len(); i++ {
			t, ok := transitive.Index(i).(*Depset)
			if !ok {
				return nil, fmt.Errorf("depset: transitive must be a list of depsets, got %s", transitive.Index(i).Type())
			}
			if t.kind() != order && t.kind() != "default" && order != "default" {
				return nil, fmt.Errorf("depset: order %q is incompatible with the order %q of a transitive depset", order, t.kind())
			}
			d.transitive = append(d.transitive, t)
		}
	}
	return d, nil
}
