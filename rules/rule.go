package rules

import (
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/rbs-build/rbs/starlark/label"
	"github.com/rbs-build/rbs/starlark/spell"
	"go.starlark.net/starlark"
)

// RuleClass is what rule() returns: calling it in a BUILD file (or a macro
// called from one) declares a target.
type RuleClass struct {
	name       string // the global it was exported as, such as "genrule"
	impl       starlark.Callable
	attrs      map[string]*Attr
	executable bool
	test       bool
	doc        string
	// setting makes the rule's targets build settings; nil for none.
	setting *buildSetting
	// toolchains are the toolchain types it asks for.
	toolchains []toolchainReq
	// cfg is the transition its targets take; nil for none.
	cfg *Transition
	// analysisTest marks a rule of analysis_test = True: a test whose
	// implementation returns AnalysisTestResultInfo, from which rbs
	// writes the test's script.
	analysisTest bool
	// outputs are rule(outputs = {...}): each target's predeclared
	// files, ctx.outputs.KEY, named by a template of its attributes
	// ("%{name}_deploy.jar").
	outputs map[string]string
}

// outputTemplate is a %{attr} of a predeclared output's name.
var outputTemplate = regexp.MustCompile(`%\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// predeclaredOutputs are the names of target t's predeclared outputs
// (rule(outputs = ...)), by key.
func (t *TargetDef) predeclaredOutputs() (map[string]string, error) {
	out := map[string]string{}
	for key, tmpl := range t.Rule.outputs {
		var err error
		out[key] = outputTemplate.ReplaceAllStringFunc(tmpl, func(m string) string {
			attr := m[2 : len(m)-1]
			if attr == "name" {
				return t.Label.Name
			}
			s, ok := t.Attrs[attr].(starlark.String)
			if !ok && err == nil {
				err = fmt.Errorf("%s: predeclared output %s: %s is not a string attribute", t.Label, tmpl, attr)
			}
			return string(s)
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

var _ starlark.Callable = (*RuleClass)(nil)

func (r *RuleClass) String() string        { return "<rule " + r.Name() + ">" }
func (r *RuleClass) Type() string          { return "rule" }
func (r *RuleClass) Freeze()               {}
func (r *RuleClass) Truth() starlark.Bool  { return true }
func (r *RuleClass) Hash() (uint32, error) { return starlark.String(r.Name()).Hash() }

// Name is the rule's name, used by kind() queries and errors.
func (r *RuleClass) Name() string {
	if r.name == "" {
		return "unnamed_rule"
	}
	return r.name
}

// commonAttrs are accepted by every rule; rbs uses tags, args, features
// and testonly, and ignores the rest.
var commonAttrs = map[string]bool{
	"visibility": true, "tags": true, "testonly": true, "features": true, "deprecation": true,
	"compatible_with": true, "restricted_to": true, "licenses": true, "exec_compatible_with": true,
	"target_compatible_with": true, "size": true, "timeout": true, "flaky": true, "shard_count": true,
	"local": true, "args": true, "env": true, "exec_properties": true, "toolchains": true, "applicable_licenses": true,
}

func ruleBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var impl starlark.Callable
	var attrs *starlark.Dict
	var executable, test bool
	var doc string
	var outputs, toolchains, fragments, provides, cfg, setting starlark.Value
	var analysisTest, testable bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "implementation", &impl, "attrs?", &attrs,
		"executable?", &executable, "test?", &test, "doc?", &doc, "outputs?", &outputs,
		"toolchains?", &toolchains, "fragments?", &fragments, "provides?", &provides, "cfg?", &cfg,
		"build_setting?", &setting, "analysis_test?", &analysisTest, "_skylark_testable?", &testable); err != nil {
		return nil, err
	}
	incoming, err := cfgValue(b.Name(), cfg)
	if err != nil {
		return nil, err
	}
	if incoming == execTransition {
		return nil, fmt.Errorf("rule: cfg must be a transition() on a rule; \"exec\" is for attributes")
	}
	reqs, err := toolchainReqs(thread, b.Name(), toolchains)
	if err != nil {
		return nil, err
	}
	r := &RuleClass{impl: impl, attrs: map[string]*Attr{}, executable: executable || test || analysisTest, test: test || analysisTest,
		analysisTest: analysisTest, doc: doc, toolchains: reqs, cfg: incoming}
	switch o := outputs.(type) {
	case nil, starlark.NoneType:
	case *starlark.Dict:
		r.outputs = map[string]string{}
		for _, kv := range o.Items() {
			key, ok1 := starlark.AsString(kv[0])
			tmpl, ok2 := starlark.AsString(kv[1])
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("rule: outputs: want a dict of strings, got %s: %s", kv[0].Type(), kv[1].Type())
			}
			r.outputs[key] = tmpl
		}
	default:
		return nil, fmt.Errorf("rule: outputs: want a dict of names to templates, got %s", outputs.Type())
	}
	switch s := setting.(type) {
	case nil, starlark.NoneType:
	case *buildSetting:
		r.setting = s
		r.attrs[settingDefault] = settingAttr(s.kind)
	default:
		return nil, fmt.Errorf("rule: build_setting must be a config.* value, got %s", setting.Type())
	}
	if attrs != nil {
		for _, kv := range attrs.Items() {
			name, ok := starlark.AsString(kv[0])
			if !ok {
				return nil, fmt.Errorf("rule: attribute names must be strings, got %s", kv[0])
			}
			a, ok := kv[1].(*Attr)
			if !ok {
				return nil, fmt.Errorf("rule: attribute %q must be an attr.* value, got %s", name, kv[1].Type())
			}
			if name == "name" || commonAttrs[name] && name != "env" && name != "args" && name != "toolchains" {
				return nil, fmt.Errorf("rule: attribute %q is predefined", name)
			}
			r.attrs[name] = a
		}
	}
	return r, nil
}

// CallInternal declares a target in the package being evaluated.
func (r *RuleClass) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	pkg, ok := thread.Local(packageKey).(*Package)
	if !ok {
		return nil, fmt.Errorf("%s: rules can only be called while a BUILD file is evaluated", r.Name())
	}
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: rules take keyword arguments only", r.Name())
	}
	t := &TargetDef{Rule: r, Attrs: map[string]starlark.Value{}, Pos: thread.CallFrame(1).Pos.String()}
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		v := kv[1]
		switch {
		case name == "name":
			s, ok := v.(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: name must be a string", r.Name())
			}
			t.Label = label.Label{Pkg: pkg.Name, Name: string(s)}
		case name == "tags":
			tags, err := stringList(v)
			if err != nil {
				return nil, fmt.Errorf("%s: tags: %v", r.Name(), err)
			}
			t.Tags = tags
		case name == "features" && r.attrs["features"] == nil:
			f, err := stringList(v)
			if err != nil {
				return nil, fmt.Errorf("%s: features: %v", r.Name(), err)
			}
			t.Features = f
		case name == "args" && r.attrs["args"] == nil:
			a, err := stringList(v)
			if err != nil {
				return nil, fmt.Errorf("%s: args: %v", r.Name(), err)
			}
			t.Args = a
		case r.attrs[name] != nil && v == starlark.None:
			// None leaves an attribute unset, as in Bazel: its default.
		case r.attrs[name] != nil:
			if err := r.attrs[name].check(name, v); err != nil {
				return nil, fmt.Errorf("%s %s: %v", r.Name(), pkg.labelOf(t), err)
			}
			t.Attrs[name] = v
		case commonAttrs[name]:
			if t.Common == nil {
				t.Common = map[string]starlark.Value{}
			}
			t.Common[name] = v
		default:
			return nil, unknownAttr(r.Name()+" "+pkg.labelOf(t), name, sortedKeys(r.attrs))
		}
	}
	if t.Label.Name == "" {
		return nil, fmt.Errorf("%s: missing name", r.Name())
	}
	if _, err := label.Parse("//" + pkg.Name + ":" + t.Label.Name); err != nil {
		return nil, fmt.Errorf("%s: invalid name %q: %v", r.Name(), t.Label.Name, err)
	}
	for name, a := range r.attrs {
		if _, set := t.Attrs[name]; !set {
			if a.mandatory {
				return nil, fmt.Errorf("%s %s: missing mandatory attribute %q", r.Name(), t.Label, name)
			}
			t.Attrs[name] = a.zero()
		}
	}
	if err := pkg.add(t); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

// unknownAttr is the error of an attribute of what that it does not have,
// with the one it likely meant and those it has.
func unknownAttr(what, name string, attrs []string) error {
	return fmt.Errorf("%s: unknown attribute %q%s (attributes: %s)", what, name, spell.DidYouMean(name, attrs), strings.Join(attrs, ", "))
}

func stringList(v starlark.Value) ([]string, error) {
	l, ok := v.(*starlark.List)
	if !ok {
		return nil, fmt.Errorf("want a list of strings, got %s", v.Type())
	}
	out := make([]string, l.Len())
	for i := range out {
		s, ok := starlark.AsString(l.Index(i))
		if !ok {
			return nil, fmt.Errorf("want a list of strings, got %s", l.Index(i).Type())
		}
		out[i] = s
	}
	return out, nil
}

// packageKey is the thread-local key of the Package being evaluated.
const packageKey = "rbs.package"

// Package is an evaluated BUILD file: its targets and the files they output.
type Package struct {
	Name    string // package path, "" for the root
	Dir     string // absolute directory
	Targets map[string]*TargetDef
	Order   []string            // target names in declaration order
	Outputs map[string]string   // generated file name -> owning target name
	Exports map[string]bool     // exports_files
	Sources map[string]struct{} // files known to exist, from glob or exports_files
	// fsys and fsDir hold a repository's package (external/REPO/PKG): its
	// files, and its directory in them; fsys is nil for the workspace's.
	fsys  fs.FS
	fsDir string
	// finalizers are the finalizer macros called, to run once the BUILD
	// file has been (finalize); finalizing is set while they run.
	finalizers []func(*starlark.Thread) error
	finalizing bool
}

func newPackage(name, dir string) *Package {
	return &Package{Name: name, Dir: dir, Targets: map[string]*TargetDef{}, Outputs: map[string]string{}, Exports: map[string]bool{}, Sources: map[string]struct{}{}}
}

func (p *Package) labelOf(t *TargetDef) string {
	if t.Label.Name == "" {
		return "//" + p.Name + ":<unnamed>"
	}
	return t.Label.String()
}

// TargetDef is a target as declared in a BUILD file.
type TargetDef struct {
	Label label.Label
	Rule  *RuleClass
	Attrs map[string]starlark.Value
	Tags  []string
	Args  []string
	// Features are the target's features attribute: "name" enables a
	// feature, "-name" disables it (ctx.features, ctx.disabled_features).
	Features []string
	// Common are the other attributes every rule has (commonAttrs) that
	// the BUILD file gave, for ctx.attr.
	Common map[string]starlark.Value
	Pos    string
}

// Kind is the rule name, as kind() queries match it.
func (t *TargetDef) Kind() string { return t.Rule.Name() + " rule" }

// IsTest reports whether the target is a test.
func (t *TargetDef) IsTest() bool { return t.Rule.test }

func (p *Package) add(t *TargetDef) error {
	if old, dup := p.Targets[t.Label.Name]; dup {
		return fmt.Errorf("target %s is declared twice (first at %s)", t.Label, old.Pos)
	}
	if owner, ok := p.Outputs[t.Label.Name]; ok {
		return fmt.Errorf("target %s has the name of a file that %s outputs", t.Label, label.Label{Pkg: p.Name, Name: owner})
	}
	predeclared, err := t.predeclaredOutputs()
	if err != nil {
		return err
	}
	for name, a := range t.Rule.attrs {
		var outs []string
		switch a.kind {
		case attrOutput:
			if s, ok := t.Attrs[name].(starlark.String); ok && s != "" {
				outs = []string{string(s)}
			}
		case attrOutputList:
			outs, _ = stringList(t.Attrs[name])
		}
		if _, ok := t.Attrs[name].(*Selector); ok && (a.kind == attrOutput || a.kind == attrOutputList) {
			return fmt.Errorf("%s: attribute %s names outputs, which select() cannot configure", t.Label, name)
		}
		sort.Strings(outs)
		for _, o := range outs {
			if _, err := label.ParseRelative(o, p.Name); err != nil {
				return fmt.Errorf("%s: output %v", t.Label, err)
			}
			if owner, dup := p.Outputs[o]; dup {
				return fmt.Errorf("output %s is declared twice: by %s and by %s", label.Label{Pkg: p.Name, Name: o}, label.Label{Pkg: p.Name, Name: owner}, t.Label)
			}
			if _, clash := p.Targets[o]; clash {
				return fmt.Errorf("%s outputs %s, which is the name of a target", t.Label, o)
			}
			p.Outputs[o] = t.Label.Name
		}
	}
	for _, key := range slices.Sorted(maps.Keys(predeclared)) {
		o := predeclared[key]
		if owner, dup := p.Outputs[o]; dup {
			return fmt.Errorf("output %s is declared twice: by %s and by %s", label.Label{Pkg: p.Name, Name: o}, label.Label{Pkg: p.Name, Name: owner}, t.Label)
		}
		p.Outputs[o] = t.Label.Name
	}
	p.Targets[t.Label.Name] = t
	p.Order = append(p.Order, t.Label.Name)
	return nil
}

// DepLabels returns the labels a target's label attributes name; without
// implicit, not those of its private attributes (_name).
func DepLabels(t *TargetDef, implicit bool) []label.Label {
	var out []label.Label
	for _, name := range sortedKeys(t.Rule.attrs) {
		a := t.Rule.attrs[name]
		if !a.isLabel() || !implicit && strings.HasPrefix(name, "_") {
			continue
		}
		for _, s := range a.labels(t.Attrs[name]) {
			if s == defaultCondition {
				continue // an alias that always matches, as a select() key
			}
			if l, err := label.ParseRelative(s, t.Label.Pkg); err == nil {
				out = append(out, canonical(l))
			}
		}
	}
	return out
}

// Declaration is the target as its BUILD file declares it, in BUILD
// syntax, as Bazel's query --output build prints it: where it is declared,
// then the rule with its name, tags and the attributes that differ from
// their defaults.
func Declaration(t *TargetDef) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n%s(\n    name = %q,\n", t.Pos, t.Rule.Name(), t.Label.Name)
	for _, name := range sortedKeys(t.Rule.attrs) {
		v := t.Attrs[name]
		if same, err := starlark.Equal(v, t.Rule.attrs[name].zero()); strings.HasPrefix(name, "_") || v == nil || err == nil && same {
			continue
		}
		fmt.Fprintf(&b, "    %s = %s,\n", name, v)
	}
	if len(t.Tags) > 0 {
		fmt.Fprintf(&b, "    tags = %s,\n", starlarkStrings(t.Tags))
	}
	b.WriteString(")")
	return b.String()
}

// starlarkStrings is ss as a Starlark list of strings.
func starlarkStrings(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = starlark.String(s).String()
	}
	return "[" + strings.Join(q, ", ") + "]"
}
