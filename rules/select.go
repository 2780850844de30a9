package rules

// Configurable attributes, as Bazel has them: select() gives a value that
// depends on the configuration (the target platform, --define, build
// settings set with --//pkg:flag=value), concatenated with plain values by
// + or |, and resolved when the target is analysed. Its keys are
// config_setting targets (or aliases of them), the platform's constraints
// (@platforms//os:linux, @platforms//cpu:arm64) and //conditions:default.
// Of the keys that match, the most specialised wins: one whose conditions
// include every other match's.

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Config is what select() and build settings are resolved against.
type Config struct {
	// Platform is the target platform; the zero value is this machine's.
	Platform platform.Platform
	// Defines are the --define NAME=VALUE pairs; they are make variables
	// (ctx.var) too.
	Defines map[string]string
	// Settings are the build settings given on the command line
	// (--//pkg:flag=value), by the setting's label, as typed.
	Settings map[string]string
	// CompilationMode is fastbuild (the default), dbg or opt.
	CompilationMode string
	// Debug receives what print() prints in BUILD and .bzl files, and
	// in rule implementations; nil is standard error.
	Debug io.Writer
	// ExtraToolchains are the --extra_toolchains patterns, registered
	// before the workspace's toolchains.
	ExtraToolchains []string
	// Copts and Features are --copt (ctx.fragments.cpp.copts, given to
	// every C and C++ compilation) and --features (ctx.features of every
	// target).
	Copts, Features []string
	// RepoDir is the repository cache: where repositories that rules
	// make are kept.
	RepoDir string
	// Registries are the --registry URLs bazel_deps are looked up in.
	Registries []string
	// Platforms is --platforms: the label of the platform() target whose
	// constraint values are the target platform's (targetplatform.go); ""
	// for Platform's.
	Platforms string
	// CPU is the name a transition gave //command_line_option:cpu
	// ("armeabi-v7a"), which ctx.var's TARGET_CPU and config_setting's
	// cpu see; "" for Bazel's name of Platform's (cpuValue).
	CPU string
}

// ParseDefine reads a --define value, NAME=VALUE.
func ParseDefine(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("--define %q: want NAME=VALUE", s)
	}
	return k, v, nil
}

// CompilationModes are the values of --compilation_mode.
var CompilationModes = []string{"fastbuild", "dbg", "opt"}

const defaultCondition = "//conditions:default"

// Selector is a configurable value: plain values and select() dicts, to be
// concatenated in order once each select is resolved.
type Selector struct {
	parts []starlark.Value // plain values and *selectDict
}

// selectDict is one select() call.
type selectDict struct {
	pkg      string // the package it was called in, for relative keys
	keys     []string
	values   []starlark.Value
	noMatch  string
	frozen   bool
	position string
}

var (
	_ starlark.HasBinary = (*Selector)(nil)
	_ starlark.Value     = (*selectDict)(nil)
)

func (s *Selector) String() string {
	parts := make([]string, len(s.parts))
	for i, p := range s.parts {
		parts[i] = p.String()
	}
	return strings.Join(parts, " + ")
}
func (s *Selector) Type() string { return "select" }
func (s *Selector) Freeze() {
	for _, p := range s.parts {
		p.Freeze()
	}
}
func (s *Selector) Truth() starlark.Bool  { return true }
func (s *Selector) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: select") }

// Binary concatenates a select with a plain value or another select.
func (s *Selector) Binary(op syntax.Token, y starlark.Value, side starlark.Side) (starlark.Value, error) {
	if op != syntax.PLUS && op != syntax.PIPE {
		return nil, nil
	}
	var other []starlark.Value
	if o, ok := y.(*Selector); ok {
		other = o.parts
	} else {
		other = []starlark.Value{y}
	}
	if side == starlark.Left {
		return &Selector{parts: append(slices.Clone(s.parts), other...)}, nil
	}
	return &Selector{parts: append(slices.Clone(other), s.parts...)}, nil
}

func (d *selectDict) String() string {
	var b strings.Builder
	b.WriteString("select({")
	for i, k := range d.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %s", k, d.values[i])
	}
	b.WriteString("})")
	return b.String()
}
func (d *selectDict) Type() string { return "select" }
func (d *selectDict) Freeze() {
	if !d.frozen {
		d.frozen = true
		for _, v := range d.values {
			v.Freeze()
		}
	}
}
func (d *selectDict) Truth() starlark.Bool  { return true }
func (d *selectDict) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: select") }

// selectBuiltin is select(): it records the branches, to be chosen when a
// target using it is analysed.
func (w *Workspace) selectBuiltin(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dict *starlark.Dict
	var msg string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "x", &dict, "no_match_error?", &msg); err != nil {
		return nil, err
	}
	if dict.Len() == 0 {
		return nil, fmt.Errorf("select: no branches")
	}
	d := &selectDict{noMatch: msg}
	if pkg, ok := t.Local(packageKey).(*Package); ok {
		d.pkg = pkg.Name
	}
	if fr := t.CallFrame(1); fr.Pos.IsValid() {
		d.position = fr.Pos.String()
	}
	for _, kv := range dict.Items() {
		k, ok := starlark.AsString(kv[0])
		if !ok {
			return nil, fmt.Errorf("select: keys must be labels, got %s", kv[0].Type())
		}
		d.keys = append(d.keys, k)
		d.values = append(d.values, kv[1])
	}
	return &Selector{parts: []starlark.Value{d}}, nil
}

// configured resolves the select()s in v, if any, for target t.
func (w *Workspace) configured(t label.Label, v starlark.Value) (starlark.Value, error) {
	out, _, err := w.resolve(t, v, nil)
	return out, err
}

// resolve resolves the select()s in v for target t, with the conditions of
// the keys that chose their branches; via lists the aliases being
// followed, as select() keys, to get here.
func (w *Workspace) resolve(t label.Label, v starlark.Value, via []string) (starlark.Value, condition, error) {
	s, ok := v.(*Selector)
	if !ok {
		return v, nil, nil
	}
	var out starlark.Value
	conds := condition{}
	for _, p := range s.parts {
		if d, ok := p.(*selectDict); ok {
			var err error
			var cond condition
			if p, cond, err = w.choose(t, d, via); err != nil {
				return nil, nil, err
			}
			for c := range cond {
				conds[c] = true
			}
		}
		if out == nil {
			out = p
			continue
		}
		op := syntax.PLUS
		if _, isDict := out.(*starlark.Dict); isDict {
			op = syntax.PIPE
		}
		joined, err := starlark.Binary(op, out, p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: joining the values of select(): %v", t, err)
		}
		out = joined
	}
	return out, conds, nil
}

// condition is one config_setting's conditions, each "kind:name=value",
// for telling which of several matching keys is the most specialised.
type condition map[string]bool

// choose picks the branch of d that the configuration selects, with the
// conditions of the key that chose it (none for //conditions:default).
// via lists the aliases being followed to get here, as select() keys.
func (w *Workspace) choose(t label.Label, d *selectDict, via []string) (starlark.Value, condition, error) {
	type match struct {
		key  string
		cond condition
		v    starlark.Value
	}
	var matches []match
	def := -1
	for i, k := range d.keys {
		if k == defaultCondition {
			def = i
			continue
		}
		ok, cond, err := w.matches(k, d.pkg, via)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: select() at %s: %v", t, d.position, err)
		}
		if ok {
			matches = append(matches, match{k, cond, d.values[i]})
		}
	}
	switch len(matches) {
	case 0:
		if def >= 0 {
			return d.values[def], nil, nil
		}
		if d.noMatch != "" {
			return nil, nil, fmt.Errorf("%s: select() at %s: %s", t, d.position, d.noMatch)
		}
		return nil, nil, fmt.Errorf("%s: select() at %s: no branch matches (%s; target platform %s); give a %s branch",
			t, d.position, strings.Join(d.keys, ", "), w.Platform, defaultCondition)
	case 1:
		return matches[0].v, matches[0].cond, nil
	}
	// The most specialised match wins: one whose conditions include every
	// other match's, and more.
	for _, m := range matches {
		wins := true
		for _, o := range matches {
			if o.key != m.key && !(len(m.cond) > len(o.cond) && includes(m.cond, o.cond)) {
				wins = false
			}
		}
		if wins {
			return m.v, m.cond, nil
		}
	}
	keys := make([]string, len(matches))
	for i, m := range matches {
		keys[i] = m.key
	}
	return nil, nil, fmt.Errorf("%s: select() at %s: %s all match and none is more specialised than the others; keep one", t, d.position, strings.Join(keys, " and "))
}

func includes(a, b condition) bool {
	for c := range b {
		if !a[c] {
			return false
		}
	}
	return true
}

// matches says whether a select() key holds in the configuration, with its
// conditions: a config_setting, a constraint, or an alias of one (via
// lists the aliases followed to get here).
func (w *Workspace) matches(key, pkg string, via []string) (bool, condition, error) {
	if w.platformMatches(key) {
		return true, condition{"constraint:" + key: true}, nil
	}
	if isConstraint(key) {
		return false, nil, nil
	}
	l, err := label.ParseRelative(key, pkg)
	if err != nil {
		return false, nil, fmt.Errorf("key %q: %v", key, err)
	}
	l = canonical(l)
	p, err := w.Package(l.Pkg)
	if err != nil {
		return false, nil, fmt.Errorf("key %s: %v", l, err)
	}
	t, ok := p.Targets[l.Name]
	if ok && isAlias(t.Rule) {
		return w.aliasMatches(t, via)
	}
	if ok && t.Rule.Name() == "constraint_value" {
		has, _, err := w.hasConstraint(l)
		if err != nil {
			return false, nil, fmt.Errorf("key %s: %v", l, err)
		}
		return has, condition{"constraint:" + l.String(): true}, nil
	}
	if !ok || t.Rule != configSettingRule {
		return false, nil, fmt.Errorf("key %s is not a config_setting", l)
	}
	return w.settingMatches(t)
}

// isConstraint reports whether a key names a constraint value of the
// platforms repository.
func isConstraint(key string) bool {
	return strings.HasPrefix(key, "@platforms//os:") || strings.HasPrefix(key, "@platforms//cpu:")
}

// platformMatches reports whether a key is a constraint of the target
// platform: @platforms//os:OS or @platforms//cpu:ARCH, with Bazel's names
// (x86_64, aarch64, arm64, ...).
func (w *Workspace) platformMatches(key string) bool { return platformHas(w.Platform, key) }

// platformHas reports whether platform p has constraint value key, one of
// @platforms//os:* or @platforms//cpu:*.
func platformHas(p platform.Platform, key string) bool {
	if os, ok := strings.CutPrefix(key, "@platforms//os:"); ok {
		return os == p.OS || (os == "osx" || os == "macos") && (p.OS == "darwin" || p.OS == "osx" || p.OS == "macos")
	}
	if cpu, ok := strings.CutPrefix(key, "@platforms//cpu:"); ok {
		q, err := platform.Parse("linux-" + cpu)
		return err == nil && q.Arch == p.Arch
	}
	return false
}

// configSettingRule is config_setting: a target that select() keys name,
// matching when all its conditions hold.
var configSettingRule = &RuleClass{
	name: "config_setting",
	impl: starlark.NewBuiltin("config_setting", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	}),
	attrs: map[string]*Attr{
		"values":            {kind: attrStringDict},
		"define_values":     {kind: attrStringDict},
		"flag_values":       {kind: attrStringDict},
		"constraint_values": {kind: attrStringList},
	},
	doc: "Matches a configuration, for select().",
}

// cpu is the configuration's --cpu: the name a transition gave it, else
// Bazel's for its platform.
func (w *Workspace) cpu() string {
	if w.cfg.CPU != "" {
		return w.cfg.CPU
	}
	return cpuValue(w.Platform)
}

// cpuValue is the "cpu" of config_setting's values for a platform, as
// Bazel names it.
func cpuValue(p platform.Platform) string {
	switch {
	case p.OS == "darwin":
		return "darwin_" + p.Arch
	case p.Arch == "x86_64":
		return "k8"
	case p.Arch == "arm64":
		return "aarch64"
	}
	return p.Arch
}

// settingMatches says whether config_setting t holds, with its conditions.
func (w *Workspace) settingMatches(t *TargetDef) (bool, condition, error) {
	cond := condition{}
	ok := true
	values := stringDict(t.Attrs["values"])
	for _, k := range sortedStrings(values) {
		v := values[k]
		cond["values:"+k+"="+v] = true
		switch k {
		case "define":
			name, want, err := ParseDefine(v)
			if err != nil {
				return false, nil, fmt.Errorf("config_setting %s: values: %v", t.Label, err)
			}
			got, set := w.cfg.Defines[name]
			ok = ok && set && got == want
		case "compilation_mode":
			ok = ok && w.compilationMode() == v
		case "cpu":
			ok = ok && w.cpu() == v
		default:
			return false, nil, fmt.Errorf("config_setting %s: values key %q is not one rbs knows (it knows compilation_mode, cpu and define)", t.Label, k)
		}
	}
	defines := stringDict(t.Attrs["define_values"])
	for _, k := range sortedStrings(defines) {
		cond["define:"+k+"="+defines[k]] = true
		got, set := w.cfg.Defines[k]
		ok = ok && set && got == defines[k]
	}
	cons, _ := stringList(t.Attrs["constraint_values"])
	for _, c := range cons {
		if isConstraint(c) {
			cond["constraint:"+c] = true
			ok = ok && w.platformMatches(c)
			continue
		}
		cl, err := label.ParseRelative(c, t.Label.Pkg)
		if err != nil {
			return false, nil, fmt.Errorf("config_setting %s: constraint_values: %v", t.Label, err)
		}
		has, isValue, err := w.hasConstraint(cl)
		if err != nil {
			return false, nil, fmt.Errorf("config_setting %s: constraint_values: %v", t.Label, err)
		}
		if !isValue {
			return false, nil, fmt.Errorf("config_setting %s: constraint_values: %s is not a constraint_value", t.Label, cl)
		}
		cond["constraint:"+canonical(cl).String()] = true
		ok = ok && has
	}
	flags := stringDict(t.Attrs["flag_values"])
	for _, k := range sortedStrings(flags) {
		l, err := label.ParseRelative(k, t.Label.Pkg)
		if err != nil {
			return false, nil, fmt.Errorf("config_setting %s: flag_values: %v", t.Label, err)
		}
		got, kind, err := w.settingValue(l)
		if err != nil {
			return false, nil, fmt.Errorf("config_setting %s: flag_values: %v", t.Label, err)
		}
		cond["flag:"+l.String()+"="+flags[k]] = true
		ok = ok && sameSetting(kind, got, flags[k])
	}
	if len(cond) == 0 {
		return false, nil, fmt.Errorf("config_setting %s sets no condition: give values, define_values, flag_values or constraint_values", t.Label)
	}
	return ok, cond, nil
}

func (w *Workspace) compilationMode() string {
	if w.cfg.CompilationMode == "" {
		return "fastbuild"
	}
	return w.cfg.CompilationMode
}

// settingValue is the value of the build setting l: as set on the command
// line, else its build_setting_default, as text, with its kind.
func (w *Workspace) settingValue(l label.Label) (string, settingKind, error) {
	l = canonical(l)
	p, err := w.Package(l.Pkg)
	if err != nil {
		return "", 0, err
	}
	t, ok := p.Targets[l.Name]
	if !ok || t.Rule.setting == nil {
		return "", 0, fmt.Errorf("%s is not a build setting (a rule with build_setting = config.*(...))", l)
	}
	if v, set := w.cfg.Settings[l.String()]; set {
		return v, t.Rule.setting.kind, nil
	}
	return settingText(t.Attrs[settingDefault]), t.Rule.setting.kind, nil
}

// settingText is a build setting's value as text.
func settingText(v starlark.Value) string {
	switch x := v.(type) {
	case starlark.String:
		return string(x)
	case starlark.Bool:
		return strconv.FormatBool(bool(x))
	case *starlark.List:
		l, _ := stringList(x)
		return strings.Join(l, ",")
	}
	return v.String()
}

// sameSetting compares a build setting's value with one a config_setting
// wants, bools by their truth ("True", "true" and "1" are all true).
func sameSetting(kind settingKind, got, want string) bool {
	if kind == settingBool {
		g, err1 := parseBool(got)
		w, err2 := parseBool(want)
		return err1 == nil && err2 == nil && g == w
	}
	return got == want
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("%q is not a bool", s)
}

func stringDict(v starlark.Value) map[string]string {
	out := map[string]string{}
	if d, ok := v.(*starlark.Dict); ok {
		for _, kv := range d.Items() {
			k, _ := starlark.AsString(kv[0])
			s, _ := starlark.AsString(kv[1])
			out[k] = s
		}
	}
	return out
}

func sortedStrings(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
