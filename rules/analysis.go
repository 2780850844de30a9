package rules

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"github.com/rbs-build/rbs/starlark/loader"
	"github.com/rbs-build/rbs/starlark/spell"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Configured is an analysed target: its providers, its default files and
// executable, and the actions it registered.
type Configured struct {
	Label      label.Label
	Def        *TargetDef // nil for a source or generated file
	Providers  map[*Provider]*ProviderInstance
	Files      []*File
	Executable *File
	Runfiles   *Runfiles
	Actions    []*Action
}

func (c *Configured) runfiles() *Runfiles {
	if c.Runfiles == nil {
		return emptyRunfiles()
	}
	return c.Runfiles
}

func (c *Configured) defaultInfo() *ProviderInstance {
	fields := starlark.StringDict{
		"files":            newDepset(c.Files),
		"runfiles":         c.runfiles(),
		"default_runfiles": c.runfiles(),
		"data_runfiles":    c.runfiles(),
		"executable":       starlark.None,
	}
	if c.Executable != nil {
		fields["executable"] = c.Executable
		fields["files_to_run"] = starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{"executable": c.Executable})
	}
	return &ProviderInstance{p: defaultInfo, fields: fields}
}

// analyzer analyses targets once each in each configuration, depth
// first, detecting cycles: ws is the configuration it analyses in, and
// the state is shared by the analyzers of every configuration.
type analyzer struct {
	*analysisState
	ws *Workspace
}

// in is the analyzer of configuration w.
func (an *analyzer) in(w *Workspace) *analyzer {
	if w == an.ws {
		return an
	}
	return &analyzer{analysisState: an.analysisState, ws: w}
}

// analysisState is what the analyzers of one analysis share.
type analysisState struct {
	done    map[string]*Configured // by configuration and label (targetKey)
	stack   []string
	byFile  map[string]*File     // every generated file by exec path
	runfile map[string][]Runfile // an executable's runfiles tree by exec path
	actions map[string]*Action   // producing action by output exec path
	scan    *includeScan
	// aspects are the aspects' results by aspect and target; nil while
	// one is being worked out.
	aspects map[string]*aspectResult
	// toolchains are the registered toolchains and platforms, read on
	// first use.
	toolchains *toolchainSetup
	// repoFiles are the files of local repositories analysis read, as
	// absolute paths.
	repoFiles []string
	// started is when analysis began: the build's BUILD_TIMESTAMP.
	started time.Time
}

// analyzerKey is the thread local holding the analyzer while a rule's
// implementation runs.
const analyzerKey = "rbs.analyzer"

// targetKey is how configured target l of configuration w is known: its
// label in the build's own configuration, else the label after the
// configuration's output directory.
func (w *Workspace) targetKey(l label.Label) string {
	if w.outDir == "" {
		return l.String()
	}
	return w.outDir + " " + l.String()
}

// analyze returns the configured target for a label.
func (an *analyzer) analyze(l label.Label) (*Configured, error) {
	return an.analyzeEdge(l, true)
}

// analyzeEdge is analyze, with the transition of the target's rule taken
// when incoming is set: the target is then analysed in the configuration
// it makes.
func (an *analyzer) analyzeEdge(l label.Label, incoming bool) (*Configured, error) {
	l = canonical(l)
	key := an.ws.targetKey(l)
	if c, ok := an.done[key]; ok {
		return c, nil
	}
	for i, s := range an.stack {
		if s == key {
			return nil, fmt.Errorf("dependency cycle: %s", strings.Join(append(an.stack[i:], key), " -> "))
		}
	}
	pkg, err := an.ws.Package(l.Pkg)
	if err != nil {
		return nil, err
	}
	def, ok := pkg.Targets[l.Name]
	if !ok && pkg.fsys != nil {
		c, err := an.externalFile(pkg, l)
		if err != nil {
			return nil, err
		}
		an.done[key] = c
		return c, nil
	}
	if !ok {
		c, err := an.file(pkg, l)
		if err != nil {
			return nil, err
		}
		an.done[key] = c
		return c, nil
	}
	if incoming && def.Rule.cfg != nil {
		to, err := an.incoming(def)
		if err != nil {
			return nil, err
		}
		if to != an.ws {
			c, err := an.in(to).analyzeEdge(l, false)
			if err != nil {
				return nil, err
			}
			an.done[key] = c
			return c, nil
		}
	}
	an.stack = append(an.stack, key)
	var c *Configured
	if isAlias(def.Rule) {
		c, err = an.alias(def)
	} else {
		c, err = an.configure(pkg, def)
	}
	an.stack = an.stack[:len(an.stack)-1]
	if err != nil {
		return nil, err
	}
	an.done[key] = c
	return c, nil
}

// file returns the target of a label that names a file: a generated file
// of a rule in its package, or a source file that must exist.
func (an *analyzer) file(pkg *Package, l label.Label) (*Configured, error) {
	if owner, ok := pkg.Outputs[l.Name]; ok {
		oc, err := an.analyze(label.Label{Pkg: pkg.Name, Name: owner})
		if err != nil {
			return nil, err
		}
		short := path.Join(pkg.Name, l.Name)
		for _, a := range oc.Actions {
			for _, o := range a.Outputs {
				if o.ShortPath == short {
					return &Configured{Label: l, Files: []*File{o}}, nil
				}
			}
		}
		return nil, fmt.Errorf("%s declares output %s but no action of it produces it", oc.Label, l)
	}
	info, err := os.Stat(filepath.Join(pkg.Dir, filepath.FromSlash(l.Name)))
	if err != nil || info.IsDir() {
		return nil, fmt.Errorf("no such target %s: no rule named %q in package %q and no file of that name%s", l, l.Name, pkg.Name, spell.DidYouMean(l.Name, sortedTargetNames(pkg)))
	}
	// A file in a subpackage belongs to that package.
	for dir := path.Dir(l.Name); dir != "."; dir = path.Dir(dir) {
		if label.BuildFile(filepath.Join(pkg.Dir, filepath.FromSlash(dir))) != "" {
			return nil, fmt.Errorf("label %s crosses into package %s: use //%s:%s", l, path.Join(pkg.Name, dir), path.Join(pkg.Name, dir), strings.TrimPrefix(l.Name, dir+"/"))
		}
	}
	f := &File{ShortPath: path.Join(pkg.Name, l.Name), Owner: l}
	return &Configured{Label: l, Files: []*File{f}}, nil
}

// configure analyses a rule target: its dependencies first, then its
// implementation function.
func (an *analyzer) configure(pkg *Package, def *TargetDef) (*Configured, error) {
	ctx := an.newContext(pkg, def)
	attrs := starlark.StringDict{"name": starlark.String(def.Label.Name)}
	for _, name := range sortedKeys(def.Rule.attrs) {
		v, err := an.ws.configured(def.Label, def.Attrs[name])
		if err != nil {
			return nil, err
		}
		ctx.values[name] = v
	}
	if err := an.configDeps(def); err != nil {
		return nil, err
	}
	if err := an.fillAttrs(ctx, def.Rule.attrs, attrs); err != nil {
		return nil, err
	}
	if _, ok := def.Rule.attrs["tags"]; !ok {
		tags := make([]starlark.Value, len(def.Tags))
		for i, t := range def.Tags {
			tags[i] = starlark.String(t)
		}
		attrs["tags"] = starlark.NewList(tags)
	}
	if err := an.commonAttrs(def, attrs); err != nil {
		return nil, err
	}
	if def.Rule.executable {
		exe, err := ctx.declare(def.Label.Name, false)
		if err != nil {
			return nil, err
		}
		ctx.outputs["executable"] = exe
	}
	predeclared, err := def.predeclaredOutputs()
	if err != nil {
		return nil, err
	}
	for key, name := range predeclared {
		if ctx.outputs[key], err = ctx.declare(name, false); err != nil {
			return nil, err
		}
	}
	ctx.attr = newStruct(starlark.String("attr"), attrs)
	if ctx.toolchains, err = an.resolveToolchains(def.Label, def.Rule.Name(), def.Rule.toolchains); err != nil {
		return nil, err
	}

	thread := &starlark.Thread{Name: "analysis of " + def.Label.String(), Print: an.ws.debug}
	defer guard.Track(thread)()
	thread.SetLocal(analyzerKey, an)
	ret, err := starlark.Call(thread, def.Rule.impl, starlark.Tuple{ctx}, nil)
	if err != nil {
		return nil, fmt.Errorf("analysis of %s failed: %w", def.Label, loader.Describe(err))
	}
	ctx.frozen = true
	return an.finish(ctx, ret)
}

// newContext is an empty ctx for target def of pkg.
func (an *analyzer) newContext(pkg *Package, def *TargetDef) *ruleContext {
	return &ruleContext{
		an: an, def: def, pkg: pkg, declared: map[string]*File{}, deps: map[string]*Configured{}, values: map[string]starlark.Value{},
		file: starlark.StringDict{}, files: starlark.StringDict{}, exe: starlark.StringDict{}, outputs: starlark.StringDict{},
		splitAttr: starlark.StringDict{},
	}
}

// fillAttrs gives ctx the attributes attrDefs of its target, from
// ctx.values: label attributes analysed into Targets (with the providers
// of the aspects they carry), their files and executables, and outputs
// declared; attrs receives what ctx.attr shows.
func (an *analyzer) fillAttrs(ctx *ruleContext, attrDefs map[string]*Attr, attrs starlark.StringDict) error {
	def, pkg := ctx.def, ctx.pkg
	for _, name := range sortedKeys(attrDefs) {
		a := attrDefs[name]
		v := ctx.values[name]
		switch a.kind {
		case attrLabel, attrLabelList, attrLabelKeyedStringDict, attrStringKeyedLabelDict:
			var targets []starlark.Value
			var files []starlark.Value
			configs := []configuration{{ws: an.ws}}
			split := false
			if a.cfg != nil {
				var err error
				if configs, split, err = an.transition(a.cfg, transitionAttrs(def, ctx.values)); err != nil {
					return fmt.Errorf("%s: attribute %s: %v", def.Label, name, err)
				}
			}
			var splitTargets *starlark.Dict
			if split {
				splitTargets = starlark.NewDict(len(configs))
			}
			for _, cfg := range configs {
				dan := an.in(cfg.ws)
				var these []starlark.Value
				for _, s := range a.labels(v) {
					dl, err := label.ParseRelative(s, pkg.Name)
					if err != nil {
						return fmt.Errorf("%s: attribute %s: %v", def.Label, name, err)
					}
					dep, err := dan.analyze(dl)
					if err != nil && a.cfg != nil && a.cfg.allowFailures && !strings.HasPrefix(err.Error(), "dependency cycle") {
						dep, err = failedTarget(canonical(dl), err), nil
					}
					if err != nil {
						if strings.HasPrefix(err.Error(), "dependency cycle") {
							return err
						}
						return fmt.Errorf("%s: attribute %s: %w", def.Label, name, err)
					}
					if dep.Def == nil && !a.allowFiles && dep.Providers[analysisFailureInfo] == nil {
						return fmt.Errorf("%s: attribute %s: %s is a file, and the attribute takes no files (it has no allow_files)", def.Label, name, dl)
					}
					if missing := a.missingProviders(dep); missing != nil {
						return fmt.Errorf("%s: attribute %s: %s does not have the providers it needs: %s", def.Label, name, dl, strings.Join(missing, ", "))
					}
					ctx.deps[dl.String()] = dep
					extra, err := dan.aspectsOn(a.aspects, dl, dep)
					if err != nil {
						return err
					}
					these = append(these, &Target{configured: dep, extra: extra})
					for _, f := range dep.Files {
						files = append(files, f)
					}
					if a.executable {
						if dep.Executable == nil {
							return fmt.Errorf("%s: attribute %s: %s is not executable", def.Label, name, dl)
						}
						ctx.exe[name] = dep.Executable
					}
				}
				targets = append(targets, these...)
				if split {
					var shown starlark.Value = starlark.NewList(these)
					if a.kind == attrLabel {
						shown = starlark.None
						if len(these) == 1 {
							shown = these[0]
						}
					}
					splitTargets.SetKey(starlark.String(cfg.key), shown)
				}
			}
			ctx.files[name] = starlark.NewList(files)
			if split {
				ctx.splitAttr[name] = splitTargets
			}
			if a.kind == attrLabel && a.cfg != nil && !a.cfg.exec {
				// As in Bazel, a label that a Starlark transition
				// configures is a list of its targets: one for each
				// configuration.
				attrs[name] = starlark.NewList(targets)
				continue
			}
			if a.kind == attrLabel {
				attrs[name] = starlark.None
				if len(targets) == 1 {
					attrs[name] = targets[0]
				}
				if a.single {
					if len(files) > 1 {
						return fmt.Errorf("%s: attribute %s must name a single file, got %d", def.Label, name, len(files))
					}
					ctx.file[name] = starlark.None
					if len(files) == 1 {
						ctx.file[name] = files[0]
					}
				}
			} else if a.kind == attrLabelList {
				attrs[name] = starlark.NewList(targets)
			} else {
				d, err := targetDict(a, v, targets)
				if err != nil {
					return fmt.Errorf("%s: attribute %s: %v", def.Label, name, err)
				}
				attrs[name] = d
			}
		case attrOutput, attrOutputList:
			var outs []starlark.Value
			var labels []starlark.Value
			for _, s := range labelStrings(v) {
				f, err := ctx.declare(s, false)
				if err != nil {
					return fmt.Errorf("%s: attribute %s: %v", def.Label, name, err)
				}
				outs = append(outs, f)
				labels = append(labels, Label{label.Label{Pkg: pkg.Name, Name: s}})
			}
			if a.kind == attrOutput {
				attrs[name], ctx.outputs[name] = starlark.None, starlark.None
				if len(outs) == 1 {
					attrs[name], ctx.outputs[name] = labels[0], outs[0]
				}
			} else {
				attrs[name], ctx.outputs[name] = starlark.NewList(labels), starlark.NewList(outs)
			}
		default:
			attrs[name] = v
		}
	}
	return nil
}

// targetDict is what ctx.attr shows of a label_keyed_string_dict or
// string_keyed_label_dict value v: its labels replaced by their targets,
// which are in the order a.labels gives them.
func targetDict(a *Attr, v starlark.Value, targets []starlark.Value) (*starlark.Dict, error) {
	d, _ := v.(*starlark.Dict)
	out := starlark.NewDict(len(targets))
	if d == nil {
		return out, nil
	}
	for i, kv := range d.Items() {
		k, val := kv[0], kv[1]
		if a.kind == attrLabelKeyedStringDict {
			k = targets[i]
		} else {
			val = targets[i]
		}
		if err := out.SetKey(k, val); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// finish turns what an implementation returned into a Configured target and
// checks the actions it registered.
func (an *analyzer) finish(ctx *ruleContext, ret starlark.Value) (*Configured, error) {
	def := ctx.def
	c := &Configured{Label: def.Label, Def: def, Providers: map[*Provider]*ProviderInstance{}, Actions: ctx.actions}
	var infos []*ProviderInstance
	switch r := ret.(type) {
	case starlark.NoneType:
	case *ProviderInstance:
		infos = []*ProviderInstance{r}
	case *starlark.List:
		for i := 0; i < r.Len(); i++ {
			p, ok := r.Index(i).(*ProviderInstance)
			if !ok {
				return nil, fmt.Errorf("%s: the implementation must return providers, got %s", def.Label, r.Index(i).Type())
			}
			infos = append(infos, p)
		}
	default:
		return nil, fmt.Errorf("%s: the implementation must return a list of providers, got %s", def.Label, ret.Type())
	}
	var di *ProviderInstance
	for _, p := range infos {
		if p.p == defaultInfo {
			di = p
		} else {
			c.Providers[p.p] = p
		}
	}
	// Default outputs: DefaultInfo's files, else the predeclared outputs.
	if di != nil {
		if fs, ok := di.fields["files"].(*Depset); ok {
			c.Files = fs.Files()
		} else {
			c.Files = predeclared(ctx)
		}
		if e, ok := di.fields["executable"].(*File); ok {
			c.Executable = e
		}
		for _, k := range []string{"runfiles", "default_runfiles"} {
			if r, ok := di.fields[k].(*Runfiles); ok {
				c.Runfiles = r
			}
		}
	} else {
		c.Files = predeclared(ctx)
	}
	if def.Rule.analysisTest && ctx.aspect == nil {
		if err := analysisTestScript(ctx, c); err != nil {
			return nil, err
		}
	}
	if def.Rule.executable && c.Executable == nil && ctx.aspect == nil {
		c.Executable = ctx.outputs["executable"].(*File)
	}
	if c.Executable != nil && !containsFile(c.Files, c.Executable) {
		c.Files = append(c.Files, c.Executable)
	}
	// Every declared file must be produced by exactly one action.
	produced := map[string]bool{}
	for _, a := range ctx.actions {
		for _, o := range a.Outputs {
			if other := an.actions[o.Path()]; other != nil && other != a {
				return nil, fmt.Errorf("%s: %s is produced by two actions: %s and %s", def.Label, o.ShortPath, other.Description(), a.Description())
			}
			produced[o.ShortPath] = true
			an.actions[o.Path()] = a
			an.byFile[o.Path()] = o
		}
	}
	// The executable an executable rule gets by default is there only for
	// the rule to produce if it likes: one that names another file its
	// executable need not (as in Bazel, where it is declared when used).
	var unused string
	if pre, ok := ctx.outputs["executable"].(*File); ok && c.Executable != nil && c.Executable.ShortPath != pre.ShortPath {
		unused = pre.ShortPath
	}
	for _, short := range sortedFileKeys(ctx.declared) {
		if !produced[short] && short != unused {
			return nil, fmt.Errorf("%s declares %s but no action produces it", def.Label, short)
		}
	}
	if c.Executable != nil {
		// Bazel makes every output executable; rbs the executable a rule
		// names, when it writes it itself.
		for _, a := range ctx.actions {
			if (a.Write || a.Copy != nil) && a.Outputs[0] == c.Executable {
				a.Executable = true
			}
		}
		// An executable is in its own runfiles, as in Bazel: what merges
		// them (a tool of a tool) has it.
		own := emptyRunfiles()
		own.files = newDepset([]*File{c.Executable})
		c.Runfiles = mergeRunfiles([]*Runfiles{own, c.runfiles()})
		an.runfile[c.Executable.Path()] = c.Runfiles.layout(an.ws.Name, c.Executable)
	}
	return c, nil
}

// commonAttrs gives ctx.attr the attributes every rule has, as Bazel
// 4.2.3 shows them, unless the rule declares its own of the name: the
// BUILD file's values, else their defaults; the label lists among them as
// targets, visibility as labels.
func (an *analyzer) commonAttrs(def *TargetDef, attrs starlark.StringDict) error {
	empty := func() starlark.Value { return starlark.NewList(nil) }
	features := make([]starlark.Value, len(def.Features))
	for i, f := range def.Features {
		features[i] = starlark.String(f)
	}
	defaults := starlark.StringDict{
		"_action_listener": empty(), "_config_dependencies": empty(), "applicable_licenses": empty(), "compatible_with": empty(),
		"deprecation": starlark.None, "exec_compatible_with": empty(), "exec_properties": starlark.NewDict(0), "expect_failure": starlark.String(""),
		"features": starlark.NewList(features), "generator_function": starlark.String(""), "generator_location": starlark.String(""),
		"generator_name": starlark.String(""), "restricted_to": empty(), "target_compatible_with": empty(), "testonly": starlark.False,
		"toolchains": empty(), "transitive_configs": empty(), "visibility": empty(),
	}
	for name, v := range defaults {
		if _, own := def.Rule.attrs[name]; own {
			continue
		}
		attrs[name] = v
		given, ok := def.Common[name]
		if !ok || given == starlark.None {
			continue
		}
		given, err := an.ws.configured(def.Label, given)
		if err != nil {
			return err
		}
		switch name {
		case "visibility":
			ls, err := stringList(given)
			if err != nil {
				return fmt.Errorf("%s: visibility: %v", def.Label, err)
			}
			out := make([]starlark.Value, len(ls))
			for i, s := range ls {
				l, err := label.ParseRelative(s, def.Label.Pkg)
				if err != nil {
					return fmt.Errorf("%s: visibility: %v", def.Label, err)
				}
				out[i] = Label{l}
			}
			attrs[name] = starlark.NewList(out)
		case "compatible_with", "restricted_to", "target_compatible_with", "exec_compatible_with", "toolchains", "applicable_licenses":
			ls, err := stringList(given)
			if err != nil {
				return fmt.Errorf("%s: %s: %v", def.Label, name, err)
			}
			out := make([]starlark.Value, len(ls))
			for i, s := range ls {
				l, err := label.ParseRelative(s, def.Label.Pkg)
				if err != nil {
					return fmt.Errorf("%s: %s: %v", def.Label, name, err)
				}
				dep, err := an.analyze(l)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", def.Label, name, err)
				}
				out[i] = &Target{configured: dep}
			}
			attrs[name] = starlark.NewList(out)
		default:
			attrs[name] = given
		}
	}
	return nil
}

func predeclared(ctx *ruleContext) []*File {
	var out []*File
	for _, name := range sortedDictKeys(ctx.outputs) {
		switch v := ctx.outputs[name].(type) {
		case *File:
			if name != "executable" {
				out = append(out, v)
			}
		case *starlark.List:
			for i := 0; i < v.Len(); i++ {
				out = append(out, v.Index(i).(*File))
			}
		}
	}
	return out
}

func containsFile(fs []*File, f *File) bool {
	for _, x := range fs {
		if x.Path() == f.Path() {
			return true
		}
	}
	return false
}

func sortedFileKeys(m map[string]*File) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedDictKeys(d starlark.StringDict) []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
