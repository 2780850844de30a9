package rules

// Toolchains, as Bazel resolves them. A rule (or an aspect) names the
// toolchain types it needs (toolchains = [...]); toolchain() targets,
// registered by --extra_toolchains, MODULE.bazel and WORKSPACE (in that
// order) and then by rbs's defaults (the shell's and C++'s, in
// @bazel_tools), each offer one implementation of a type for execution
// platforms and target platforms matching their constraints. For each
// execution platform in turn (those registered, then this machine's), the
// first registered toolchain of each type that fits is chosen; the first
// execution platform for which every mandatory type is satisfied wins.
// ctx.toolchains[TYPE] is then the chosen implementation's ToolchainInfo,
// or None for an optional type none satisfied.

import (
	"fmt"
	"os/exec"
	"strings"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// toolchainRule is toolchain(): it declares, and does not build, the
// implementation of a toolchain type. Its labels are read, not analysed,
// since only the toolchain resolution chooses is built.
var toolchainRule = &RuleClass{
	name: "toolchain",
	impl: starlark.NewBuiltin("toolchain", ignoredCall),
	attrs: map[string]*Attr{
		"toolchain":              {kind: attrString, mandatory: true},
		"toolchain_type":         {kind: attrString, mandatory: true},
		"exec_compatible_with":   {kind: attrStringList},
		"target_compatible_with": {kind: attrStringList},
		"target_settings":        {kind: attrStringList},
	},
	doc: "Offers a toolchain implementation for a toolchain type, on the platforms its constraints allow.",
}

// defaultToolchains are registered after the workspace's.
var defaultToolchains = []string{"@bazel_tools//tools/sh:all", "@bazel_tools//tools/cpp:all", "@bazel_skylib//toolchains/unittest:all"}

// toolchainReq is one toolchain type a rule asks for.
type toolchainReq struct {
	typ       label.Label // as written, absolute
	mandatory bool
}

// toolchainTypeValue is config_common.toolchain_type(name, mandatory).
type toolchainTypeValue struct{ req toolchainReq }

func (v toolchainTypeValue) String() string {
	return fmt.Sprintf("config_common.toolchain_type(%q, mandatory = %s)", Label{v.req.typ}.shown(), starlark.Bool(v.req.mandatory))
}
func (toolchainTypeValue) Type() string         { return "toolchain_type" }
func (toolchainTypeValue) Freeze()              {}
func (toolchainTypeValue) Truth() starlark.Bool { return true }
func (toolchainTypeValue) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: toolchain_type")
}

// configCommon is the config_common module.
var configCommon = &starlarkstruct.Module{Name: "config_common", Members: starlark.StringDict{
	"toolchain_type": starlark.NewBuiltin("toolchain_type", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name starlark.Value
		mandatory := true
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "mandatory?", &mandatory); err != nil {
			return nil, err
		}
		l, err := typeLabel(t, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
		return toolchainTypeValue{toolchainReq{typ: l, mandatory: mandatory}}, nil
	}),
}}

// typeLabel is a toolchain type given as a Label or as a string, which is
// relative to the package of the file calling.
func typeLabel(t *starlark.Thread, v starlark.Value) (label.Label, error) {
	switch v := v.(type) {
	case Label:
		return v.Label, nil
	case starlark.String:
		repo, pkg := callerPackage(t)
		l, err := parseLabelIn("toolchain type", string(v), repo, pkg)
		return l.Label, err
	}
	return label.Label{}, fmt.Errorf("want a toolchain type's label, got %s", v.Type())
}

// toolchainReqs reads the toolchains argument of rule() or aspect().
func toolchainReqs(t *starlark.Thread, fn string, v starlark.Value) ([]toolchainReq, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	seq, ok := v.(starlark.Iterable)
	if !ok {
		return nil, fmt.Errorf("%s: toolchains: want a list, got %s", fn, v.Type())
	}
	var out []toolchainReq
	it := seq.Iterate()
	defer it.Done()
	var x starlark.Value
	for it.Next(&x) {
		if tv, ok := x.(toolchainTypeValue); ok {
			out = append(out, tv.req)
			continue
		}
		l, err := typeLabel(t, x)
		if err != nil {
			return nil, fmt.Errorf("%s: toolchains: %v", fn, err)
		}
		out = append(out, toolchainReq{typ: l, mandatory: true})
	}
	return out, nil
}

// constraint is a constraint value, with its setting and the setting's
// default value ("" for none), as canonical label strings.
type constraint struct{ value, setting, def string }

// The settings of @platforms, which a platform of rbs (OS-ARCH) sets.
var (
	osSetting  = canonical(label.Label{Repo: "platforms", Pkg: "os", Name: "os"}).String()
	cpuSetting = canonical(label.Label{Repo: "platforms", Pkg: "cpu", Name: "cpu"}).String()
)

// platformDef is a platform as the values it gives constraint settings.
type platformDef struct {
	name   string
	values map[string]string // setting -> value
}

// osArchPlatform is an OS-ARCH platform as constraint values.
func osArchPlatform(name string, p platform.Platform) platformDef {
	return platformDef{name: name, values: map[string]string{
		osSetting:  canonical(label.Label{Repo: "platforms", Pkg: "os", Name: p.OS}).String(),
		cpuSetting: canonical(label.Label{Repo: "platforms", Pkg: "cpu", Name: p.Arch}).String(),
	}}
}

// satisfies reports whether the platform has constraint value c: its own
// value for c's setting, or else the setting's default, is c. Bazel's
// aliases of @platforms (osx and macos, aarch64 and arm64) are the same
// value.
func (p platformDef) satisfies(c constraint) bool {
	v, ok := p.values[c.setting]
	if !ok {
		v = c.def
	}
	if v == c.value {
		return true
	}
	name := func(s string) string { return s[strings.LastIndex(s, ":")+1:] }
	switch c.setting {
	case osSetting:
		return platformHas(platform.Platform{OS: name(v)}, "@platforms//os:"+name(c.value))
	case cpuSetting:
		p, err := platform.Parse("linux-" + name(v))
		return err == nil && platformHas(p, "@platforms//cpu:"+name(c.value))
	}
	return false
}

func (p platformDef) satisfiesAll(cs []constraint) bool {
	for _, c := range cs {
		if !p.satisfies(c) {
			return false
		}
	}
	return true
}

// declaredToolchain is a registered toolchain() target, read.
type declaredToolchain struct {
	label          label.Label
	typ            string // canonical
	impl           label.Label
	exec, target   []constraint
	targetSettings []string // config_setting keys, relative to the package
}

// toolchainSetup is what resolution needs, worked out once per analysis.
type toolchainSetup struct {
	toolchains []*declaredToolchain
	exec       []platformDef
	// resolved are the resolutions made, by configuration and the types
	// asked for.
	resolved map[string]map[string]label.Label
}

// setup reads the registered toolchains and execution platforms.
func (an *analyzer) setup() (*toolchainSetup, error) {
	if an.toolchains != nil {
		return an.toolchains, nil
	}
	reg := an.ws.reg
	s := &toolchainSetup{resolved: map[string]map[string]label.Label{}}
	var regs []registration
	for _, p := range an.ws.cfg.ExtraToolchains {
		regs = append(regs, registration{pattern: p, pos: "--extra_toolchains"})
	}
	regs = append(regs, reg.toolchains...)
	for _, p := range defaultToolchains {
		regs = append(regs, registration{pattern: p, pos: "rbs's defaults"})
	}
	seen := map[string]bool{}
	for _, r := range regs {
		ls, err := an.ws.expandRegistered(r)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			if seen[l.String()] {
				continue
			}
			seen[l.String()] = true
			d, err := an.declaredToolchain(l, r)
			if err != nil {
				return nil, err
			}
			if d != nil {
				s.toolchains = append(s.toolchains, d)
			}
		}
	}
	for _, r := range reg.platforms {
		ls, err := an.ws.expandRegistered(r)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			p, err := an.platformTarget(l)
			if err != nil {
				return nil, fmt.Errorf("%s: execution platform %s: %v", r.pos, l, err)
			}
			s.exec = append(s.exec, p)
		}
	}
	s.exec = append(s.exec, osArchPlatform("this machine, "+platform.Host().String(), platform.Host()))
	an.toolchains = s
	return s, nil
}

// declaredToolchain reads toolchain() target l; nil when l is another
// kind of target that a pattern (r) named.
func (an *analyzer) declaredToolchain(l label.Label, r registration) (*declaredToolchain, error) {
	pkg, err := an.ws.Package(l.Pkg)
	if err != nil {
		return nil, fmt.Errorf("%s: registered toolchain %s: %v", r.pos, r.pattern, err)
	}
	def, ok := pkg.Targets[l.Name]
	if !ok || def.Rule != toolchainRule {
		if strings.HasSuffix(r.pattern, ":all") || strings.HasSuffix(r.pattern, ":*") || strings.HasSuffix(r.pattern, "...") {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: registered toolchain %s is not a toolchain() target", r.pos, l)
	}
	d := &declaredToolchain{label: l}
	str := func(attr string) (string, error) {
		v, _, err := an.ws.resolve(l, def.Attrs[attr], nil)
		if err != nil {
			return "", err
		}
		s, _ := starlark.AsString(v)
		return s, nil
	}
	list := func(attr string) ([]string, error) {
		v, _, err := an.ws.resolve(l, def.Attrs[attr], nil)
		if err != nil || v == nil {
			return nil, err
		}
		return stringList(v)
	}
	bad := func(err error) (*declaredToolchain, error) { return nil, fmt.Errorf("toolchain %s: %v", l, err) }
	typ, err := str("toolchain_type")
	if err != nil {
		return bad(err)
	}
	tl, err := label.ParseRelative(typ, l.Pkg)
	if err != nil {
		return bad(fmt.Errorf("toolchain_type: %v", err))
	}
	if tl, err = an.toolchainType(tl); err != nil {
		return bad(err)
	}
	d.typ = tl.String()
	impl, err := str("toolchain")
	if err != nil {
		return bad(err)
	}
	if d.impl, err = label.ParseRelative(impl, l.Pkg); err != nil {
		return bad(fmt.Errorf("toolchain: %v", err))
	}
	d.impl = canonical(d.impl)
	for _, a := range []struct {
		attr string
		to   *[]constraint
	}{{"exec_compatible_with", &d.exec}, {"target_compatible_with", &d.target}} {
		names, err := list(a.attr)
		if err != nil {
			return bad(fmt.Errorf("%s: %v", a.attr, err))
		}
		for _, n := range names {
			c, err := an.constraintOf(n, l.Pkg)
			if err != nil {
				return bad(fmt.Errorf("%s: %v", a.attr, err))
			}
			*a.to = append(*a.to, c)
		}
	}
	if d.targetSettings, err = list("target_settings"); err != nil {
		return bad(fmt.Errorf("target_settings: %v", err))
	}
	return d, nil
}

// toolchainType is toolchain type l, through the aliases naming it, as a
// canonical label; an error if it is no toolchain_type() target.
func (an *analyzer) toolchainType(l label.Label) (label.Label, error) {
	l = canonical(l)
	for range 32 {
		pkg, err := an.ws.Package(l.Pkg)
		if err != nil {
			return l, fmt.Errorf("toolchain type %s: %v", Label{l}.shown(), err)
		}
		def, ok := pkg.Targets[l.Name]
		switch {
		case !ok:
			return l, fmt.Errorf("toolchain type %s: no such target", Label{l}.shown().String())
		case isAlias(def.Rule):
			actual, _, err := an.ws.aliasActual(def, nil)
			if err != nil {
				return l, err
			}
			next, err := label.ParseRelative(actual, l.Pkg)
			if err != nil {
				return l, fmt.Errorf("alias %s: %v", l, err)
			}
			l = canonical(next)
		case def.Rule.Name() != "toolchain_type":
			return l, fmt.Errorf("%s is a %s, not a toolchain_type", Label{l}.shown(), def.Kind())
		default:
			return l, nil
		}
	}
	return l, fmt.Errorf("toolchain type %s: too many aliases", Label{l}.shown().String())
}

// constraintOf analyses constraint_value s (relative to pkg).
func (an *analyzer) constraintOf(s, pkg string) (constraint, error) {
	l, err := label.ParseRelative(s, pkg)
	if err != nil {
		return constraint{}, err
	}
	c, err := an.analyze(l)
	if err != nil {
		return constraint{}, err
	}
	info := c.Providers[platformCommon.Members["ConstraintValueInfo"].(*Provider)]
	if info == nil {
		return constraint{}, fmt.Errorf("%s is not a constraint_value", Label{canonical(l)}.shown().String())
	}
	return constraintFrom(info), nil
}

// constraintFrom reads a ConstraintValueInfo.
func constraintFrom(info *ProviderInstance) constraint {
	labelOf := func(v starlark.Value) string {
		if l, ok := v.(Label); ok {
			return canonical(l.Label).String()
		}
		return ""
	}
	c := constraint{value: labelOf(info.fields["label"])}
	if setting, ok := info.fields["constraint"].(*ProviderInstance); ok {
		c.setting = labelOf(setting.fields["label"])
		if def, ok := setting.fields["default_constraint_value"].(*ProviderInstance); ok {
			c.def = labelOf(def.fields["label"])
		}
	}
	return c
}

// platformTarget analyses platform() target l.
func (an *analyzer) platformTarget(l label.Label) (platformDef, error) {
	c, err := an.analyze(l)
	if err != nil {
		return platformDef{}, err
	}
	info := c.Providers[platformCommon.Members["PlatformInfo"].(*Provider)]
	if info == nil {
		return platformDef{}, fmt.Errorf("not a platform() target")
	}
	p := platformDef{name: Label{canonical(l)}.shown().String(), values: map[string]string{}}
	list, _ := info.fields["constraints"].(*starlark.List)
	for i := 0; list != nil && i < list.Len(); i++ {
		if cv, ok := list.Index(i).(*ProviderInstance); ok {
			c := constraintFrom(cv)
			p.values[c.setting] = c.value
		}
	}
	return p, nil
}

// resolveToolchains is ctx.toolchains for target owner (a rule of kind
// kind) asking for reqs.
func (an *analyzer) resolveToolchains(owner label.Label, kind string, reqs []toolchainReq) (*toolchainContext, error) {
	tc := &toolchainContext{owner: owner, kind: kind, values: map[string]starlark.Value{}, an: an}
	if len(reqs) == 0 {
		return tc, nil
	}
	s, err := an.setup()
	if err != nil {
		return nil, err
	}
	types := make([]string, len(reqs))
	mandatory := map[string]bool{}
	for i, r := range reqs {
		l, err := an.toolchainType(r.typ)
		if err != nil {
			return nil, fmt.Errorf("while resolving toolchains for target %s: %v", owner, err)
		}
		types[i] = l.String()
		mandatory[types[i]] = mandatory[types[i]] || r.mandatory
		tc.types = append(tc.types, Label{l}.shown().String())
	}
	key := an.ws.outDir + " " + strings.Join(types, " ")
	chosen, ok := s.resolved[key]
	if !ok {
		target, err := an.ws.targetPlatform()
		if err != nil {
			return nil, fmt.Errorf("while resolving toolchains for target %s: %v", owner, err)
		}
		if chosen, err = an.chooseToolchains(s, target, types, mandatory); err != nil {
			return nil, fmt.Errorf("while resolving toolchains for target %s: %v", owner, err)
		}
		s.resolved[key] = chosen
	}
	for _, t := range types {
		impl, ok := chosen[t]
		if !ok {
			tc.values[t] = starlark.None
			continue
		}
		c, err := an.analyze(impl)
		if err != nil {
			return nil, err
		}
		info := c.Providers[platformCommon.Members["ToolchainInfo"].(*Provider)]
		if info == nil {
			return nil, fmt.Errorf("toolchain %s of type %s for %s gives no ToolchainInfo", Label{impl}.shown(), Label{canonicalParse(t)}.shown(), owner)
		}
		tc.values[t] = info
	}
	return tc, nil
}

// canonicalParse is canonical label string s as a label.
func canonicalParse(s string) label.Label {
	l, _ := label.Parse(s)
	return l
}

// chooseToolchains picks, on the first execution platform that satisfies
// every mandatory type, the first fitting toolchain of each type.
func (an *analyzer) chooseToolchains(s *toolchainSetup, target platformDef, types []string, mandatory map[string]bool) (map[string]label.Label, error) {
	for _, e := range s.exec {
		chosen := map[string]label.Label{}
		ok := true
		for _, t := range types {
			if _, done := chosen[t]; done {
				continue
			}
			for _, d := range s.toolchains {
				if d.typ != t || !e.satisfiesAll(d.exec) || !target.satisfiesAll(d.target) {
					continue
				}
				fits, err := an.settingsHold(d)
				if err != nil {
					return nil, err
				}
				if fits {
					chosen[t] = d.impl
					break
				}
			}
			if _, found := chosen[t]; !found && mandatory[t] {
				ok = false
				break
			}
		}
		if ok {
			return chosen, nil
		}
	}
	var missing []string
	for _, t := range types {
		if mandatory[t] {
			missing = append(missing, Label{canonicalParse(t)}.shown().String())
		}
	}
	return nil, fmt.Errorf("no matching toolchains found for types %s (%s; execution platforms: %s)",
		strings.Join(missing, ", "), target.name, execNames(s.exec))
}

func execNames(ps []platformDef) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name
	}
	return strings.Join(names, ", ")
}

// settingsHold reports whether every config_setting of a toolchain's
// target_settings matches.
func (an *analyzer) settingsHold(d *declaredToolchain) (bool, error) {
	for _, k := range d.targetSettings {
		ok, _, err := an.ws.matches(k, d.label.Pkg, nil)
		if err != nil {
			return false, fmt.Errorf("toolchain %s: target_settings: %v", d.label, err)
		}
		if !ok {
			return false, nil
		}
	}
	return true, nil
}

// toolchainContext is ctx.toolchains: the resolved toolchains by type.
type toolchainContext struct {
	owner  label.Label
	kind   string
	types  []string                  // as shown, in the order asked
	values map[string]starlark.Value // by canonical type: ToolchainInfo or None
	an     *analyzer
}

var _ starlark.Mapping = (*toolchainContext)(nil)

func (c *toolchainContext) String() string {
	return "<toolchain_context.resolved_labels: " + strings.Join(c.types, ", ") + ">"
}
func (c *toolchainContext) Type() string         { return "ToolchainContext" }
func (c *toolchainContext) Freeze()              {}
func (c *toolchainContext) Truth() starlark.Bool { return true }
func (c *toolchainContext) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: ToolchainContext")
}

// Get is ctx.toolchains[TYPE]; an error for a type the rule did not ask
// for (and so false for `TYPE in ctx.toolchains`).
func (c *toolchainContext) Get(k starlark.Value) (starlark.Value, bool, error) {
	l, err := labelArg(k)
	if err != nil {
		return nil, false, fmt.Errorf("ctx.toolchains: %v", err)
	}
	t, terr := c.an.toolchainType(l)
	if v, ok := c.values[t.String()]; ok && terr == nil {
		return v, true, nil
	}
	return nil, false, fmt.Errorf("In %s rule %s, toolchain type %s was requested but only types [%s] are configured",
		c.kind, c.owner, Label{canonical(l)}.shown(), strings.Join(c.types, ", "))
}

// shellPath is the shell @bazel_tools//tools/sh's toolchain gives: bash
// on the PATH, as Bazel's autoconfiguration finds it.
func shellPath() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/bash"
}
