package rules

// Symbolic macros, as Bazel 8 has them beside legacy macros (plain
// functions): macro(implementation, attrs) makes a callable that BUILD files
// call like a rule, with name, visibility and the declared attributes only,
// each checked and given its default; the implementation gets them as
// keyword arguments (label attributes as Labels, resolved in the calling
// package) and declares targets, which must be named name, or begin with
// name followed by _, - or .

import (
	"fmt"
	"strings"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
)

// MacroClass is what macro() returns.
type MacroClass struct {
	name  string // the global it was exported as
	impl  starlark.Callable
	attrs map[string]*Attr
	doc   string
	// finalizer macros run once the rest of the BUILD file has: their
	// native.existing_rules() sees every target it declared.
	finalizer bool
}

var _ starlark.Callable = (*MacroClass)(nil)

func (m *MacroClass) Name() string {
	if m.name == "" {
		return "unnamed_macro"
	}
	return m.name
}
func (m *MacroClass) String() string        { return "<macro " + m.Name() + ">" }
func (m *MacroClass) Type() string          { return "macro" }
func (m *MacroClass) Freeze()               {}
func (m *MacroClass) Truth() starlark.Bool  { return true }
func (m *MacroClass) Hash() (uint32, error) { return starlark.String(m.Name()).Hash() }

func macroBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var impl starlark.Callable
	var attrs *starlark.Dict
	var doc string
	var inherit starlark.Value
	var finalizer bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "implementation", &impl, "attrs?", &attrs, "doc?", &doc,
		"inherit_attrs?", &inherit, "finalizer?", &finalizer); err != nil {
		return nil, err
	}
	if inherit != nil && inherit != starlark.None {
		return nil, fmt.Errorf("macro: inherit_attrs is not supported by rbs: declare the attributes")
	}
	m := &MacroClass{impl: impl, attrs: map[string]*Attr{}, doc: doc, finalizer: finalizer}
	if attrs != nil {
		for _, kv := range attrs.Items() {
			name, ok := starlark.AsString(kv[0])
			if !ok {
				return nil, fmt.Errorf("macro: attribute names must be strings, got %s", kv[0])
			}
			if name == "name" || name == "visibility" {
				return nil, fmt.Errorf("macro: attribute %q is predefined", name)
			}
			switch a := kv[1].(type) {
			case *Attr:
				m.attrs[name] = a
			case starlark.NoneType:
				// Bazel's way of dropping an inherited attribute.
			default:
				return nil, fmt.Errorf("macro: attribute %q must be an attr.* value, got %s", name, kv[1].Type())
			}
		}
	}
	return m, nil
}

// CallInternal runs the macro in the package being evaluated.
func (m *MacroClass) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	pkg, ok := thread.Local(packageKey).(*Package)
	if !ok {
		return nil, fmt.Errorf("%s: macros can only be called while a BUILD file is evaluated", m.Name())
	}
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: macros take keyword arguments only", m.Name())
	}
	given := map[string]starlark.Value{}
	var name string
	visibility := starlark.Value(starlark.None)
	for _, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		switch {
		case k == "name":
			s, ok := kv[1].(starlark.String)
			if !ok || s == "" {
				return nil, fmt.Errorf("%s: name must be a non-empty string", m.Name())
			}
			name = string(s)
		case k == "visibility":
			visibility = kv[1]
		case m.attrs[k] != nil && kv[1] == starlark.None:
			// None leaves an attribute unset, as in Bazel: its default.
		case m.attrs[k] != nil:
			if err := m.attrs[k].check(k, kv[1]); err != nil {
				return nil, fmt.Errorf("%s %q: %v", m.Name(), name, err)
			}
			given[k] = kv[1]
		default:
			return nil, unknownAttr(m.Name(), k, sortedKeys(m.attrs))
		}
	}
	if name == "" {
		return nil, fmt.Errorf("%s: missing name", m.Name())
	}
	call := []starlark.Tuple{{starlark.String("name"), starlark.String(name)}, {starlark.String("visibility"), visibility}}
	for _, k := range sortedKeys(m.attrs) {
		a := m.attrs[k]
		v, set := given[k]
		if !set {
			if a.mandatory {
				return nil, fmt.Errorf("%s %q: missing mandatory attribute %q", m.Name(), name, k)
			}
			v = a.zero()
		}
		v, err := macroValue(a, v, pkg.Name)
		if err != nil {
			return nil, fmt.Errorf("%s %q: attribute %s: %v", m.Name(), name, k, err)
		}
		call = append(call, starlark.Tuple{starlark.String(k), v})
	}
	if m.finalizer && !pkg.finalizing {
		pos := thread.CallFrame(1).Pos
		pkg.finalizers = append(pkg.finalizers, func(thread *starlark.Thread) error {
			if err := m.expand(thread, pkg, name, call); err != nil {
				return fmt.Errorf("%s: finalizer %s %q: %w", pos, m.Name(), name, err)
			}
			return nil
		})
		return starlark.None, nil
	}
	return starlark.None, m.expand(thread, pkg, name, call)
}

// expand runs the macro's implementation with the arguments call, which
// may declare only targets named after the macro's name.
func (m *MacroClass) expand(thread *starlark.Thread, pkg *Package, name string, call []starlark.Tuple) error {
	before := len(pkg.Order)
	if _, err := starlark.Call(thread, m.impl, nil, call); err != nil {
		return err
	}
	for _, t := range pkg.Order[before:] {
		if t != name && !strings.HasPrefix(t, name+"_") && !strings.HasPrefix(t, name+"-") && !strings.HasPrefix(t, name+".") {
			return fmt.Errorf("%s %q declared target %q: a symbolic macro's targets are named %s or begin with %s_, %s- or %s.", m.Name(), name, t, name, name, name, name)
		}
	}
	return nil
}

// finalize runs the finalizer macros the BUILD file called, in order,
// once it has been evaluated, on its thread.
func (p *Package) finalize(thread *starlark.Thread) error {
	defer guard.Track(thread)()
	p.finalizing = true
	for _, f := range p.finalizers {
		if err := f(thread); err != nil {
			return err
		}
	}
	p.finalizers = nil
	return nil
}

// macroValue is what a macro's implementation gets for an attribute:
// labels as Label values, resolved in the calling package; other values as
// given. A select() stays as it is, for the targets it is passed to.
func macroValue(a *Attr, v starlark.Value, pkg string) (starlark.Value, error) {
	if _, ok := v.(*Selector); ok || (a.kind != attrLabel && a.kind != attrLabelList) {
		return v, nil
	}
	toLabel := func(s string) (starlark.Value, error) {
		l, err := label.ParseRelative(s, pkg)
		if err != nil {
			return nil, err
		}
		return Label{l}, nil
	}
	if a.kind == attrLabel {
		s, ok := v.(starlark.String)
		if !ok || s == "" {
			return starlark.None, nil
		}
		return toLabel(string(s))
	}
	l, err := stringList(v)
	if err != nil {
		return nil, err
	}
	out := make([]starlark.Value, len(l))
	for i, s := range l {
		if out[i], err = toLabel(s); err != nil {
			return nil, err
		}
	}
	return starlark.NewList(out), nil
}
