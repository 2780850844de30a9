package rules

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Action is one step of the build: a command that reads input files and
// writes output files, or a file written or copied from analysis.
type Action struct {
	Owner    label.Label
	Mnemonic string
	Progress string
	Args     []string
	// LateArgs, when set, makes Args again when the action runs, with the
	// directories its Args expand listed (Args holds them as themselves).
	LateArgs func(Expander) ([]string, error)
	Env      map[string]string
	Inputs   []*File
	// ToolTrees are the runfiles trees of the tools the action runs, by
	// the tool's exec path: each is laid out beside its tool, in
	// TOOL.runfiles/, as Bazel lays out a tool's runfiles for an action.
	// Their files are among Inputs too.
	ToolTrees map[string][]Runfile
	Outputs   []*File
	// Write actions produce their one output from Content; Copy actions
	// from another file, Copy, read when the action runs, with
	// Substitutions made in it in order (expand_template); neither runs a
	// process.
	Write   bool
	Content string
	// LateContent, when set, makes Content again when the action runs, as
	// LateArgs makes Args.
	LateContent   func(Expander) (string, error)
	Copy          *File
	Substitutions []Substitution
	Executable    bool
	// Platform is the platform of the configuration the action's target
	// is built in, where it runs; zero for the build's own.
	Platform platform.Platform
}

// Substitution is one replacement of an expand_template action: every
// occurrence of Key, a plain string, becomes Value.
type Substitution struct {
	Key, Value string
}

// templateMnemonic is the mnemonic of expand_template actions, as in Bazel.
const templateMnemonic = "TemplateExpand"

// Substitute makes the action's substitutions in content, one after the
// other in their order, as Bazel's template expansion does: a later key is
// looked for in the text the earlier ones left.
func (a *Action) Substitute(content []byte) []byte {
	if len(a.Substitutions) == 0 {
		return content
	}
	s := string(content)
	for _, sub := range a.Substitutions {
		s = strings.ReplaceAll(s, sub.Key, sub.Value)
	}
	return []byte(s)
}

// Description names the action in progress output and errors.
func (a *Action) Description() string {
	if a.Progress != "" {
		return a.Progress
	}
	return a.Mnemonic + " " + a.Owner.String()
}

// ruleContext is ctx, one per analysed target.
type ruleContext struct {
	an       *analyzer
	def      *TargetDef
	pkg      *Package
	attr     *Struct
	file     starlark.StringDict
	files    starlark.StringDict
	exe      starlark.StringDict
	outputs  starlark.StringDict
	declared map[string]*File // by short path
	actions  []*Action
	deps     map[string]*Configured // every label in attributes, by label string
	// values are the target's attribute values with select() resolved.
	values map[string]starlark.Value
	// aspect is ctx.rule when the context is an aspect's; nil for a rule's.
	aspect starlark.Value
	// toolchains is ctx.toolchains.
	toolchains *toolchainContext
	// splitAttr is ctx.split_attr: the targets of each attribute a split
	// transition configures, by the split's keys.
	splitAttr starlark.StringDict
	frozen    bool
}

var _ starlark.HasAttrs = (*ruleContext)(nil)

func (c *ruleContext) String() string        { return "<ctx for " + c.def.Label.String() + ">" }
func (c *ruleContext) Type() string          { return "ctx" }
func (c *ruleContext) Freeze()               {}
func (c *ruleContext) Truth() starlark.Bool  { return true }
func (c *ruleContext) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: ctx") }
func (c *ruleContext) AttrNames() []string {
	names := []string{"actions", "attr", "bin_dir", "build_file_path", "build_setting_value", "disabled_features", "executable", "expand_location", "features",
		"file", "files", "fragments", "genfiles_dir", "label", "outputs", "rule", "runfiles", "split_attr", "toolchains", "var", "workspace_name"}
	return slices.Sorted(slices.Values(append(names, moreAttrNames...)))
}

func (c *ruleContext) Attr(name string) (starlark.Value, error) {
	mod := func(n string, d starlark.StringDict) starlark.Value {
		return starlarkstruct.FromStringDict(starlark.String(n), d)
	}
	switch name {
	case "label":
		return Label{c.def.Label}, nil
	case "attr":
		return c.attr, nil
	case "file":
		return mod("file", c.file), nil
	case "files":
		return mod("files", c.files), nil
	case "executable":
		return mod("executable", c.exe), nil
	case "outputs":
		return mod("outputs", c.outputs), nil
	case "actions":
		return c.actionsModule(), nil
	case "workspace_name":
		return starlark.String(c.an.ws.Name), nil
	case "bin_dir", "genfiles_dir":
		return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{"path": starlark.String(c.an.ws.BinDir())}), nil
	case "build_file_path":
		return starlark.String(path.Join(c.pkg.Name, "BUILD")), nil
	case "var":
		return c.an.ws.makeVars(), nil
	case "runfiles":
		return starlark.NewBuiltin("runfiles", c.runfiles), nil
	case "expand_location":
		return starlark.NewBuiltin("expand_location", c.expandLocationBuiltin), nil
	case "features", "disabled_features":
		return features(append(slices.Clone(c.an.ws.cfg.Features), c.def.Features...), name == "disabled_features"), nil
	case "split_attr":
		return mod("split_attr", c.splitAttr), nil
	case "fragments":
		copts := stringsValue(c.an.ws.cfg.Copts)
		copts.Freeze()
		return mod("fragments", starlark.StringDict{"cpp": mod("cpp", starlark.StringDict{
			"copts":            copts,
			"compilation_mode": starlark.String(c.an.ws.compilationMode()),
		})}), nil
	case "toolchains":
		return c.toolchains, nil
	case "rule":
		if c.aspect == nil {
			return nil, fmt.Errorf("ctx.rule is an aspect's: %s is a rule's context", c.def.Label)
		}
		return c.aspect, nil
	case "build_setting_value":
		if c.def.Rule.setting == nil {
			return nil, fmt.Errorf("ctx.build_setting_value: %s is not a build setting", c.def.Label)
		}
		return c.an.ws.buildSettingValue(c.def)
	}
	return c.moreAttr(name)
}

// features lists the features enabled by --features and a target's
// features attribute, those neither turns off ("-name"), or with disabled
// those turned off; each once.
func features(all []string, disabled bool) *starlark.List {
	out := []starlark.Value{}
	seen := map[string]bool{}
	for _, f := range all {
		name, off := strings.CutPrefix(f, "-")
		if off != disabled || seen[name] || !disabled && slices.Contains(all, "-"+name) {
			continue
		}
		seen[name] = true
		out = append(out, starlark.String(name))
	}
	return starlark.NewList(out)
}

// makeVars are ctx.var: Bazel's make variables of the configuration and
// the --define values.
func (w *Workspace) makeVars() *starlark.Dict {
	d := starlark.NewDict(2 + len(w.cfg.Defines))
	for _, k := range sortedStrings(w.cfg.Defines) {
		d.SetKey(starlark.String(k), starlark.String(w.cfg.Defines[k]))
	}
	d.SetKey(starlark.String("COMPILATION_MODE"), starlark.String(w.compilationMode()))
	d.SetKey(starlark.String("TARGET_CPU"), starlark.String(w.cpu()))
	tc := systemCC()
	if tc.err == nil {
		d.SetKey(starlark.String("CC"), starlark.String(strings.Join(tc.cc, " ")))
		d.SetKey(starlark.String("CXX"), starlark.String(strings.Join(tc.cxx, " ")))
		d.SetKey(starlark.String("AR"), starlark.String(tc.ar[0]))
	}
	return d
}

func (c *ruleContext) runfiles(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var files *starlark.List
	var transitive *Depset
	var collectData, collectDefault bool
	var symlinks, rootSymlinks starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "files?", &files, "transitive_files?", &transitive,
		"collect_data?", &collectData, "collect_default?", &collectDefault, "symlinks?", &symlinks, "root_symlinks?", &rootSymlinks); err != nil {
		return nil, err
	}
	r := emptyRunfiles()
	d := r.files
	if transitive != nil {
		d.transitive = append(d.transitive, transitive)
	}
	var err error
	if r.symlinks, err = symlinkDepset("symlinks", symlinks); err != nil {
		return nil, err
	}
	if r.rootSymlinks, err = symlinkDepset("root_symlinks", rootSymlinks); err != nil {
		return nil, err
	}
	if files != nil {
		for i := 0; i < files.Len(); i++ {
			f, ok := files.Index(i).(*File)
			if !ok {
				return nil, fmt.Errorf("runfiles: files must be Files, got %s", files.Index(i).Type())
			}
			d.direct = append(d.direct, f)
		}
	}
	if !collectData && !collectDefault {
		return r, nil
	}
	all := []*Runfiles{r}
	for _, name := range []string{"data", "deps", "srcs"} {
		for _, dep := range c.attrTargets(name) {
			all = append(all, dep.runfiles())
		}
	}
	return mergeRunfiles(all), nil
}

// attrTargets returns the analysed targets of a label attribute.
func (c *ruleContext) attrTargets(name string) []*Configured {
	a := c.def.Rule.attrs[name]
	if a == nil || !a.isLabel() {
		return nil
	}
	var out []*Configured
	for _, s := range a.labels(c.values[name]) {
		l, err := label.ParseRelative(s, c.pkg.Name)
		if err == nil {
			out = append(out, c.deps[l.String()])
		}
	}
	return out
}

func labelStrings(v starlark.Value) []string {
	switch x := v.(type) {
	case *Selector:
		// Every label it may take (for query; analysis resolves it first).
		var out []string
		for _, p := range x.parts {
			values := []starlark.Value{p}
			if d, ok := p.(*selectDict); ok {
				values = d.values
			}
			for _, v := range values {
				out = append(out, labelStrings(v)...)
			}
		}
		return out
	case starlark.String:
		if x == "" {
			return nil
		}
		return []string{string(x)}
	case Label:
		return []string{x.String()}
	case *starlark.List:
		var out []string
		for i := 0; i < x.Len(); i++ {
			out = append(out, labelStrings(x.Index(i))...)
		}
		return out
	}
	return nil
}

var locationRef = regexp.MustCompile(`\$\((location|locations|execpath|execpaths|rootpath|rootpaths)\s+([^)]+)\)`)

func (c *ruleContext) expandLocationBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var input string
	var targets *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "input", &input, "targets?", &targets); err != nil {
		return nil, err
	}
	s, err := c.expandLocation(input)
	if err != nil {
		return nil, fmt.Errorf("expand_location: %v", err)
	}
	return starlark.String(s), nil
}

// expandLocation replaces $(location //x), $(execpaths :y) and friends with
// the paths of the files of targets named in the rule's attributes.
func (c *ruleContext) expandLocation(s string) (string, error) {
	var firstErr error
	out := locationRef.ReplaceAllStringFunc(s, func(m string) string {
		parts := locationRef.FindStringSubmatch(m)
		kind, ref := parts[1], strings.TrimSpace(parts[2])
		l, err := label.ParseRelative(ref, c.pkg.Name)
		if err != nil {
			firstErr = err
			return m
		}
		var files []*File
		if dep, ok := c.deps[l.String()]; ok {
			files = dep.Files
			if dep.Executable != nil {
				files = []*File{dep.Executable}
			}
		} else if out, ok := c.declared[path.Join(l.Pkg, l.Name)]; ok && l.Repo == c.def.Label.Repo && l.Pkg == c.def.Label.Pkg {
			// An output of the target itself, as genrule's outs.
			files = []*File{out}
		} else {
			firstErr = fmt.Errorf("label %s in $(%s) is not declared in the attributes of %s", l, kind, c.def.Label)
			return m
		}
		if !strings.HasSuffix(kind, "s") && len(files) != 1 {
			firstErr = fmt.Errorf("$(%s %s) expands to %d files; use $(%ss %s)", kind, ref, len(files), kind, ref)
			return m
		}
		paths := make([]string, len(files))
		for i, f := range files {
			if strings.HasPrefix(kind, "rootpath") {
				paths[i] = f.ShortPath
			} else {
				paths[i] = f.Path()
			}
		}
		return strings.Join(paths, " ")
	})
	return out, firstErr
}

// declare makes a generated file of this target.
func (c *ruleContext) declare(name string, dir bool) (*File, error) {
	if c.frozen {
		return nil, fmt.Errorf("files can only be declared during analysis")
	}
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
		return nil, fmt.Errorf("invalid file name %q", name)
	}
	short := path.Join(c.pkg.Name, name)
	if f, ok := c.declared[short]; ok {
		return f, nil
	}
	f := &File{ShortPath: short, Generated: true, Bin: c.an.ws.BinDir(), Owner: c.def.Label, IsDirectory: dir}
	c.declared[short] = f
	return f, nil
}

func (c *ruleContext) actionsModule() starlark.Value {
	b := func(name string, fn func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) starlark.Value {
		return starlark.NewBuiltin(name, fn)
	}
	return starlarkstruct.FromStringDict(starlark.String("actions"), starlark.StringDict{
		"declare_file":      b("declare_file", c.declareFile),
		"declare_directory": b("declare_directory", c.declareDirectory),
		"write":             b("write", c.write),
		"run":               b("run", c.run),
		"run_shell":         b("run_shell", c.runShell),
		"symlink":           b("symlink", c.symlink),
		"expand_template":   b("expand_template", c.expandTemplate),
		"args":              b("args", newArgs),
	})
}

func (c *ruleContext) declareFile(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var sibling *File
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "filename", &name, "sibling?", &sibling); err != nil {
		return nil, err
	}
	if sibling != nil {
		rel := strings.TrimPrefix(path.Join(path.Dir(sibling.ShortPath), name), c.pkg.Name+"/")
		name = rel
	}
	return c.declare(name, false)
}

func (c *ruleContext) declareDirectory(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "filename", &name); err != nil {
		return nil, err
	}
	return c.declare(name, true)
}

func (c *ruleContext) write(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var out *File
	var content starlark.Value
	var executable bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "output", &out, "content", &content, "is_executable?", &executable); err != nil {
		return nil, err
	}
	text, ok := starlark.AsString(content)
	if !ok {
		a, isArgs := content.(*Args)
		if !isArgs {
			return nil, fmt.Errorf("write: content must be a string or Args, got %s", content.Type())
		}
		return starlark.None, c.addAction(a.writeAction(out, executable))
	}
	return starlark.None, c.addAction(&Action{Mnemonic: "FileWrite", Outputs: []*File{out}, Write: true, Content: text, Executable: executable})
}

func (c *ruleContext) symlink(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var out, target *File
	var executable bool
	var progress string
	var targetPath starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "output", &out, "target_file?", &target, "target_path?", &targetPath,
		"is_executable?", &executable, "progress_message?", &progress); err != nil {
		return nil, err
	}
	if target == nil {
		return nil, fmt.Errorf("symlink: target_file is required")
	}
	return starlark.None, c.addAction(&Action{Mnemonic: "Symlink", Progress: progress, Outputs: []*File{out}, Inputs: []*File{target}, Copy: target, Executable: executable})
}

// expandTemplate is ctx.actions.expand_template: output is template's
// content with each key of substitutions replaced by its value, in the
// dict's order. The template is an input, read when the action runs, so it
// may be a generated file.
func (c *ruleContext) expandTemplate(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var template, out *File
	var subs *starlark.Dict
	var executable bool
	var computed starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "template", &template, "output", &out, "substitutions?", &subs,
		"is_executable?", &executable, "computed_substitutions?", &computed); err != nil {
		return nil, err
	}
	if computed != nil && computed != starlark.None {
		return nil, fmt.Errorf("expand_template: computed_substitutions (%s) is not supported by rbs; give the values in substitutions", computed.Type())
	}
	if template.IsDirectory {
		return nil, fmt.Errorf("expand_template: template %s is a directory, not a file", template.ShortPath)
	}
	act := &Action{Mnemonic: templateMnemonic, Progress: "Expanding template " + out.ShortPath, Outputs: []*File{out},
		Inputs: []*File{template}, Copy: template, Executable: executable}
	if subs != nil {
		for _, kv := range subs.Items() {
			k, ok := kv[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("expand_template: substitutions: key %s is a %s, want a string", kv[0], kv[0].Type())
			}
			v, ok := kv[1].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("expand_template: substitutions: the value of %q is a %s (%s), want a string", string(k), kv[1].Type(), kv[1])
			}
			if k == "" {
				return nil, fmt.Errorf("expand_template: substitutions: a key is the empty string (its value %q)", string(v))
			}
			act.Substitutions = append(act.Substitutions, Substitution{string(k), string(v)})
		}
	}
	return starlark.None, c.addAction(act)
}

// actionArgs holds the arguments common to run and run_shell.
type actionArgs struct {
	outputs, inputs, tools, arguments starlark.Value
	mnemonic, progress                string
	env                               *starlark.Dict
}

func (c *ruleContext) collect(a *actionArgs) (*Action, error) {
	act := &Action{Mnemonic: a.mnemonic, Progress: a.progress, Env: map[string]string{"PATH": defaultPath}}
	if c.an.ws.outDir != "" {
		act.Platform = c.an.ws.Platform
	}
	if act.Mnemonic == "" {
		act.Mnemonic = "Action"
	}
	outs, err := fileList("outputs", a.outputs)
	if err != nil {
		return nil, err
	}
	if len(outs) == 0 {
		return nil, fmt.Errorf("an action must have outputs")
	}
	act.Outputs = outs
	for _, name := range []string{"inputs", "tools"} {
		v := a.inputs
		if name == "tools" {
			v = a.tools
		}
		fs, err := fileList(name, v)
		if err != nil {
			return nil, err
		}
		act.Inputs = append(act.Inputs, fs...)
		if name == "tools" {
			for _, f := range fs {
				c.withTool(act, f)
			}
		}
	}
	if a.env != nil {
		for _, kv := range a.env.Items() {
			k, _ := starlark.AsString(kv[0])
			v, _ := starlark.AsString(kv[1])
			act.Env[k] = v
		}
	}
	return act, nil
}

// withTool gives act the runfiles tree of tool, when it has one.
func (c *ruleContext) withTool(act *Action, tool *File) {
	if tree := c.an.runfile[tool.Path()]; len(tree) > 0 {
		addTree(act, tool, tree)
	}
}

// addTree lays out tree, the runfiles of tool, beside it for act.
func addTree(act *Action, tool *File, tree []Runfile) {
	if act.ToolTrees == nil {
		act.ToolTrees = map[string][]Runfile{}
	}
	act.ToolTrees[tool.Path()] = tree
	act.Inputs = append(act.Inputs, RunfileFiles(tree)...)
}

func fileList(what string, v starlark.Value) ([]*File, error) {
	switch x := v.(type) {
	case nil, starlark.NoneType:
		return nil, nil
	case *Depset:
		return x.Files(), nil
	case *starlark.List:
		var out []*File
		for i := 0; i < x.Len(); i++ {
			switch e := x.Index(i).(type) {
			case *File:
				out = append(out, e)
			case *Depset:
				out = append(out, e.Files()...)
			default:
				return nil, fmt.Errorf("%s: want Files, got %s", what, e.Type())
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: want a list or depset of Files, got %s", what, v.Type())
}

// argStrings is the command line the list v gives: strings, Files (their
// paths) and Args. An Args that asks for a param file gets one (see
// paramFiles) when act, the action it is for, is given. late, when not
// nil, makes the command line again with the directories its Args expand
// listed, when the action runs.
func (c *ruleContext) argStrings(v starlark.Value, act *Action) (args []string, late func(Expander) ([]string, error), err error) {
	l, ok := v.(*starlark.List)
	if v == nil || v == starlark.None {
		return nil, nil, nil
	}
	if !ok {
		return nil, nil, fmt.Errorf("arguments: want a list, got %s", v.Type())
	}
	var parts [][]string
	var withFiles []int          // the parts of Args that may go to a param file
	lateParts := map[int]*Args{} // the parts that expand directories
	for i := 0; i < l.Len(); i++ {
		switch e := l.Index(i).(type) {
		case *Args:
			if e.paramArg != "" && act != nil {
				withFiles = append(withFiles, len(parts))
			}
			if len(e.late) > 0 {
				lateParts[len(parts)] = e
			}
			parts = append(parts, e.items)
		default:
			parts = append(parts, []string{argString(e)})
		}
	}
	if len(withFiles) > 0 {
		if err := c.paramFiles(act, l, parts, withFiles, lateParts); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range parts {
		args = append(args, p...)
	}
	if len(lateParts) == 0 {
		return args, nil, nil
	}
	return args, func(list Expander) ([]string, error) {
		var out []string
		for i, p := range parts {
			if a := lateParts[i]; a != nil {
				words, err := a.Expanded(list)
				if err != nil {
					return nil, err
				}
				p = words
			}
			out = append(out, p...)
		}
		return out, nil
	}, nil
}

// setArgs sets act's command line: prefix, then rest, which late (when not
// nil) makes again when the action runs (see argStrings).
func setArgs(act *Action, prefix, rest []string, late func(Expander) ([]string, error)) {
	act.Args = append(slices.Clip(prefix), rest...)
	if late != nil {
		act.LateArgs = func(list Expander) ([]string, error) {
			r, err := late(list)
			return append(slices.Clip(prefix), r...), err
		}
	}
}

func (c *ruleContext) run(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var a actionArgs
	var executable starlark.Value
	var useEnv bool
	var reqs, resourceSet, toolchain, execGroup, inputManifests starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "outputs", &a.outputs, "inputs?", &a.inputs, "executable", &executable,
		"tools?", &a.tools, "arguments?", &a.arguments, "mnemonic?", &a.mnemonic, "progress_message?", &a.progress,
		"use_default_shell_env?", &useEnv, "env?", &a.env, "execution_requirements?", &reqs, "input_manifests?", &inputManifests,
		"exec_group?", &execGroup, "resource_set?", &resourceSet, "toolchain?", &toolchain); err != nil {
		return nil, err
	}
	act, err := c.collect(&a)
	if err != nil {
		return nil, fmt.Errorf("run: %v", err)
	}
	if err := c.withManifests(act, inputManifests); err != nil {
		return nil, fmt.Errorf("run: %v", err)
	}
	switch e := executable.(type) {
	case *File:
		act.Args = []string{e.Path()}
		act.Inputs = append(act.Inputs, e)
		c.withTool(act, e)
	case starlark.String:
		act.Args = []string{string(e)}
	default:
		return nil, fmt.Errorf("run: executable must be a File or a string, got %s", executable.Type())
	}
	rest, late, err := c.argStrings(a.arguments, act)
	if err != nil {
		return nil, fmt.Errorf("run: %v", err)
	}
	setArgs(act, act.Args, rest, late)
	return starlark.None, c.addAction(act)
}

func (c *ruleContext) runShell(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var a actionArgs
	var command starlark.Value
	var useEnv bool
	var reqs, resourceSet, toolchain, execGroup, inputManifests starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "outputs", &a.outputs, "inputs?", &a.inputs, "tools?", &a.tools,
		"arguments?", &a.arguments, "mnemonic?", &a.mnemonic, "command", &command, "progress_message?", &a.progress,
		"use_default_shell_env?", &useEnv, "env?", &a.env, "execution_requirements?", &reqs, "input_manifests?", &inputManifests,
		"exec_group?", &execGroup, "resource_set?", &resourceSet, "toolchain?", &toolchain); err != nil {
		return nil, err
	}
	act, err := c.collect(&a)
	if err != nil {
		return nil, fmt.Errorf("run_shell: %v", err)
	}
	if err := c.withManifests(act, inputManifests); err != nil {
		return nil, fmt.Errorf("run_shell: %v", err)
	}
	cmd, ok := starlark.AsString(command)
	if !ok {
		parts, _, err := c.argStrings(command, nil)
		if err != nil || len(parts) == 0 {
			return nil, fmt.Errorf("run_shell: command must be a string")
		}
		cmd = strings.Join(parts, " ")
	}
	rest, late, err := c.argStrings(a.arguments, act)
	if err != nil {
		return nil, fmt.Errorf("run_shell: %v", err)
	}
	prefix := []string{"/bin/bash", "-c", cmd}
	if len(rest) > 0 {
		prefix = append(prefix, "")
	}
	setArgs(act, prefix, rest, late)
	return starlark.None, c.addAction(act)
}

// addAction records an action after checking that its outputs belong to
// this target and are not produced twice.
func (c *ruleContext) addAction(a *Action) error {
	a.Owner = c.def.Label
	for _, o := range a.Outputs {
		if !o.Generated || o.Owner != c.def.Label {
			return fmt.Errorf("%s: an action can only output files that %s declared, not %s", c.def.Label, c.def.Label, o.ShortPath)
		}
		for _, other := range c.actions {
			for _, oo := range other.Outputs {
				if oo.ShortPath == o.ShortPath {
					return fmt.Errorf("%s: output %s is produced by two actions (%s and %s)", c.def.Label, o.ShortPath, other.Mnemonic, a.Mnemonic)
				}
			}
		}
	}
	c.actions = append(c.actions, a)
	return nil
}
