package rules

// Configuration transitions, as Bazel has them. transition(implementation,
// inputs, outputs) makes a transition: its implementation reads the
// settings named by inputs (build settings by label, and the native
// options //command_line_option:cpu, compilation_mode, platforms, copt,
// features and define) and the attributes of the target, and returns the
// settings named by outputs: a dict (one configuration), or a dict or list
// of them (a split transition, whose configurations ctx.split_attr gives
// by key). A rule's cfg transitions the target itself; an attribute's cfg
// transitions its dependencies; cfg = "exec" (config.exec()) builds them
// for this machine in opt mode, as Bazel's execution configuration.
//
// A configuration a transition makes is a Workspace sharing the tree of
// the build's: its select()s, ctx.var and toolchains see its settings, and
// its generated files live in rbs-out/NAME/bin, named as Bazel names its
// output directories: CPU-MODE-ST-HASH for a Starlark transition,
// CPU-opt-exec-HASH for the execution configuration. A transition that
// changes nothing leaves the configuration as it was.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// nativeOption is the label prefix of Bazel's options as settings.
const nativeOption = "//command_line_option:"

// nativeOptions are the options a transition may read and write.
var nativeOptions = []string{"compilation_mode", "copt", "cpu", "define", "features", "platforms"}

// Transition is what transition() returns, or the execution
// configuration's.
type Transition struct {
	impl            starlark.Callable
	inputs, outputs []string // setting names: nativeOption+NAME, or canonical labels
	shown           map[string]string
	exec            bool
	// allowFailures is analysis_test_transition's allow_analysis_failures:
	// a target that fails analysis gives AnalysisFailureInfo instead.
	allowFailures bool
}

var _ starlark.Value = (*Transition)(nil)

func (t *Transition) String() string        { return "<transition>" }
func (t *Transition) Type() string          { return "transition" }
func (t *Transition) Freeze()               {}
func (t *Transition) Truth() starlark.Bool  { return true }
func (t *Transition) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: transition") }

// execTransition is cfg = "exec".
var execTransition = &Transition{exec: true}

func transitionBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var impl starlark.Callable
	var inputs, outputs *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "implementation", &impl, "inputs", &inputs, "outputs", &outputs); err != nil {
		return nil, err
	}
	t := &Transition{impl: impl, shown: map[string]string{}}
	repo, pkg := callerPackage(thread)
	for _, side := range []struct {
		name string
		list *starlark.List
		to   *[]string
	}{{"inputs", inputs, &t.inputs}, {"outputs", outputs, &t.outputs}} {
		names, err := stringList(side.list)
		if err != nil {
			return nil, fmt.Errorf("transition: %s: %v", side.name, err)
		}
		for _, n := range names {
			key, err := settingKey(n, repo, pkg)
			if err != nil {
				return nil, fmt.Errorf("transition: %s: %v", side.name, err)
			}
			if slices.Contains(*side.to, key) {
				return nil, fmt.Errorf("transition: %s: %s is given twice", side.name, n)
			}
			*side.to = append(*side.to, key)
			t.shown[key] = n
		}
	}
	return t, nil
}

// settingKey is the key of a setting a transition names: a native option,
// or a build setting's canonical label.
func settingKey(s, repo, pkg string) (string, error) {
	if name, ok := strings.CutPrefix(s, nativeOption); ok {
		if !slices.Contains(nativeOptions, name) {
			return "", fmt.Errorf("%s: rbs's transitions take the options %s", s, strings.Join(nativeOptions, ", "))
		}
		return s, nil
	}
	l, err := parseLabelIn("setting", s, repo, pkg)
	if err != nil {
		return "", err
	}
	return canonical(l.Label).String(), nil
}

// cfgValue reads a cfg argument: a transition, "exec" (config.exec()),
// or "target" and "host" (no transition: nil).
func cfgValue(fn string, v starlark.Value) (*Transition, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return nil, nil
	case *Transition:
		return v, nil
	case starlark.String:
		switch v {
		case "exec":
			return execTransition, nil
		case "target", "host":
			return nil, nil
		}
	}
	return nil, fmt.Errorf("%s: cfg must be a transition, \"exec\" or \"target\", got %s", fn, v)
}

// configuration is a configuration a transition makes: its key and the
// Workspace for it.
type configuration struct {
	key string // "" for a 1:1 transition; the split's key otherwise
	ws  *Workspace
}

// transition is the configurations t makes from the analyzer's for a target
// whose attributes are attrs, and whether t split it.
func (an *analyzer) transition(t *Transition, attrs starlark.Value) ([]configuration, bool, error) {
	w := an.ws
	if t.exec {
		cfg := w.cfg.clone()
		cfg.Platform, cfg.CompilationMode = platform.Host(), "opt"
		return []configuration{{ws: w.derived(cfg, "exec")}}, false, nil
	}
	settings := starlark.NewDict(len(t.inputs))
	for _, in := range t.inputs {
		v, err := w.settingFor(in)
		if err != nil {
			return nil, false, fmt.Errorf("transition input %s: %v", t.shown[in], err)
		}
		settings.SetKey(starlark.String(t.shown[in]), v)
	}
	settings.Freeze()
	thread := &starlark.Thread{Name: "transition", Print: w.debug}
	defer guard.Track(thread)()
	ret, err := starlark.Call(thread, t.impl, starlark.Tuple{settings, attrs}, nil)
	if err != nil {
		return nil, false, fmt.Errorf("transition: %w", err)
	}
	var outs []configuration
	switch r := ret.(type) {
	case *starlark.Dict:
		if r.Len() > 0 {
			if _, split := r.Items()[0][1].(*starlark.Dict); split {
				for _, kv := range r.Items() {
					key, ok := starlark.AsString(kv[0])
					d, isDict := kv[1].(*starlark.Dict)
					if !ok || !isDict {
						return nil, false, fmt.Errorf("transition: a split transition returns a dict of dicts, got %s: %s", kv[0].Type(), kv[1].Type())
					}
					c, err := an.transitioned(t, d)
					if err != nil {
						return nil, false, err
					}
					outs = append(outs, configuration{key: key, ws: c})
				}
				return outs, true, nil
			}
		}
		c, err := an.transitioned(t, r)
		if err != nil {
			return nil, false, err
		}
		return []configuration{{ws: c}}, false, nil
	case *starlark.List:
		for i := 0; i < r.Len(); i++ {
			d, ok := r.Index(i).(*starlark.Dict)
			if !ok {
				return nil, false, fmt.Errorf("transition: a split transition returns a list of dicts, got %s", r.Index(i).Type())
			}
			c, err := an.transitioned(t, d)
			if err != nil {
				return nil, false, err
			}
			outs = append(outs, configuration{key: fmt.Sprint(i), ws: c})
		}
		return outs, true, nil
	}
	return nil, false, fmt.Errorf("transition: the implementation must return a dict, or a dict or list of dicts, got %s", ret.Type())
}

// transitioned is w with the settings a transition returned, which must
// be its outputs, each once.
func (an *analyzer) transitioned(t *Transition, d *starlark.Dict) (*Workspace, error) {
	w := an.ws
	cfg := w.cfg.clone()
	got := map[string]bool{}
	for _, kv := range d.Items() {
		name, ok := starlark.AsString(kv[0])
		if !ok {
			return nil, fmt.Errorf("transition: want settings by name, got %s", kv[0].Type())
		}
		key := ""
		for _, out := range t.outputs {
			if t.shown[out] == name {
				key = out
			}
		}
		if key == "" {
			return nil, fmt.Errorf("transition: the implementation returned %s, which is not among its outputs (%s)", name, strings.Join(t.shownAll(t.outputs), ", "))
		}
		got[key] = true
		if err := an.setSetting(&cfg, key, kv[1]); err != nil {
			return nil, fmt.Errorf("transition output %s: %v", name, err)
		}
	}
	for _, out := range t.outputs {
		if !got[out] {
			return nil, fmt.Errorf("transition: the implementation did not return output %s", t.shown[out])
		}
	}
	return w.derived(cfg, "ST"), nil
}

func (t *Transition) shownAll(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = t.shown[k]
	}
	return out
}

// settingFor is the value of setting key in w, as a transition reads it.
func (w *Workspace) settingFor(key string) (starlark.Value, error) {
	switch strings.TrimPrefix(key, nativeOption) {
	case "compilation_mode":
		return starlark.String(w.compilationMode()), nil
	case "cpu":
		return starlark.String(w.cpu()), nil
	case "copt":
		return stringsValue(w.cfg.Copts), nil
	case "features":
		return stringsValue(w.cfg.Features), nil
	case "platforms":
		if w.cfg.Platforms != "" {
			l, err := label.Parse(w.cfg.Platforms)
			if err != nil {
				return nil, err
			}
			return starlark.NewList([]starlark.Value{Label{l}}), nil
		}
		return starlark.NewList([]starlark.Value{Label{label.Label{Repo: "platforms", Pkg: "host", Name: w.Platform.String()}}}), nil
	case "define":
		var ds []string
		for _, k := range sortedStrings(w.cfg.Defines) {
			ds = append(ds, k+"="+w.cfg.Defines[k])
		}
		return stringsValue(ds), nil
	}
	l, err := label.Parse(key)
	if err != nil {
		return nil, err
	}
	text, kind, err := w.settingValue(l)
	if err != nil {
		return nil, err
	}
	return parseSetting(kind, text)
}

func stringsValue(ss []string) *starlark.List {
	out := make([]starlark.Value, len(ss))
	for i, s := range ss {
		out[i] = starlark.String(s)
	}
	return starlark.NewList(out)
}

// setSetting sets setting key in cfg to v.
func (an *analyzer) setSetting(cfg *Config, key string, v starlark.Value) error {
	w := an.ws
	str := func() (string, error) {
		s, ok := starlark.AsString(v)
		if !ok {
			return "", fmt.Errorf("want a string, got %s", v.Type())
		}
		return s, nil
	}
	switch strings.TrimPrefix(key, nativeOption) {
	case "compilation_mode":
		s, err := str()
		if err != nil {
			return err
		}
		if !slices.Contains(CompilationModes, s) {
			return fmt.Errorf("%q: want one of %s", s, strings.Join(CompilationModes, ", "))
		}
		cfg.CompilationMode = s
		return nil
	case "cpu":
		s, err := str()
		if err != nil {
			return err
		}
		p, err := PlatformOfCPU(cfg.Platform, s)
		if err != nil {
			return err
		}
		cfg.Platform, cfg.CPU, cfg.Platforms = p, "", ""
		if s != cpuValue(p) {
			cfg.CPU = s
		}
		return nil
	case "copt", "features", "define":
		ss, err := stringList(v)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(key, "copt"):
			cfg.Copts = ss
		case strings.HasSuffix(key, "features"):
			cfg.Features = ss
		default:
			cfg.Defines = map[string]string{}
			for _, d := range ss {
				k, val, err := ParseDefine(d)
				if err != nil {
					return err
				}
				cfg.Defines[k] = val
			}
		}
		return nil
	case "platforms":
		p, l, err := an.platformOfLabels(v)
		if err != nil {
			return err
		}
		cfg.Platform, cfg.Platforms, cfg.CPU = p, l, ""
		return nil
	}
	l, err := label.Parse(key)
	if err != nil {
		return err
	}
	_, kind, err := w.settingValue(l)
	if err != nil {
		return err
	}
	text := settingText(v)
	if _, err := parseSetting(kind, text); err != nil {
		return err
	}
	cfg.Settings[key] = text
	return nil
}

// bazelCPUs are the architectures of the --cpu names of Bazel and Android
// that are not rbs's own.
var bazelCPUs = map[string]string{
	"k8": "x86_64", "piii": "x86_32", "x86": "x86_32", "armeabi-v7a": "arm", "armeabi": "arm", "armv7": "arm",
	"arm64-v8a": "arm64", "ppc": "ppc64le", "s390x": "s390x",
}

// PlatformOfCPU is p with the CPU Bazel names cpu (k8, aarch64,
// darwin_arm64, armeabi-v7a, ...): Bazel's --cpu.
func PlatformOfCPU(p platform.Platform, cpu string) (platform.Platform, error) {
	os := p.OS
	if rest, ok := strings.CutPrefix(cpu, "darwin_"); ok || cpu == "darwin" {
		os, cpu = "darwin", rest
		if cpu == "" {
			cpu = "x86_64"
		}
	}
	if arch, ok := bazelCPUs[cpu]; ok {
		cpu = arch
	}
	q, err := platform.Parse(os + "-" + cpu)
	if err != nil {
		return p, fmt.Errorf("cpu %q: %v", cpu, err)
	}
	return q, nil
}

// platformOfLabels reads //command_line_option:platforms: one platform()
// target, whose @platforms//os and @platforms//cpu constraints make the
// platform.
// It returns the platform target's label too ("" for rbs's own
// @platforms//host:OS-ARCH).
func (an *analyzer) platformOfLabels(v starlark.Value) (platform.Platform, string, error) {
	var first starlark.Value = v
	if l, ok := v.(*starlark.List); ok {
		if l.Len() != 1 {
			return platform.Platform{}, "", fmt.Errorf("want one platform, got %d", l.Len())
		}
		first = l.Index(0)
	}
	l, err := labelArg(first)
	if err != nil {
		return platform.Platform{}, "", err
	}
	if l.Repo == "platforms" && l.Pkg == "host" {
		p, err := platform.Parse(l.Name)
		return p, "", err
	}
	p, err := an.platformTarget(l)
	if err != nil {
		return platform.Platform{}, "", fmt.Errorf("%s: %v", l, err)
	}
	if p.values[osSetting] == "" || p.values[cpuSetting] == "" {
		return platform.Platform{}, "", fmt.Errorf("platform %s has no @platforms//os and @platforms//cpu constraints", l)
	}
	q, err := platformOf(p)
	return q, l.String(), err
}

// clone is a copy of c whose maps and lists may be changed.
func (c Config) clone() Config {
	out := c
	out.Defines = map[string]string{}
	for k, v := range c.Defines {
		out.Defines[k] = v
	}
	out.Settings = map[string]string{}
	for k, v := range c.Settings {
		out.Settings[k] = v
	}
	out.Copts = slices.Clone(c.Copts)
	out.Features = slices.Clone(c.Features)
	return out
}

// key is the configuration as text, for naming it.
func (c Config) key(p platform.Platform, mode string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "platform=%s\nmode=%s\n", p, mode)
	if c.CPU != "" {
		fmt.Fprintf(&b, "cpu=%s\n", c.CPU)
	}
	if c.Platforms != "" {
		fmt.Fprintf(&b, "platforms=%s\n", c.Platforms)
	}
	for _, k := range sortedStrings(c.Defines) {
		fmt.Fprintf(&b, "define %s=%s\n", k, c.Defines[k])
	}
	for _, k := range sortedStrings(c.Settings) {
		fmt.Fprintf(&b, "setting %s=%s\n", k, c.Settings[k])
	}
	fmt.Fprintf(&b, "copt=%q\nfeatures=%q\n", c.Copts, c.Features)
	return b.String()
}

// derived is the configuration cfg, made from w by a Starlark transition
// (kind "ST") or the execution transition ("exec"): w itself when cfg is
// w's, and one Workspace per configuration otherwise.
func (w *Workspace) derived(cfg Config, kind string) *Workspace {
	mode := cfg.CompilationMode
	if mode == "" {
		mode = "fastbuild"
	}
	key := cfg.key(cfg.Platform, mode)
	if key == w.cfg.key(w.Platform, w.compilationMode()) {
		return w
	}
	sum := sha256.Sum256([]byte(key))
	cpu := cfg.CPU
	if cpu == "" {
		cpu = cpuValue(cfg.Platform)
	}
	name := cpu + "-" + mode + "-ST-" + hex.EncodeToString(sum[:6])
	if kind == "exec" {
		name = cpuValue(cfg.Platform) + "-opt-exec-" + strings.ToUpper(hex.EncodeToString(sum[:4]))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.configs[name]; ok {
		return c
	}
	c := &Workspace{tree: w.tree, Platform: cfg.Platform, cfg: cfg, outDir: name}
	w.configs[name] = c
	return c
}

// transitionAttrs is the attr argument of a transition's implementation:
// the target's attributes, configured, with labels as Labels.
func transitionAttrs(def *TargetDef, values map[string]starlark.Value) starlark.Value {
	d := starlark.StringDict{"name": starlark.String(def.Label.Name)}
	for name, v := range values {
		a := def.Rule.attrs[name]
		if a == nil || !a.isLabel() {
			d[name] = v
			continue
		}
		d[name] = labelsIn(v, def.Label.Pkg)
	}
	return starlarkstruct.FromStringDict(starlark.String("attr"), d)
}

// labelsIn is v with its strings, relative to pkg, as Labels.
func labelsIn(v starlark.Value, pkg string) starlark.Value {
	switch x := v.(type) {
	case starlark.String:
		if x == "" {
			return starlark.None
		}
		l, err := label.ParseRelative(string(x), pkg)
		if err != nil {
			return x
		}
		return Label{l}
	case *starlark.List:
		out := make([]starlark.Value, x.Len())
		for i := range out {
			out[i] = labelsIn(x.Index(i), pkg)
		}
		return starlark.NewList(out)
	}
	return v
}

// binDir is where w's generated files live, relative to the exec root:
// rbs-out/OUTDIR/bin for a configuration a transition made, else BinDir.
func (w *Workspace) BinDir() string {
	if w.outDir != "" {
		return "rbs-out/" + w.outDir + "/bin"
	}
	if w.cfg.CPU != "" {
		return "rbs-out/" + w.cfg.CPU + "-" + w.compilationMode() + "/bin"
	}
	return BinDir(w.Platform, w.compilationMode())
}

// incoming is the configuration target def's rule transition makes.
func (an *analyzer) incoming(def *TargetDef) (*Workspace, error) {
	values := map[string]starlark.Value{}
	for name := range def.Rule.attrs {
		v, err := an.ws.configured(def.Label, def.Attrs[name])
		if err != nil {
			return nil, err
		}
		values[name] = v
	}
	cs, split, err := an.transition(def.Rule.cfg, transitionAttrs(def, values))
	if err != nil {
		return nil, fmt.Errorf("%s: rule %s's %v", def.Label, def.Rule.Name(), err)
	}
	if split {
		return nil, fmt.Errorf("%s: rule %s's transition splits the configuration; only an attribute's may", def.Label, def.Rule.Name())
	}
	return cs[0].ws, nil
}
