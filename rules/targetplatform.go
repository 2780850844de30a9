package rules

// The target platform as its constraint values. --platforms names a
// platform() target: its constraint_values (after its parents') are the
// target platform's, its @platforms//os and @platforms//cpu values make
// the OS-ARCH platform actions run on, and select() keys,
// config_setting(constraint_values) and toolchain resolution see all of
// them. Without it, the target platform is OS-ARCH (--platform), with each
// other setting at its default. Both are read from the targets'
// definitions, before analysis, as select() needs them.

import (
	"fmt"
	"strings"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
)

// targetPlatform is the target platform's constraint values.
func (w *Workspace) targetPlatform() (platformDef, error) {
	if w.cfg.Platforms == "" {
		return osArchPlatform("target platform "+w.Platform.String(), w.Platform), nil
	}
	l, err := label.Parse(w.cfg.Platforms)
	if err != nil {
		return platformDef{}, fmt.Errorf("--platforms: %v", err)
	}
	p := platformDef{name: w.cfg.Platforms, values: map[string]string{}}
	if err := w.platformValues(canonical(l), p.values, nil); err != nil {
		return platformDef{}, fmt.Errorf("--platforms %s: %v", w.cfg.Platforms, err)
	}
	return p, nil
}

// platformValues adds to values the constraint values of platform()
// target l: its parents' first, then its own.
func (w *Workspace) platformValues(l label.Label, values map[string]string, via []string) error {
	for _, v := range via {
		if v == l.String() {
			return fmt.Errorf("platform parents cycle: %s -> %s", strings.Join(via, " -> "), l)
		}
	}
	t, err := w.targetDef(l)
	if err != nil {
		return err
	}
	if t.Rule.Name() != "platform" {
		return fmt.Errorf("%s is a %s, not a platform", l, t.Rule.Name())
	}
	parents, _ := stringList(t.Attrs["parents"])
	for _, s := range parents {
		pl, err := label.ParseRelative(s, t.Label.Pkg)
		if err != nil {
			return fmt.Errorf("%s: parents: %v", l, err)
		}
		if err := w.platformValues(canonical(pl), values, append(via, l.String())); err != nil {
			return err
		}
	}
	cons, _ := stringList(t.Attrs["constraint_values"])
	for _, s := range cons {
		cl, err := label.ParseRelative(s, t.Label.Pkg)
		if err != nil {
			return fmt.Errorf("%s: constraint_values: %v", l, err)
		}
		c, ok, err := w.constraintDef(canonical(cl))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%s: %s is not a constraint_value", l, cl)
		}
		values[c.setting] = c.value
	}
	return nil
}

// targetDef is the definition of target l.
func (w *Workspace) targetDef(l label.Label) (*TargetDef, error) {
	pkg, err := w.Package(l.Pkg)
	if err != nil {
		return nil, err
	}
	t, ok := pkg.Targets[l.Name]
	if !ok {
		return nil, fmt.Errorf("no target %s", l)
	}
	return t, nil
}

// constraintDef reads constraint_value target l: its value, its setting
// and the setting's default. ok is false for a target of another kind.
func (w *Workspace) constraintDef(l label.Label) (c constraint, ok bool, err error) {
	t, err := w.targetDef(l)
	if err != nil {
		return c, false, err
	}
	if t.Rule.Name() != "constraint_value" {
		return c, false, nil
	}
	setting, _ := starlark.AsString(t.Attrs["constraint_setting"])
	sl, err := label.ParseRelative(setting, t.Label.Pkg)
	if err != nil {
		return c, false, fmt.Errorf("%s: constraint_setting: %v", l, err)
	}
	sl = canonical(sl)
	c = constraint{value: l.String(), setting: sl.String()}
	st, err := w.targetDef(sl)
	if err != nil {
		return c, false, fmt.Errorf("%s: constraint_setting: %v", l, err)
	}
	if def, _ := starlark.AsString(st.Attrs["default_constraint_value"]); def != "" {
		dl, err := label.ParseRelative(def, st.Label.Pkg)
		if err != nil {
			return c, false, fmt.Errorf("%s: default_constraint_value: %v", sl, err)
		}
		c.def = canonical(dl).String()
	}
	return c, true, nil
}

// hasConstraint says whether the target platform has constraint_value
// target l; ok is false when l is not a constraint_value.
func (w *Workspace) hasConstraint(l label.Label) (has, ok bool, err error) {
	c, ok, err := w.constraintDef(canonical(l))
	if err != nil || !ok {
		return false, ok, err
	}
	p, err := w.targetPlatform()
	if err != nil {
		return false, true, err
	}
	return p.satisfies(c), true, nil
}

// platformOf is the OS-ARCH platform of platform def p: its @platforms os
// and cpu values, this machine's where it has none.
func platformOf(p platformDef) (platform.Platform, error) {
	name := func(setting string) string {
		v := p.values[setting]
		return v[strings.LastIndex(v, ":")+1:]
	}
	host := platform.Host()
	os, cpu := name(osSetting), name(cpuSetting)
	switch os {
	case "":
		os = host.OS
	case "macos", "osx":
		os = "darwin"
	}
	if cpu == "" {
		cpu = host.Arch
	}
	q, err := platform.Parse(os + "-" + cpu)
	if err != nil {
		return platform.Platform{}, fmt.Errorf("platform %s: %v", p.name, err)
	}
	return q, nil
}
