package rules

import (
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/starlark/label"
	"github.com/rbs-build/rbs/starlark/loader"
	"github.com/rbs-build/rbs/starlark/spell"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkjson"
	"go.starlark.net/starlarkstruct"
)

// Embedded holds the Starlark files served as the @rbs repository, such as
// @rbs//python/rules.rbs.
//
//go:embed builtin/*.rbs python/*.rbs job/*.rbs cc/*.rbs java/*.rbs
var Embedded embed.FS

// wellKnown holds, one directory each, the repositories that BUILD files
// written for Bazel load from (@rules_shell, @rules_python,
// @bazel_skylib …), in rbs's own terms: their files give rbs's rules under
// the names those repositories use, so nothing is fetched.
//
//go:embed all:wellknown
var wellKnown embed.FS

// repositories are the repositories load() reaches: @rbs and the
// well-known ones, found once.
var repositories = sync.OnceValue(func() map[string]fs.FS {
	repos := map[string]fs.FS{"rbs": Embedded}
	dirs, err := wellKnown.ReadDir("wellknown")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	for _, d := range dirs {
		sub, err := fs.Sub(wellKnown, "wellknown/"+d.Name())
		if err != nil {
			panic(err)
		}
		repos[d.Name()] = sub
	}
	return repos
})

// builtinModules are loaded into every BUILD file's globals.
var builtinModules = []loader.Module{
	{Repo: "rbs", Path: "builtin/rules.rbs"},
	{Repo: "rbs", Path: "python/rules.rbs"},
	{Repo: "rbs", Path: "cc/rules.rbs"},
	{Repo: "rbs", Path: "java/rules.rbs"},
}

// Workspace is a source tree with its packages, loaded on demand, in one
// configuration: the build's, or one a transition made (see
// transition.go), which shares the tree with it.
type Workspace struct {
	*tree
	// Platform is the target platform: select() picks its branches by it,
	// and generated files live under its BinDir.
	Platform platform.Platform
	cfg      Config
	// outDir names a configuration a transition made: its generated files
	// live in rbs-out/OUTDIR/bin. It is "" for the build's own.
	outDir string
}

// tree is what the configurations of a workspace share: its files, its
// packages and the modules they load.
type tree struct {
	Root string
	// Name is the main repository's name in runfiles trees and
	// ctx.workspace_name: _main in a workspace with a MODULE.bazel, as
	// under Bazel's modules, else WORKSPACE's workspace(name), else
	// __main__.
	Name   string
	loader *loader.Loader
	// native and build (the predeclared names of BUILD files) are made
	// with the built-in rules, once the first package is evaluated: a
	// command answered without loading never evaluates them.
	builtins    sync.Once
	builtinsErr error
	native      *starlarkstruct.Struct
	build       starlark.StringDict

	mu   sync.Mutex
	pkgs map[string]*pkgEntry

	// reg is what the workspace files register.
	reg registrations
	// configs are the configurations transitions made, by outDir
	// (guarded by mu).
	configs map[string]*Workspace
	// repos are the repositories load() and labels reach: rbs's own and
	// the workspace's local ones.
	repos map[string]fs.FS
}

type pkgEntry struct {
	ready chan struct{}
	pkg   *Package
	err   error
}

// Open prepares the workspace at root (see label.FindWorkspace) for the
// configuration cfg.
func Open(root string, cfg Config) (*Workspace, error) {
	if cfg.Platform.IsZero() {
		cfg.Platform = platform.Host()
	}
	reg, err := readRegistrations(root)
	if err != nil {
		return nil, err
	}
	w := &Workspace{tree: &tree{Root: root, Name: reg.mainRepo, pkgs: map[string]*pkgEntry{}, reg: reg, configs: map[string]*Workspace{}},
		Platform: cfg.Platform, cfg: cfg}
	// A registry's modules first: their MODULE.bazel may use extensions.
	modules, err := w.registryModules()
	if err != nil {
		return nil, err
	}
	for name, r := range w.ruleRepos() {
		// A repository rbs provides itself (@bazel_skylib, @rules_cc, ...)
		// is rbs's copy, whatever rule declares it, as before rules could.
		if _, own := repositories()[name]; own {
			continue
		}
		if _, given := w.reg.repos[name]; !given {
			if w.reg.repos == nil {
				w.reg.repos = map[string]localRepo{}
			}
			w.reg.repos[name] = r
		}
	}
	for name, r := range modules {
		if w.reg.repos == nil {
			w.reg.repos = map[string]localRepo{}
		}
		w.reg.repos[name] = r
	}
	w.repos = repoSet(w.reg.repos)
	w.loader = loader.New(root, w.repos, w.moduleEnv, nameRules)
	w.loader.Print = w.debug
	if cfg.Platforms != "" {
		// --platforms: its platform's OS and CPU are the platform built
		// for.
		p, err := w.targetPlatform()
		if err != nil {
			return nil, err
		}
		if w.Platform, err = platformOf(p); err != nil {
			return nil, fmt.Errorf("--platforms: %v", err)
		}
		w.cfg.Platform = w.Platform
	}
	return w, nil
}

// loadBuiltins evaluates the built-in rules, once, for BUILD files and
// native.*.
func (w *Workspace) loadBuiltins() error {
	w.builtins.Do(func() {
		nativeMembers := w.nativeFunctions()
		nativeMembers["config_setting"] = configSettingRule
		nativeMembers["alias"] = aliasRule
		nativeMembers["label_flag"] = labelFlag
		nativeMembers["label_setting"] = labelSetting
		nativeMembers["toolchain"] = toolchainRule
		build := starlark.StringDict{}
		for k, v := range nativeMembers {
			build[k] = v
		}
		for _, m := range builtinModules {
			globals, err := w.loader.Load(m)
			if err != nil {
				w.builtinsErr = fmt.Errorf("loading built-in rules %s: %w", m, err)
				return
			}
			for name, v := range globals {
				if r, ok := v.(*RuleClass); ok {
					nativeMembers[name] = r
					build[name] = r
				}
			}
		}
		for k, v := range w.common() {
			build[k] = v
		}
		w.native = starlarkstruct.FromStringDict(starlark.String("native"), nativeMembers)
		w.build = build
	})
	return w.builtinsErr
}

// nameRules gives each rule, provider, macro and aspect a module exports
// its global name, as Bazel does.
func nameRules(_ loader.Module, globals starlark.StringDict) {
	for name, v := range globals {
		if x, ok := v.(exported); ok {
			x.export(name)
		}
	}
}

// exported is a value that takes the name of the global it is first
// exported as.
type exported interface{ export(name string) }

func (r *RuleClass) export(name string) {
	if r.name == "" {
		r.name = name
	}
}

func (p *Provider) export(name string) {
	if p.name == "provider" {
		p.name = name
	}
}

func (m *MacroClass) export(name string) {
	if m.name == "" {
		m.name = name
	}
}

func (a *AspectClass) export(name string) {
	if a.name == "" {
		a.name = name
	}
}

// common are the names both BUILD files and rule files see.
func (w *Workspace) common() starlark.StringDict {
	return starlark.StringDict{
		"struct":      starlark.NewBuiltin("struct", structBuiltin),
		"depset":      starlark.NewBuiltin("depset", depsetBuiltin),
		"Label":       starlark.NewBuiltin("Label", labelBuiltin),
		"select":      starlark.NewBuiltin("select", w.selectBuiltin),
		"json":        starlarkjson.Module,
		"DefaultInfo": defaultInfo,
	}
}

// moduleEnv is what .rbs and .bzl files see; rbs's own C/C++ rules also
// see the toolchain and the include scanner, and the local toolchains of
// @bazel_tools see this machine's C/C++ toolchain and shell.
func (w *Workspace) moduleEnv(m loader.Module) starlark.StringDict {
	env := w.common()
	if m.Repo == "bazel_tools" && m.Path == "tools/local_toolchains.bzl" {
		env["cc_toolchain"] = starlark.NewBuiltin("cc_toolchain", ccToolchainBuiltin)
		env["shell_path"] = starlark.NewBuiltin("shell_path", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.String(shellPath()), nil
		})
	}
	if m.Repo == "rbs" && m.Path == "cc/rules.rbs" {
		env["cc_toolchain"] = starlark.NewBuiltin("cc_toolchain", ccToolchainBuiltin)
		env["cc_shell_split"] = starlark.NewBuiltin("cc_shell_split", shellSplitBuiltin)
		env["cc_scan_includes"] = starlark.NewBuiltin("cc_scan_includes", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			an, ok := t.Local(analyzerKey).(*analyzer)
			if !ok {
				return nil, fmt.Errorf("%s: only during analysis", b.Name())
			}
			return an.ccScanIncludes(t, b, args, kwargs)
		})
	}
	env["rule"] = starlark.NewBuiltin("rule", ruleBuiltin)
	env["attr"] = attrModule()
	env["provider"] = starlark.NewBuiltin("provider", providerBuiltin)
	env["platform_common"] = platformCommon
	env["config"] = configModule()
	env["config_common"] = configCommon
	env["repository_rule"] = starlark.NewBuiltin("repository_rule", repositoryRuleBuiltin)
	env["module_extension"] = starlark.NewBuiltin("module_extension", moduleExtensionBuiltin)
	env["tag_class"] = starlark.NewBuiltin("tag_class", tagClassBuiltin)
	env["transition"] = starlark.NewBuiltin("transition", transitionBuiltin)
	env["analysis_test_transition"] = starlark.NewBuiltin("analysis_test_transition", analysisTestTransition)
	env["AnalysisTestResultInfo"] = analysisTestResultInfo
	env["AnalysisFailureInfo"] = analysisFailureInfo
	env["macro"] = starlark.NewBuiltin("macro", macroBuiltin)
	env["aspect"] = starlark.NewBuiltin("aspect", aspectBuiltin)
	if w.native != nil {
		env["native"] = w.native
	}
	return env
}

// nativeFunctions are the functions of native.* that are not rules.
func (w *Workspace) nativeFunctions() starlark.StringDict {
	return starlark.StringDict{
		"glob":          starlark.NewBuiltin("glob", globBuiltin),
		"exports_files": starlark.NewBuiltin("exports_files", exportsFiles),
		"package":       starlark.NewBuiltin("package", packageBuiltin),
		"package_name": starlark.NewBuiltin("package_name", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			pkg, err := currentPackage(t, b.Name())
			if err != nil {
				return nil, err
			}
			return starlark.String(pkg.Name), nil
		}),
		"licenses": starlark.NewBuiltin("licenses", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.None, nil
		}),
		"existing_rule":  starlark.NewBuiltin("existing_rule", existingRule),
		"existing_rules": starlark.NewBuiltin("existing_rules", existingRules),
	}
}

// existingRule is native.existing_rule(name): the attributes of the
// target name declared so far in the package, with its name and kind, or
// None.
func existingRule(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name); err != nil {
		return nil, err
	}
	pkg, err := currentPackage(t, b.Name())
	if err != nil {
		return nil, err
	}
	def, ok := pkg.Targets[name]
	if !ok {
		return starlark.None, nil
	}
	return ruleAttrs(def), nil
}

// existingRules is native.existing_rules(): existing_rule of each target
// declared so far, by name, in the order they were.
func existingRules(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	pkg, err := currentPackage(t, b.Name())
	if err != nil {
		return nil, err
	}
	out := starlark.NewDict(len(pkg.Order))
	for _, name := range pkg.Order {
		if def, ok := pkg.Targets[name]; ok {
			if err := out.SetKey(starlark.String(name), ruleAttrs(def)); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// ruleAttrs is a target's attributes as existing_rule gives them.
func ruleAttrs(def *TargetDef) *starlark.Dict {
	d := starlark.NewDict(len(def.Attrs) + 3)
	d.SetKey(starlark.String("name"), starlark.String(def.Label.Name))
	d.SetKey(starlark.String("kind"), starlark.String(def.Rule.Name()))
	tags := make([]starlark.Value, len(def.Tags))
	for i, tag := range def.Tags {
		tags[i] = starlark.String(tag)
	}
	d.SetKey(starlark.String("tags"), starlark.NewList(tags))
	for _, k := range slices.Sorted(maps.Keys(def.Attrs)) {
		d.SetKey(starlark.String(k), def.Attrs[k])
	}
	return d
}

func currentPackage(t *starlark.Thread, fn string) (*Package, error) {
	pkg, ok := t.Local(packageKey).(*Package)
	if !ok {
		return nil, fmt.Errorf("%s can only be called while a BUILD file is evaluated", fn)
	}
	return pkg, nil
}

func globBuiltin(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var include, exclude *starlark.List
	var excludeDirs int
	var allowEmpty bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "include?", &include, "exclude?", &exclude, "exclude_directories?", &excludeDirs, "allow_empty?", &allowEmpty); err != nil {
		return nil, err
	}
	pkg, err := currentPackage(t, b.Name())
	if err != nil {
		return nil, err
	}
	inc, err := optStringList(include)
	if err != nil {
		return nil, fmt.Errorf("glob: include: %v", err)
	}
	exc, err := optStringList(exclude)
	if err != nil {
		return nil, fmt.Errorf("glob: exclude: %v", err)
	}
	files, err := label.Glob(pkg.Dir, inc, exc)
	if err != nil {
		return nil, fmt.Errorf("glob: %v", err)
	}
	out := make([]starlark.Value, len(files))
	for i, f := range files {
		out[i] = starlark.String(f)
		pkg.Sources[f] = struct{}{}
	}
	return starlark.NewList(out), nil
}

func optStringList(l *starlark.List) ([]string, error) {
	if l == nil {
		return nil, nil
	}
	return stringList(l)
}

func exportsFiles(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var srcs *starlark.List
	var visibility, licenses starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "srcs", &srcs, "visibility?", &visibility, "licenses?", &licenses); err != nil {
		return nil, err
	}
	pkg, err := currentPackage(t, b.Name())
	if err != nil {
		return nil, err
	}
	names, err := stringList(srcs)
	if err != nil {
		return nil, fmt.Errorf("exports_files: %v", err)
	}
	for _, n := range names {
		pkg.Exports[n] = true
	}
	return starlark.None, nil
}

func packageBuiltin(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if _, err := currentPackage(t, b.Name()); err != nil {
		return nil, err
	}
	return starlark.None, nil
}

// Package returns the evaluated package pkg, evaluating its BUILD file the
// first time. It is safe for concurrent use.
func (w *Workspace) Package(pkg string) (*Package, error) {
	w.mu.Lock()
	e, ok := w.pkgs[pkg]
	if !ok {
		e = &pkgEntry{ready: make(chan struct{})}
		w.pkgs[pkg] = e
		w.mu.Unlock()
		e.pkg, e.err = w.evalPackage(pkg)
		close(e.ready)
		return e.pkg, e.err
	}
	w.mu.Unlock()
	<-e.ready
	return e.pkg, e.err
}

// Read returns the workspace's files that loading has read so far, as
// absolute paths: the directories of its packages and their BUILD files,
// the modules they loaded (the embedded repositories' are rbs's own), and
// the workspace files read for their registrations.
func (w *Workspace) Read() []string {
	var files []string
	w.mu.Lock()
	for name := range w.pkgs {
		dir, ok := w.onDisk(name)
		if !ok {
			continue
		}
		files = append(files, dir)
		if file := label.BuildFile(dir); file != "" {
			files = append(files, file)
		}
	}
	w.mu.Unlock()
	files = append(files, w.reg.files...)
	for _, m := range w.loader.Modules() {
		if m.Repo == "" {
			files = append(files, filepath.Join(w.Root, filepath.FromSlash(m.Path)))
		} else if dir, ok := w.onDisk(externalDir + "/" + m.Repo); ok {
			files = append(files, filepath.Join(dir, filepath.FromSlash(m.Path)))
		}
	}
	return files
}

func (w *Workspace) evalPackage(name string) (*Package, error) {
	if fsys, dir, ok := w.externalPackage(name); ok {
		return w.evalExternal(name, fsys, dir)
	}
	dir := filepath.Join(w.Root, filepath.FromSlash(name))
	file := label.BuildFile(dir)
	if file == "" {
		return nil, fmt.Errorf("no such package %q: %s has no BUILD file", name, dir)
	}
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if err := w.loadBuiltins(); err != nil {
		return nil, err
	}
	pkg := newPackage(name, dir)
	thread := w.loader.Thread(path.Join("//"+name, filepath.Base(file)), "", name, nil)
	thread.SetLocal(packageKey, pkg)
	rel, _ := filepath.Rel(w.Root, file)
	if err := w.loader.ExecBuild(thread, rel, src, w.build); err != nil {
		return nil, err
	}
	if err := pkg.finalize(thread); err != nil {
		return nil, err
	}
	return pkg, nil
}

// evalExternal evaluates a repository's package from rbs's files.
func (w *Workspace) evalExternal(name string, fsys fs.FS, dir string) (*Package, error) {
	var src []byte
	var file string
	for _, f := range []string{"BUILD.bazel", "BUILD"} {
		var err error
		if src, err = fs.ReadFile(fsys, path.Join(dir, f)); err == nil {
			file = f
			break
		}
	}
	repo, _, _ := strings.Cut(strings.TrimPrefix(name, externalDir+"/"), "/")
	if file == "" {
		if r, ok := w.reg.repos[repo]; ok {
			return nil, fmt.Errorf("no such package @%s//%s: %s has no BUILD file", repo, strings.TrimPrefix(dir, "."), filepath.Join(r.dir, dir))
		}
		return nil, fmt.Errorf("no such package @%s//%s: rbs's @%s has no such package", repo, strings.TrimPrefix(dir, "."), repo)
	}
	if err := w.loadBuiltins(); err != nil {
		return nil, err
	}
	diskDir, _ := w.onDisk(name) // where glob() looks; "" for rbs's own files
	pkg := newPackage(name, diskDir)
	pkg.fsys, pkg.fsDir = fsys, dir
	inRepo := dir
	if inRepo == "." {
		inRepo = ""
	}
	thread := w.loader.Thread(path.Join("//"+name, file), repo, inRepo, nil)
	thread.SetLocal(packageKey, pkg)
	if err := w.loader.ExecBuild(thread, path.Join(name, file), src, w.build); err != nil {
		return nil, err
	}
	if err := pkg.finalize(thread); err != nil {
		return nil, err
	}
	return pkg, nil
}

// Packages evaluates several packages concurrently.
func (w *Workspace) Packages(names []string) ([]*Package, error) {
	out := make([]*Package, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = w.Package(n)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Expand resolves target patterns (relative to package cwd) to the labels
// of rule targets, in order, without duplicates. As on Bazel's command
// line, a pattern that starts with "-" (after --) takes the targets it
// names out of those the patterns before it named: //... -//app:train.
func (w *Workspace) Expand(patterns []string, cwd string) ([]label.Label, error) {
	var out []label.Label
	seen := map[string]bool{}
	for _, s := range patterns {
		neg, negative := strings.CutPrefix(s, "-")
		if negative {
			s = neg
		}
		ls, err := w.expand(s, cwd)
		if err != nil {
			return nil, err
		}
		if negative {
			drop := map[string]bool{}
			for _, l := range ls {
				drop[l.String()] = true
				delete(seen, l.String())
			}
			out = slices.DeleteFunc(out, func(l label.Label) bool { return drop[l.String()] })
			continue
		}
		for _, l := range ls {
			if !seen[l.String()] {
				seen[l.String()] = true
				out = append(out, l)
			}
		}
	}
	return out, nil
}

// expand resolves one target pattern.
func (w *Workspace) expand(s, cwd string) ([]label.Label, error) {
	p, err := label.ParsePattern(s, cwd)
	if err != nil {
		return nil, err
	}
	var names []string
	if p.Recursive {
		all, err := label.Packages(w.Root, p.Pkg)
		if err != nil {
			return nil, err
		}
		for _, n := range all {
			if !w.nested(n) {
				names = append(names, n)
			}
		}
	} else {
		names = []string{p.Pkg}
	}
	pkgs, err := w.Packages(names)
	if err != nil {
		return nil, err
	}
	var out []label.Label
	for _, pkg := range pkgs {
		if p.Recursive || p.Name == "all" {
			for _, n := range pkg.Order {
				// As in Bazel, wildcards skip targets tagged manual.
				if !contains(pkg.Targets[n].Tags, "manual") {
					out = append(out, label.Label{Pkg: pkg.Name, Name: n})
				}
			}
			continue
		}
		if _, ok := pkg.Targets[p.Name]; !ok {
			if _, ok := pkg.Outputs[p.Name]; !ok {
				names := sortedTargetNames(pkg)
				return nil, fmt.Errorf("no such target //%s:%s in package %q%s (targets: %s)", pkg.Name, p.Name, pkg.Name, spell.DidYouMean(p.Name, names), strings.Join(names, ", "))
			}
		}
		out = append(out, label.Label{Pkg: pkg.Name, Name: p.Name})
	}
	return out, nil
}

// nested reports whether package pkg lies in another workspace nested in
// this one (a directory below the root with its own workspace file).
func (w *Workspace) nested(pkg string) bool {
	for dir := pkg; dir != "" && dir != "."; dir = path.Dir(dir) {
		for _, f := range workspaceFiles {
			if _, err := os.Stat(filepath.Join(w.Root, filepath.FromSlash(dir), f)); err == nil {
				return true
			}
		}
	}
	return false
}

var workspaceFiles = []string{"MODULE.bazel", "WORKSPACE.rbs", "WORKSPACE", "WORKSPACE.bazel"}

func sortedTargetNames(p *Package) []string {
	names := append([]string(nil), p.Order...)
	sort.Strings(names)
	return names
}

// Analysis is the result of analysing targets: each configured target and
// every action reachable from them.
type Analysis struct {
	Targets map[string]*Configured
	// Producer maps a generated file's exec path to the action making it.
	Producer map[string]*Action
	// Runfiles maps an executable's exec path to its runfiles tree,
	// the executable included.
	Runfiles map[string][]Runfile
	// Read are the source files analysis read (to scan C and C++
	// sources for their #include lines, from the workspace root; the
	// files of local repositories it wrote, absolute): a change to one may
	// change what it makes.
	Read []string
}

// Analyze analyses the targets and everything they depend on.
func (w *Workspace) Analyze(targets []label.Label) (*Analysis, error) {
	an := &analyzer{ws: w, analysisState: &analysisState{done: map[string]*Configured{}, byFile: map[string]*File{}, runfile: map[string][]Runfile{}, actions: map[string]*Action{}, started: time.Now()}}
	an.scan = &includeScan{an: an, found: map[string][]string{}, read: map[string]bool{}}
	an.aspects = map[string]*aspectResult{}
	for _, l := range targets {
		if _, err := an.analyze(l); err != nil {
			return nil, err
		}
	}
	return &Analysis{Targets: an.done, Producer: an.actions, Runfiles: an.runfile, Read: append(an.scan.sources, an.repoFiles...)}, nil
}
