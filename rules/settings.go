package rules

// Build settings, as Bazel has them: a rule made with
// build_setting = config.bool(flag = True) (or config.string, config.int,
// config.string_list) makes targets whose value is their
// build_setting_default unless the command line sets it
// (--//pkg:flag=value); the rule reads it as ctx.build_setting_value, and
// config_setting's flag_values match on it.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// settingKind is the type of a build setting's value.
type settingKind int

const (
	settingBool settingKind = iota
	settingString
	settingInt
	settingStringList
	// settingLabel is label_flag's and label_setting's: no config.*
	// function makes one.
	settingLabel
)

var settingKinds = map[settingKind]string{settingBool: "bool", settingString: "string", settingInt: "int", settingStringList: "string_list"}

// settingKindName names a setting's kind in messages.
func settingKindName(k settingKind) string {
	if k == settingLabel {
		return "label"
	}
	return settingKinds[k]
}

// buildSetting is what config.<kind>(flag = ...) returns.
type buildSetting struct {
	kind settingKind
	flag bool // settable on the command line
}

func (s *buildSetting) String() string        { return "<config." + settingKindName(s.kind) + ">" }
func (s *buildSetting) Type() string          { return "BuildSetting" }
func (s *buildSetting) Freeze()               {}
func (s *buildSetting) Truth() starlark.Bool  { return true }
func (s *buildSetting) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: BuildSetting") }

// settingDefault is the attribute every build setting target has.
const settingDefault = "build_setting_default"

// configModule is the config module of the rule API.
func configModule() *starlarkstruct.Module {
	members := starlark.StringDict{}
	for kind, name := range settingKinds {
		members[name] = starlark.NewBuiltin("config."+name, func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			s := &buildSetting{kind: kind}
			var repeatable bool
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "flag?", &s.flag, "repeatable?", &repeatable); err != nil {
				return nil, err
			}
			return s, nil
		})
	}
	members["exec"] = starlark.NewBuiltin("config.exec", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.String("exec"), nil
	})
	members["target"] = starlark.NewBuiltin("config.target", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return starlark.String("target"), nil
	})
	return &starlarkstruct.Module{Name: "config", Members: members}
}

// settingAttr is the build_setting_default attribute of a setting of kind.
func settingAttr(kind settingKind) *Attr {
	switch kind {
	case settingBool:
		return &Attr{kind: attrBool, mandatory: true}
	case settingInt:
		return &Attr{kind: attrInt, mandatory: true}
	case settingStringList:
		return &Attr{kind: attrStringList, mandatory: true}
	}
	return &Attr{kind: attrString, mandatory: true}
}

// parseSetting reads a command-line value for a setting of kind.
func parseSetting(kind settingKind, s string) (starlark.Value, error) {
	switch kind {
	case settingBool:
		b, err := parseBool(s)
		if err != nil {
			return nil, err
		}
		return starlark.Bool(b), nil
	case settingInt:
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not an int", s)
		}
		return starlark.MakeInt(n), nil
	case settingStringList:
		var items []starlark.Value
		for _, x := range strings.Split(s, ",") {
			if x != "" {
				items = append(items, starlark.String(x))
			}
		}
		return starlark.NewList(items), nil
	}
	return starlark.String(s), nil
}

// buildSettingValue is ctx.build_setting_value of target t.
func (w *Workspace) buildSettingValue(t *TargetDef) (starlark.Value, error) {
	if v, set := w.cfg.Settings[t.Label.String()]; set {
		return parseSetting(t.Rule.setting.kind, v)
	}
	return t.Attrs[settingDefault], nil
}

// CheckSettings checks the build settings given on the command line: each
// must name a build setting that may be set so, with a value of its type.
func (w *Workspace) CheckSettings() error {
	for _, name := range sortedStrings(w.cfg.Settings) {
		l, err := label.Parse(name)
		if err != nil {
			return fmt.Errorf("--%s: %v", name, err)
		}
		p, err := w.Package(l.Pkg)
		if err != nil {
			return fmt.Errorf("--%s: %v", name, err)
		}
		t, ok := p.Targets[l.Name]
		switch {
		case !ok || t.Rule.setting == nil:
			return fmt.Errorf("--%s: %s is not a build setting", name, l)
		case !t.Rule.setting.flag:
			return fmt.Errorf("--%s: build setting %s is not a flag (build_setting = config.%s(flag = True))", name, l, settingKindName(t.Rule.setting.kind))
		}
		if t.Rule.setting.kind == settingLabel {
			if _, err := label.ParseRelative(w.cfg.Settings[name], l.Pkg); err != nil {
				return fmt.Errorf("--%s=%s: %v", name, w.cfg.Settings[name], err)
			}
			continue
		}
		if _, err := parseSetting(t.Rule.setting.kind, w.cfg.Settings[name]); err != nil {
			return fmt.Errorf("--%s=%s: %v", name, w.cfg.Settings[name], err)
		}
	}
	return nil
}
