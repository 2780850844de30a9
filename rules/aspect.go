package rules

// Aspects, as Bazel has them: aspect(implementation, attr_aspects, attrs)
// makes an aspect that a label attribute carries (attr.label_list(aspects =
// [...])). Each target that attribute names is visited by it, and, first,
// each target that the visited target's attributes named in attr_aspects
// name ("*": all of them), down the graph. The implementation gets the
// visited target and a ctx whose rule field shows that target's attributes
// (ctx.rule.attr, with the aspect's providers on the targets it propagated
// to) and kind; its own attributes (private ones with defaults, such as a
// tool) are ctx.attr. The providers it returns join the target's, as the
// attribute carrying the aspect sees it. Its actions are the visited
// target's package's.

import (
	"fmt"
	"slices"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"github.com/rbs-build/rbs/starlark/loader"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// AspectClass is what aspect() returns.
type AspectClass struct {
	name        string // the global it was exported as
	impl        starlark.Callable
	attrAspects []string
	attrs       map[string]*Attr
	required    []*Provider // the providers a target needs to be visited
	toolchains  []toolchainReq
}

var _ starlark.Value = (*AspectClass)(nil)

func (a *AspectClass) Name() string {
	if a.name == "" {
		return "unnamed_aspect"
	}
	return a.name
}
func (a *AspectClass) String() string        { return "<aspect " + a.Name() + ">" }
func (a *AspectClass) Type() string          { return "Aspect" }
func (a *AspectClass) Freeze()               {}
func (a *AspectClass) Truth() starlark.Bool  { return true }
func (a *AspectClass) Hash() (uint32, error) { return starlark.String(a.Name()).Hash() }

func aspectBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var impl starlark.Callable
	var attrAspects *starlark.List
	var attrs *starlark.Dict
	var doc string
	var required, provides, fragments, toolchains, requiredAspects, applyTo starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "implementation", &impl, "attr_aspects?", &attrAspects, "attrs?", &attrs,
		"required_providers?", &required, "required_aspect_providers?", &requiredAspects, "provides?", &provides,
		"fragments?", &fragments, "toolchains?", &toolchains, "apply_to_generating_rules?", &applyTo, "doc?", &doc); err != nil {
		return nil, err
	}
	reqs, err := toolchainReqs(thread, b.Name(), toolchains)
	if err != nil {
		return nil, err
	}
	a := &AspectClass{impl: impl, attrs: map[string]*Attr{}, toolchains: reqs}
	if attrAspects != nil {
		names, err := stringList(attrAspects)
		if err != nil {
			return nil, fmt.Errorf("aspect: attr_aspects: %v", err)
		}
		a.attrAspects = names
	}
	if attrs != nil {
		for _, kv := range attrs.Items() {
			name, ok := starlark.AsString(kv[0])
			attr, isAttr := kv[1].(*Attr)
			if !ok || !isAttr {
				return nil, fmt.Errorf("aspect: attrs must map names to attr.* values, got %s: %s", kv[0], kv[1].Type())
			}
			a.attrs[name] = attr
		}
	}
	if l, ok := required.(*starlark.List); ok {
		for i := 0; i < l.Len(); i++ {
			if p, ok := l.Index(i).(*Provider); ok {
				a.required = append(a.required, p)
			}
		}
	}
	return a, nil
}

// aspectResult is what an aspect gave one target.
type aspectResult struct {
	providers map[*Provider]*ProviderInstance
}

// aspectsOn applies aspects to dep, named l, and returns the providers they
// give it; nil when there are none.
func (an *analyzer) aspectsOn(aspects []*AspectClass, l label.Label, dep *Configured) (map[*Provider]*ProviderInstance, error) {
	if len(aspects) == 0 {
		return nil, nil
	}
	out := map[*Provider]*ProviderInstance{}
	for _, a := range aspects {
		r, err := an.apply(a, l, dep)
		if err != nil {
			return nil, err
		}
		for p, v := range r.providers {
			if _, dup := out[p]; dup || dep.Providers[p] != nil {
				return nil, fmt.Errorf("%s: aspect %s gives provider %s, which the target has already", l, a.Name(), p.name)
			}
			out[p] = v
		}
	}
	return out, nil
}

// apply visits dep, named l, with aspect a, after the targets it
// propagates to; once per aspect and target.
func (an *analyzer) apply(a *AspectClass, l label.Label, dep *Configured) (*aspectResult, error) {
	key := fmt.Sprintf("%p %s", a, an.ws.targetKey(l))
	if r, ok := an.aspects[key]; ok {
		if r == nil {
			return nil, fmt.Errorf("aspect %s: a cycle through %s", a.Name(), l)
		}
		return r, nil
	}
	empty := &aspectResult{}
	def := dep.Def
	if def == nil {
		an.aspects[key] = empty // files are not visited
		return empty, nil
	}
	for _, p := range a.required {
		if dep.Providers[p] == nil {
			an.aspects[key] = empty
			return empty, nil
		}
	}
	an.aspects[key] = nil // in progress
	pkg, err := an.ws.Package(def.Label.Pkg)
	if err != nil {
		return nil, err
	}
	// The visited target's attributes, as ctx.rule.attr shows them: its
	// label attributes as its implementation saw them, with this aspect's
	// providers on the targets of those it propagates along.
	view := an.newContext(pkg, def)
	viewAttrs := map[string]*Attr{}
	ruleAttrs := starlark.StringDict{"name": starlark.String(def.Label.Name)}
	for _, name := range sortedKeys(def.Rule.attrs) {
		v, err := an.ws.configured(def.Label, def.Attrs[name])
		if err != nil {
			return nil, err
		}
		at := def.Rule.attrs[name]
		if !at.isLabel() {
			ruleAttrs[name] = v
			continue
		}
		va := *at
		va.aspects = nil
		if slices.Contains(a.attrAspects, name) || slices.Contains(a.attrAspects, "*") {
			va.aspects = []*AspectClass{a}
		}
		viewAttrs[name], view.values[name] = &va, v
	}
	if err := an.fillAttrs(view, viewAttrs, ruleAttrs); err != nil {
		return nil, err
	}
	ctx := an.newContext(pkg, def)
	ctx.aspect = starlarkstruct.FromStringDict(starlark.String("rule"), starlark.StringDict{
		"attr":  newStruct(starlark.String("attr"), ruleAttrs),
		"files": starlarkstruct.FromStringDict(starlark.String("files"), view.files),
		"kind":  starlark.String(def.Rule.Name()),
	})
	for name, at := range a.attrs {
		ctx.values[name] = at.zero()
	}
	own := starlark.StringDict{}
	if err := an.fillAttrs(ctx, a.attrs, own); err != nil {
		return nil, fmt.Errorf("aspect %s on %s: %w", a.Name(), def.Label, err)
	}
	ctx.attr = newStruct(starlark.String("attr"), own)
	if ctx.toolchains, err = an.resolveToolchains(def.Label, "aspect "+a.Name()+" on "+def.Rule.Name(), a.toolchains); err != nil {
		return nil, err
	}
	thread := &starlark.Thread{Name: "aspect " + a.Name() + " on " + def.Label.String(), Print: an.ws.debug}
	defer guard.Track(thread)()
	thread.SetLocal(analyzerKey, an)
	ret, err := starlark.Call(thread, a.impl, starlark.Tuple{&Target{configured: dep}, ctx}, nil)
	if err != nil {
		return nil, fmt.Errorf("aspect %s on %s failed: %w", a.Name(), def.Label, loader.Describe(err))
	}
	ctx.frozen = true
	if l, ok := ret.(*starlark.List); ok {
		for i := 0; i < l.Len(); i++ {
			if p, ok := l.Index(i).(*ProviderInstance); ok && p.p == defaultInfo {
				return nil, fmt.Errorf("aspect %s on %s returned DefaultInfo, which only rules give", a.Name(), def.Label)
			}
		}
	}
	c, err := an.finish(ctx, ret)
	if err != nil {
		return nil, err
	}
	r := &aspectResult{providers: c.Providers}
	an.aspects[key] = r
	return r, nil
}
