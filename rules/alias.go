package rules

// alias, as Bazel has it: a target that stands for another, actual, which
// select() may configure. Depending on an alias is depending on what it
// names; as a select() key, an alias of a config_setting is that
// config_setting. A chain of aliases whose actual is a select() on
// config_settings is how @bazel_skylib's selects.config_setting_group ORs
// and ANDs them: the key then carries the conditions of every key chosen
// along the chain, so an AND group is more specialised than each of its
// members. An alias whose actual is //conditions:default always matches
// (the group of //conditions:default), and builds nothing.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
)

var aliasRule = &RuleClass{
	name: "alias",
	impl: starlark.NewBuiltin("alias", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.None, nil
	}),
	attrs: map[string]*Attr{
		"actual": {kind: attrLabel, mandatory: true},
	},
	doc: "Another name for the target actual.",
}

// labelFlag and labelSetting are Bazel's label_flag and label_setting:
// build settings whose value is a label, each an alias of the target its
// value names: build_setting_default, unless (for label_flag) the command
// line sets it (--//pkg:flag=//other:target).
var labelFlag, labelSetting = labelSettingRule("label_flag", true), labelSettingRule("label_setting", false)

func labelSettingRule(name string, flag bool) *RuleClass {
	return &RuleClass{
		name: name,
		impl: starlark.NewBuiltin(name, func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.None, nil
		}),
		attrs:   map[string]*Attr{settingDefault: {kind: attrLabel, mandatory: true}},
		setting: &buildSetting{kind: settingLabel, flag: flag},
		doc:     "A build setting whose value is a label: it stands for the target its value names.",
	}
}

// isAlias says whether rule r's targets stand for another: alias,
// label_flag and label_setting.
func isAlias(r *RuleClass) bool { return r == aliasRule || r == labelFlag || r == labelSetting }

// aliasActual is the label an alias names in this configuration, as it
// was written (relative to the alias's package), with the conditions of
// the select() keys that chose it.
func (w *Workspace) aliasActual(t *TargetDef, via []string) (string, condition, error) {
	if t.Rule != aliasRule {
		value, _, err := w.settingValue(t.Label)
		if err != nil || value == "" {
			return "", nil, fmt.Errorf("%s %s: want a label, got %q", t.Rule.name, t.Label, value)
		}
		return value, nil, nil
	}
	v, cond, err := w.resolve(t.Label, t.Attrs["actual"], via)
	if err != nil {
		return "", nil, err
	}
	s, ok := v.(starlark.String)
	if !ok || s == "" {
		return "", nil, fmt.Errorf("alias %s: actual must name a target, got %s", t.Label, v)
	}
	return string(s), cond, nil
}

// aliasMatches says whether alias t, as a select() key, holds: whether
// what it names does.
func (w *Workspace) aliasMatches(t *TargetDef, via []string) (bool, condition, error) {
	if slices.Contains(via, t.Label.String()) {
		return false, nil, fmt.Errorf("alias cycle: %s -> %s", strings.Join(via, " -> "), t.Label)
	}
	via = append(slices.Clone(via), t.Label.String())
	actual, cond, err := w.aliasActual(t, via)
	if err != nil {
		return false, nil, err
	}
	if cond == nil {
		cond = condition{}
	}
	if actual == defaultCondition {
		return true, cond, nil
	}
	ok, more, err := w.matches(actual, t.Label.Pkg, via)
	if err != nil {
		return false, nil, fmt.Errorf("alias %s: %v", t.Label, err)
	}
	for c := range more {
		cond[c] = true
	}
	return ok, cond, nil
}

// alias analyses an alias: it is the target it names.
func (an *analyzer) alias(def *TargetDef) (*Configured, error) {
	if err := an.configDeps(def); err != nil {
		return nil, err
	}
	actual, _, err := an.ws.aliasActual(def, nil)
	if err != nil {
		return nil, err
	}
	if actual == defaultCondition {
		return &Configured{Label: def.Label, Def: def, Providers: map[*Provider]*ProviderInstance{}}, nil
	}
	l, err := label.ParseRelative(actual, def.Label.Pkg)
	if err != nil {
		return nil, fmt.Errorf("alias %s: actual: %v", def.Label, err)
	}
	c, err := an.analyze(l)
	if err != nil {
		if strings.HasPrefix(err.Error(), "dependency cycle") {
			return nil, err
		}
		return nil, fmt.Errorf("alias %s: %w", def.Label, err)
	}
	return c, nil
}

// configDeps analyses what def depends on through its configuration, as
// Bazel does: the config_settings (or aliases of them) its select()s name
// as keys, and, for a config_setting, the build settings its flag_values
// read. So a build setting's implementation (string_flag checking its
// values) runs whenever a select() may read it.
func (an *analyzer) configDeps(def *TargetDef) error {
	type dep struct {
		l    label.Label
		what string
	}
	var deps []dep
	for _, name := range sortedKeys(def.Rule.attrs) {
		s, ok := def.Attrs[name].(*Selector)
		if !ok {
			continue
		}
		for _, p := range s.parts {
			d, ok := p.(*selectDict)
			if !ok {
				continue
			}
			for _, k := range d.keys {
				if k == defaultCondition || isConstraint(k) {
					continue
				}
				l, err := label.ParseRelative(k, d.pkg)
				if err != nil {
					return fmt.Errorf("%s: select() at %s: key %q: %v", def.Label, d.position, k, err)
				}
				deps = append(deps, dep{l, "in select()"})
			}
		}
	}
	if def.Rule == configSettingRule {
		for _, k := range sortedStrings(stringDict(def.Attrs["flag_values"])) {
			l, err := label.ParseRelative(k, def.Label.Pkg)
			if err != nil {
				return fmt.Errorf("config_setting %s: flag_values: %v", def.Label, err)
			}
			deps = append(deps, dep{l, "config_setting " + def.Label.String() + ": flag_values"})
		}
	}
	for _, d := range deps {
		if _, err := an.analyze(d.l); err != nil {
			if strings.HasPrefix(err.Error(), "dependency cycle") {
				return err
			}
			if def.Rule == configSettingRule {
				return fmt.Errorf("%s: %w", d.what, err)
			}
			return fmt.Errorf("%s: %s: %w", def.Label, d.what, err)
		}
	}
	return nil
}
