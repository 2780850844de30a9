package rules

// Analysis tests, as Bazel has them for @bazel_skylib's analysistest: a
// rule of analysis_test = True returns AnalysisTestResultInfo(success,
// message), and rbs writes its test, which prints the message and fails
// unless success; analysis_test_transition(settings) is the transition its
// target_under_test takes. Setting //command_line_option:allow_analysis_failures
// there lets that target's analysis fail: its error is then the target's
// AnalysisFailureInfo, which the test inspects.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// allowFailures is the option that makes a transition's targets report
// their analysis failures as AnalysisFailureInfo.
const allowFailures = nativeOption + "allow_analysis_failures"

var (
	analysisTestResultInfo = &Provider{name: "AnalysisTestResultInfo", fields: []string{"success", "message"}}
	analysisFailureInfo    = &Provider{name: "AnalysisFailureInfo", fields: []string{"causes"}}
)

// analysisTestTransition is analysis_test_transition(settings): a
// transition that sets settings, which may allow analysis failures.
func analysisTestTransition(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var settings *starlark.Dict
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "settings", &settings); err != nil {
		return nil, err
	}
	t := &Transition{shown: map[string]string{}}
	repo, pkg := callerPackage(thread)
	values := starlark.NewDict(settings.Len())
	for _, kv := range settings.Items() {
		name, ok := starlark.AsString(kv[0])
		if !ok {
			return nil, fmt.Errorf("%s: settings are named by strings, got %s", b.Name(), kv[0].Type())
		}
		if name == allowFailures {
			t.allowFailures = truthy(kv[1])
			continue
		}
		key, err := settingKey(name, repo, pkg)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", b.Name(), err)
		}
		t.outputs = append(t.outputs, key)
		t.shown[key] = name
		values.SetKey(starlark.String(name), kv[1])
	}
	values.Freeze()
	t.impl = starlark.NewBuiltin("analysis_test_transition", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
		return values, nil
	})
	return t, nil
}

// truthy reads a setting given as a bool or as Bazel's "True"/"true".
func truthy(v starlark.Value) bool {
	if s, ok := starlark.AsString(v); ok {
		return strings.EqualFold(s, "true") || s == "1"
	}
	return bool(v.Truth())
}

// failedTarget is target l whose analysis failed with err, as a
// transition that allows failures gives it: only AnalysisFailureInfo.
func failedTarget(l label.Label, err error) *Configured {
	cause := starlarkstruct.FromStringDict(starlark.String("AnalysisFailure"), starlark.StringDict{
		"label":   Label{l},
		"message": starlark.String(err.Error()),
	})
	info := &ProviderInstance{p: analysisFailureInfo, fields: starlark.StringDict{"causes": &Depset{direct: []starlark.Value{cause}}}}
	return &Configured{Label: l, Providers: map[*Provider]*ProviderInstance{analysisFailureInfo: info}}
}

// analysisTestScript writes the test of an analysis test target c from
// the AnalysisTestResultInfo its implementation returned.
func analysisTestScript(ctx *ruleContext, c *Configured) error {
	info := c.Providers[analysisTestResultInfo]
	if info == nil {
		return fmt.Errorf("%s: an analysis_test rule's implementation must return AnalysisTestResultInfo", ctx.def.Label)
	}
	message, _ := starlark.AsString(info.fields["message"])
	success := info.fields["success"] != nil && bool(info.fields["success"].Truth())
	script := "#!/bin/sh\n"
	if message != "" {
		script += "cat <<'RBS_ANALYSIS_TEST_MESSAGE'\n" + message + "\nRBS_ANALYSIS_TEST_MESSAGE\n"
	}
	if success {
		script += "exit 0\n"
	} else {
		script += "exit 1\n"
	}
	exe := ctx.outputs["executable"].(*File)
	a := &Action{Owner: ctx.def.Label, Mnemonic: "AnalysisTestScript", Progress: "Writing " + exe.ShortPath, Outputs: []*File{exe}, Write: true, Content: script, Executable: true}
	ctx.actions = append(ctx.actions, a)
	c.Actions = ctx.actions
	c.Executable = exe
	return nil
}

// suiteTagsMatch reports whether a test's tags pass a test_suite's tags,
// as Bazel filters them: it has each tag, and none given as -tag.
func suiteTagsMatch(suite, tags []string) bool {
	for _, s := range suite {
		if neg, ok := strings.CutPrefix(s, "-"); ok {
			if slices.Contains(tags, neg) {
				return false
			}
		} else if s != "manual" && !slices.Contains(tags, s) {
			return false
		}
	}
	return true
}

// SuiteTests is labels with each test_suite replaced by its tests (those
// of its tests attribute, suites among them expanded in turn; without
// any, the tests of its package not tagged manual that pass its tags),
// each label once.
func (w *Workspace) SuiteTests(labels []label.Label) ([]label.Label, error) {
	var out []label.Label
	seen := map[string]bool{}
	var add func(l label.Label, via []string) error
	add = func(l label.Label, via []string) error {
		pkg, err := w.Package(l.Pkg)
		if err != nil {
			return err
		}
		def, ok := pkg.Targets[l.Name]
		if !ok || def.Rule.Name() != "test_suite" {
			if !seen[l.String()] {
				seen[l.String()] = true
				out = append(out, l)
			}
			return nil
		}
		if slices.Contains(via, l.String()) {
			return fmt.Errorf("test_suite cycle: %s -> %s", strings.Join(via, " -> "), l)
		}
		v, _, err := w.resolve(l, def.Attrs["tests"], nil)
		if err != nil {
			return err
		}
		names, _ := stringList(v)
		if len(names) == 0 {
			for _, n := range pkg.Order {
				if t := pkg.Targets[n]; t.IsTest() && !slices.Contains(t.Tags, "manual") && suiteTagsMatch(def.Tags, t.Tags) {
					names = append(names, ":"+n)
				}
			}
		}
		for _, n := range names {
			tl, err := label.ParseRelative(n, l.Pkg)
			if err != nil {
				return fmt.Errorf("test_suite %s: %v", l, err)
			}
			if err := add(canonical(tl), append(via, l.String())); err != nil {
				return err
			}
		}
		return nil
	}
	for _, l := range labels {
		if err := add(l, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}
