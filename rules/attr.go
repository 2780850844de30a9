package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rbs-build/rbs/starlark/spell"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// attrKind is the type of a rule attribute.
type attrKind int

const (
	attrString attrKind = iota
	attrInt
	attrBool
	attrLabel
	attrLabelList
	attrStringList
	attrStringDict
	attrOutput
	attrOutputList
	attrIntList
	attrStringListDict
	attrLabelKeyedStringDict
	attrStringKeyedLabelDict
)

var attrKindNames = map[attrKind]string{
	attrString: "string", attrInt: "int", attrBool: "bool", attrLabel: "label", attrLabelList: "label_list",
	attrStringList: "string_list", attrStringDict: "string_dict", attrOutput: "output", attrOutputList: "output_list",
	attrIntList: "int_list", attrStringListDict: "string_list_dict",
	attrLabelKeyedStringDict: "label_keyed_string_dict", attrStringKeyedLabelDict: "string_keyed_label_dict",
}

// Attr describes one attribute of a rule (attr.string(...) and friends).
type Attr struct {
	kind       attrKind
	def        starlark.Value // nil: none
	mandatory  bool
	allowFiles bool
	single     bool // allow_single_file
	executable bool
	values     []string
	// aspects are the aspects a label attribute carries to its targets.
	aspects []*AspectClass
	// providers are the groups of providers a label attribute's targets
	// must have all of one of; none: any target.
	providers [][]*Provider
	// fixed is configurable = False: the value may not be a select().
	fixed bool
	// cfg is the transition a label attribute's dependencies take; nil
	// for none.
	cfg *Transition
}

var _ starlark.Value = (*Attr)(nil)

func (a *Attr) String() string        { return "<attr." + attrKindNames[a.kind] + ">" }
func (a *Attr) Type() string          { return "Attribute" }
func (a *Attr) Freeze()               {}
func (a *Attr) Truth() starlark.Bool  { return true }
func (a *Attr) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Attribute") }

// attrModule is the attr module of the rule API.
func attrModule() *starlarkstruct.Module {
	members := starlark.StringDict{}
	for kind, name := range attrKindNames {
		members[name] = attrConstructor(kind, name)
	}
	return &starlarkstruct.Module{Name: "attr", Members: members}
}

func attrConstructor(kind attrKind, name string) *starlark.Builtin {
	return starlark.NewBuiltin("attr."+name, func(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		a := &Attr{kind: kind}
		var def starlark.Value
		var doc string
		var mandatory, executable, allowEmpty, nonEmpty bool
		var allowFiles, cfg, providers, values, singleFile, aspects starlark.Value
		var configurable starlark.Value = starlark.True
		err := starlark.UnpackArgs(b.Name(), args, kwargs,
			"default?", &def, "doc?", &doc, "mandatory?", &mandatory, "allow_files?", &allowFiles,
			"allow_single_file?", &singleFile, "executable?", &executable, "cfg?", &cfg, "providers?", &providers,
			"values?", &values, "allow_empty?", &allowEmpty, "non_empty?", &nonEmpty, "aspects?", &aspects,
			"configurable?", &configurable)
		if err != nil {
			return nil, err
		}
		a.fixed = configurable == starlark.False
		if a.cfg, err = cfgValue(b.Name(), cfg); err != nil {
			return nil, err
		}
		if a.providers, err = providerGroups(b.Name(), providers); err != nil {
			return nil, err
		}
		if l, ok := aspects.(*starlark.List); ok {
			if kind != attrLabel && kind != attrLabelList {
				return nil, fmt.Errorf("%s: only label attributes carry aspects", b.Name())
			}
			for i := 0; i < l.Len(); i++ {
				asp, ok := l.Index(i).(*AspectClass)
				if !ok {
					return nil, fmt.Errorf("%s: aspects must be aspect() values, got %s", b.Name(), l.Index(i).Type())
				}
				a.aspects = append(a.aspects, asp)
			}
		}
		if def, err = labelDefault(thread, b.Name(), kind, def); err != nil {
			return nil, err
		}
		a.def, a.mandatory, a.executable = def, mandatory, executable
		switch v := allowFiles.(type) {
		case nil:
		case starlark.Bool:
			a.allowFiles = bool(v)
		default:
			a.allowFiles = true // a list of extensions
		}
		if singleFile != nil && singleFile != starlark.False {
			a.allowFiles, a.single = true, true
		}
		if l, ok := values.(*starlark.List); ok {
			for i := 0; i < l.Len(); i++ {
				if s, ok := starlark.AsString(l.Index(i)); ok {
					a.values = append(a.values, s)
				}
			}
		}
		return a, nil
	})
}

// labelDefault is the default of a label attribute with its labels
// absolute: as in Bazel, a default is relative to the package of the file
// that declares the attribute, not to the target's.
func labelDefault(thread *starlark.Thread, fn string, kind attrKind, def starlark.Value) (starlark.Value, error) {
	if kind != attrLabel && kind != attrLabelList {
		return def, nil
	}
	repo, pkg := callerPackage(thread)
	abs := func(v starlark.Value) (starlark.Value, error) {
		s, ok := v.(starlark.String)
		if !ok || s == "" {
			return v, nil
		}
		l, err := parseLabelIn(fn, string(s), repo, pkg)
		if err != nil {
			return nil, err
		}
		return starlark.String(l.String()), nil
	}
	if l, ok := def.(*starlark.List); ok {
		out := make([]starlark.Value, l.Len())
		for i := range out {
			var err error
			if out[i], err = abs(l.Index(i)); err != nil {
				return nil, err
			}
		}
		return starlark.NewList(out), nil
	}
	return abs(def)
}

// providerGroups reads an attribute's providers: a list of providers (one
// group) or a list of lists of them (any one group).
func providerGroups(fn string, v starlark.Value) ([][]*Provider, error) {
	l, ok := v.(*starlark.List)
	if !ok || l.Len() == 0 {
		return nil, nil
	}
	group := func(v starlark.Value) ([]*Provider, error) {
		var out []*Provider
		items := []starlark.Value{v}
		if inner, ok := v.(*starlark.List); ok {
			items = nil
			for i := 0; i < inner.Len(); i++ {
				items = append(items, inner.Index(i))
			}
		}
		for _, x := range items {
			p, ok := x.(*Provider)
			if !ok {
				return nil, fmt.Errorf("%s: providers must be providers or lists of them, got %s", fn, x.Type())
			}
			out = append(out, p)
		}
		return out, nil
	}
	if _, nested := l.Index(0).(*starlark.List); !nested {
		g, err := group(l)
		return [][]*Provider{g}, err
	}
	var out [][]*Provider
	for i := 0; i < l.Len(); i++ {
		g, err := group(l.Index(i))
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// missingProviders returns, when c has all the providers of none of the
// attribute's groups, the names of the first group's; nil when it may be
// used. A file has none: allow_files decides whether it may be used.
func (a *Attr) missingProviders(c *Configured) []string {
	if len(a.providers) == 0 || c.Def == nil {
		return nil
	}
	var first []string
	for i, g := range a.providers {
		var missing []string
		for _, p := range g {
			if _, ok := c.Providers[p]; !ok && p != defaultInfo {
				missing = append(missing, p.name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if i == 0 {
			first = missing
		}
	}
	return first
}

// zero returns the value an attribute takes when a target does not set it.
func (a *Attr) zero() starlark.Value {
	if a.def != nil {
		return a.def
	}
	switch a.kind {
	case attrString:
		return starlark.String("")
	case attrInt:
		return starlark.MakeInt(0)
	case attrBool:
		return starlark.False
	case attrLabelList, attrStringList, attrOutputList, attrIntList:
		return starlark.NewList(nil)
	case attrStringDict, attrStringListDict, attrLabelKeyedStringDict, attrStringKeyedLabelDict:
		return starlark.NewDict(0)
	}
	return starlark.None
}

// check validates a value given for the attribute; for a select(), every
// value it may take.
func (a *Attr) check(name string, v starlark.Value) error {
	if s, ok := v.(*Selector); ok {
		if a.fixed {
			return fmt.Errorf("attribute %s is not configurable: it cannot be a select()", name)
		}
		for _, p := range s.parts {
			values := []starlark.Value{p}
			if d, ok := p.(*selectDict); ok {
				values = d.values
			}
			for _, v := range values {
				if err := a.check(name, v); err != nil {
					return err
				}
			}
		}
		return nil
	}
	bad := func(want string) error {
		return fmt.Errorf("attribute %s: want %s, got %s %s", name, want, v.Type(), v)
	}
	switch a.kind {
	case attrString, attrLabel, attrOutput:
		if v == starlark.None && a.kind != attrString {
			return nil
		}
		if _, isLabel := v.(Label); isLabel && a.kind == attrLabel {
			return nil
		}
		s, ok := v.(starlark.String)
		if !ok {
			return bad("a string")
		}
		if len(a.values) > 0 && !contains(a.values, string(s)) {
			return fmt.Errorf("attribute %s: %q is not one of %s%s", name, string(s), strings.Join(a.values, ", "), spell.DidYouMean(string(s), a.values))
		}
	case attrInt:
		if _, ok := v.(starlark.Int); !ok {
			return bad("an int")
		}
	case attrBool:
		if _, ok := v.(starlark.Bool); !ok {
			return bad("a bool")
		}
	case attrLabelList, attrStringList, attrOutputList:
		l, ok := v.(*starlark.List)
		if !ok {
			return bad("a list of strings")
		}
		for i := 0; i < l.Len(); i++ {
			_, isLabel := l.Index(i).(Label)
			if _, ok := l.Index(i).(starlark.String); !ok && !(isLabel && a.kind == attrLabelList) {
				return bad("a list of strings")
			}
		}
	case attrIntList:
		if !listOf[starlark.Int](v) {
			return bad("a list of ints")
		}
	case attrLabelKeyedStringDict, attrStringKeyedLabelDict:
		d, ok := v.(*starlark.Dict)
		if !ok {
			return bad("a dict")
		}
		for _, kv := range d.Items() {
			l, s := kv[0], kv[1]
			if a.kind == attrStringKeyedLabelDict {
				l, s = s, l
			}
			_, isString := s.(starlark.String)
			_, isLabel := l.(Label)
			if _, ok := l.(starlark.String); !isString || !ok && !isLabel {
				return bad("a dict of labels and strings")
			}
		}
	case attrStringDict, attrStringListDict:
		d, ok := v.(*starlark.Dict)
		if !ok {
			return bad("a dict of strings")
		}
		for _, kv := range d.Items() {
			_, key := kv[0].(starlark.String)
			_, value := kv[1].(starlark.String)
			if a.kind == attrStringListDict {
				value = listOf[starlark.String](kv[1])
			}
			switch {
			case !key || !value && a.kind == attrStringDict:
				return bad("a dict of strings")
			case !value:
				return bad("a dict of strings to lists of strings")
			}
		}
	}
	return nil
}

// isLabel reports whether the attribute names targets, which analysis
// analyses first.
func (a *Attr) isLabel() bool {
	switch a.kind {
	case attrLabel, attrLabelList, attrLabelKeyedStringDict, attrStringKeyedLabelDict:
		return true
	}
	return false
}

// labels returns the labels v, a value of the attribute, names: every
// one a select() may give.
func (a *Attr) labels(v starlark.Value) []string {
	if a.kind != attrLabelKeyedStringDict && a.kind != attrStringKeyedLabelDict {
		return labelStrings(v)
	}
	var out []string
	switch x := v.(type) {
	case *Selector:
		for _, p := range x.parts {
			values := []starlark.Value{p}
			if d, ok := p.(*selectDict); ok {
				values = d.values
			}
			for _, v := range values {
				out = append(out, a.labels(v)...)
			}
		}
	case *starlark.Dict:
		for _, kv := range x.Items() {
			if a.kind == attrLabelKeyedStringDict {
				out = append(out, labelStrings(kv[0])...)
			} else {
				out = append(out, labelStrings(kv[1])...)
			}
		}
	}
	return out
}

// listOf reports whether v is a list of T.
func listOf[T starlark.Value](v starlark.Value) bool {
	l, ok := v.(*starlark.List)
	if !ok {
		return false
	}
	for i := 0; i < l.Len(); i++ {
		if _, ok := l.Index(i).(T); !ok {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]*Attr) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
