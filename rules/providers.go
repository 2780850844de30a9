package rules

import (
	"fmt"
	"sort"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Provider is a provider type: provider() in Starlark, or DefaultInfo.
// Calling it makes an instance.
type Provider struct {
	name   string
	fields []string // nil: any field
	// positional names the fields positional arguments set, for the
	// providers Bazel makes so (TemplateVariableInfo({...})).
	positional []string
}

var (
	_ starlark.Callable = (*Provider)(nil)
	_ starlark.HasAttrs = (*ProviderInstance)(nil)
)

func (p *Provider) String() string        { return "<provider " + p.name + ">" }
func (p *Provider) Type() string          { return "provider" }
func (p *Provider) Freeze()               {}
func (p *Provider) Truth() starlark.Bool  { return true }
func (p *Provider) Hash() (uint32, error) { return starlark.String(p.name).Hash() }
func (p *Provider) Name() string          { return p.name }

// CallInternal makes an instance from keyword arguments.
func (p *Provider) CallInternal(_ *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > len(p.positional) {
		return nil, fmt.Errorf("%s: only keyword arguments are allowed", p.name)
	}
	fields := starlark.StringDict{}
	for i, v := range args {
		fields[p.positional[i]] = v
	}
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		if p.fields != nil && !contains(p.fields, name) {
			return nil, fmt.Errorf("%s: unexpected field %q (fields: %s)", p.name, name, strings.Join(p.fields, ", "))
		}
		fields[name] = kv[1]
	}
	return &ProviderInstance{p: p, fields: fields}, nil
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// ProviderInstance is what a rule's implementation returns.
type ProviderInstance struct {
	p      *Provider
	fields starlark.StringDict
}

func (i *ProviderInstance) String() string {
	return starlarkstruct.FromStringDict(starlark.String(i.p.name), i.fields).String()
}
func (i *ProviderInstance) Type() string         { return i.p.name }
func (i *ProviderInstance) Freeze()              { i.fields.Freeze() }
func (i *ProviderInstance) Truth() starlark.Bool { return true }
func (i *ProviderInstance) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: %s", i.p.name)
}
func (i *ProviderInstance) AttrNames() []string {
	names := make([]string, 0, len(i.fields))
	for k := range i.fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (i *ProviderInstance) Attr(name string) (starlark.Value, error) {
	if v, ok := i.fields[name]; ok {
		return v, nil
	}
	if i.p.fields != nil && contains(i.p.fields, name) {
		return starlark.None, nil
	}
	return nil, nil
}

// platformCommon is the platform_common module: the providers of
// toolchains, make variables and platforms. rbs's constraint_setting,
// constraint_value, platform and toolchain_type rules give the last four
// (a platform's constraints as a list of ConstraintValueInfo).
var platformCommon = &starlarkstruct.Module{Name: "platform_common", Members: starlark.StringDict{
	"ToolchainInfo":         &Provider{name: "ToolchainInfo"},
	"TemplateVariableInfo":  &Provider{name: "TemplateVariableInfo", fields: []string{"variables"}, positional: []string{"variables"}},
	"ConstraintSettingInfo": &Provider{name: "ConstraintSettingInfo", fields: []string{"label", "default_constraint_value", "has_default_constraint_value"}},
	"ConstraintValueInfo":   &Provider{name: "ConstraintValueInfo", fields: []string{"label", "constraint"}},
	"PlatformInfo":          &Provider{name: "PlatformInfo", fields: []string{"label", "constraints"}},
	"ToolchainTypeInfo":     &Provider{name: "ToolchainTypeInfo", fields: []string{"type_label"}},
}}

// defaultInfo is DefaultInfo.
var defaultInfo = &Provider{name: "DefaultInfo", fields: []string{"files", "runfiles", "executable", "default_runfiles", "data_runfiles"}}

func providerBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var doc string
	var fields starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "doc?", &doc, "fields?", &fields); err != nil {
		return nil, err
	}
	p := &Provider{name: "provider"}
	switch f := fields.(type) {
	case starlark.NoneType:
	case *starlark.List:
		for i := 0; i < f.Len(); i++ {
			s, ok := starlark.AsString(f.Index(i))
			if !ok {
				return nil, fmt.Errorf("provider: fields must be strings")
			}
			p.fields = append(p.fields, s)
		}
	case *starlark.Dict:
		for _, k := range f.Keys() {
			s, ok := starlark.AsString(k)
			if !ok {
				return nil, fmt.Errorf("provider: fields must be strings")
			}
			p.fields = append(p.fields, s)
		}
	default:
		return nil, fmt.Errorf("provider: fields must be a list or dict, got %s", fields.Type())
	}
	return p, nil
}

// Target is an analysed dependency as rules see it (ctx.attr.deps[0]):
// dep[DefaultInfo], MyInfo in dep, dep.label, dep.actions.
type Target struct {
	configured *Configured
	// extra are the providers that aspects the attribute carries gave it.
	extra map[*Provider]*ProviderInstance
}

var (
	_ starlark.Mapping  = (*Target)(nil)
	_ starlark.HasAttrs = (*Target)(nil)
)

func (t *Target) String() string {
	return "<target " + Label{t.configured.Label}.shown().String() + ">"
}
func (t *Target) Type() string          { return "Target" }
func (t *Target) Freeze()               {}
func (t *Target) Truth() starlark.Bool  { return true }
func (t *Target) Hash() (uint32, error) { return starlark.String(t.configured.Label.String()).Hash() }

// Get implements dep[Provider].
func (t *Target) Get(k starlark.Value) (starlark.Value, bool, error) {
	p, ok := k.(*Provider)
	if !ok {
		return nil, false, fmt.Errorf("a target is indexed by a provider, not %s", k.Type())
	}
	if p == defaultInfo {
		return t.configured.defaultInfo(), true, nil
	}
	v, found := t.configured.Providers[p]
	if !found {
		v, found = t.extra[p]
	}
	if !found {
		return nil, false, nil
	}
	return v, true, nil
}

func (t *Target) AttrNames() []string { return []string{"actions", "files", "label"} }

func (t *Target) Attr(name string) (starlark.Value, error) {
	switch name {
	case "actions":
		// The actions the target registered, as Bazel gives analysis tests.
		return actionList(t.configured), nil
	case "label":
		return Label{t.configured.Label}, nil
	case "files":
		return newDepset(t.configured.Files), nil
	}
	return nil, nil
}
