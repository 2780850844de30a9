package rules

// Module extensions and the repositories MODULE.bazel and WORKSPACE
// declare with repository rules. module_extension(implementation,
// tag_classes) makes an extension; MODULE.bazel's use_extension(FILE,
// NAME) gives a proxy whose calls (ext.TAG(...)) are the root module's
// tags, and use_repo(ext, "a", b = "c") makes repositories the extension
// declares visible (c under the name b). The extension runs once, when one
// of its repositories is first used, with module_ctx: the root module and
// its tags (module_ctx.modules), and repository_ctx's file functions. A
// repository is fetched (reporule.go) only when used.

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"github.com/rbs-build/rbs/starlark/loader"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"
)

// ModuleExtension is what module_extension() returns.
type ModuleExtension struct {
	impl       starlark.Callable
	tagClasses map[string]*tagClass
}

func (e *ModuleExtension) String() string       { return "<module_extension>" }
func (e *ModuleExtension) Type() string         { return "module_extension" }
func (e *ModuleExtension) Freeze()              {}
func (e *ModuleExtension) Truth() starlark.Bool { return true }
func (e *ModuleExtension) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: module_extension")
}

// tagClass is what tag_class() returns: the attributes of a tag.
type tagClass struct{ attrs map[string]*Attr }

func (t *tagClass) String() string        { return "<tag_class>" }
func (t *tagClass) Type() string          { return "tag_class" }
func (t *tagClass) Freeze()               {}
func (t *tagClass) Truth() starlark.Bool  { return true }
func (t *tagClass) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: tag_class") }

func attrMap(fn string, d *starlark.Dict) (map[string]*Attr, error) {
	out := map[string]*Attr{}
	if d == nil {
		return out, nil
	}
	for _, kv := range d.Items() {
		name, ok := starlark.AsString(kv[0])
		a, isAttr := kv[1].(*Attr)
		if !ok || !isAttr {
			return nil, fmt.Errorf("%s: attrs must map names to attr.* values, got %s: %s", fn, kv[0], kv[1].Type())
		}
		out[name] = a
	}
	return out, nil
}

func tagClassBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var attrs *starlark.Dict
	var doc string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "attrs?", &attrs, "doc?", &doc); err != nil {
		return nil, err
	}
	m, err := attrMap(b.Name(), attrs)
	if err != nil {
		return nil, err
	}
	return &tagClass{attrs: m}, nil
}

func moduleExtensionBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var impl starlark.Callable
	var classes *starlark.Dict
	var doc string
	var environ *starlark.List
	var osDep, archDep bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "implementation", &impl, "tag_classes?", &classes, "doc?", &doc,
		"environ?", &environ, "os_dependent?", &osDep, "arch_dependent?", &archDep); err != nil {
		return nil, err
	}
	e := &ModuleExtension{impl: impl, tagClasses: map[string]*tagClass{}}
	if classes != nil {
		for _, kv := range classes.Items() {
			name, ok := starlark.AsString(kv[0])
			tc, isTC := kv[1].(*tagClass)
			if !ok || !isTC {
				return nil, fmt.Errorf("%s: tag_classes must map names to tag_class() values, got %s: %s", b.Name(), kv[0], kv[1].Type())
			}
			e.tagClasses[name] = tc
		}
	}
	return e, nil
}

// extUse is one use_extension of MODULE.bazel: its tags and the
// repositories use_repo takes from it.
type extUse struct {
	bzl, name, pos string
	module         *moduleInfo // whose MODULE.bazel uses it
	tags           []extTag
	repos          map[string]string // apparent name -> the extension's name for it
}

// key is the extension a use is of: its file's label, in the using
// module's repository, and its name. Uses of one extension by several
// modules share one run.
func (u *extUse) key() string {
	if l, err := label.Parse(u.bzl); err == nil {
		return l.String() + "%" + u.name
	}
	return u.bzl + "%" + u.name
}

// extRun is one extension's run, for every module that uses it.
type extRun struct {
	uses  []*extUse
	once  sync.Once
	specs map[string]*repoSpec
	err   error
}

type extTag struct {
	class, pos string
	kwargs     []starlark.Tuple
}

// repoRuleUse is a repository MODULE.bazel declares with use_repo_rule,
// or WORKSPACE with a repository rule it loads.
type repoRuleUse struct {
	bzl, rule, pos string
	kwargs         []starlark.Tuple
}

// extProxy is what use_extension returns.
type extProxy struct{ use *extUse }

func (p *extProxy) String() string       { return "<module extension " + p.use.bzl + "%" + p.use.name + ">" }
func (p *extProxy) Type() string         { return "module_extension_proxy" }
func (p *extProxy) Freeze()              {}
func (p *extProxy) Truth() starlark.Bool { return true }
func (p *extProxy) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: module_extension_proxy")
}
func (p *extProxy) AttrNames() []string { return nil }
func (p *extProxy) Attr(class string) (starlark.Value, error) {
	return starlark.NewBuiltin(class, func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) > 0 {
			return nil, fmt.Errorf("%s: a tag takes keyword arguments only", class)
		}
		p.use.tags = append(p.use.tags, extTag{class: class, pos: t.CallFrame(1).Pos.String(), kwargs: kwargs})
		return starlark.None, nil
	}), nil
}

// moduleRepoCalls are MODULE.bazel's functions that declare repositories
// by rules: use_extension, use_repo and use_repo_rule.
func (r *registrations) moduleRepoCalls(env starlark.StringDict, m *moduleInfo) {
	env["use_extension"] = starlark.NewBuiltin("use_extension", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var bzl, name string
		var dev, isolate bool
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "extension_bzl_file", &bzl, "extension_name", &name, "dev_dependency?", &dev, "isolate?", &isolate); err != nil {
			return nil, err
		}
		use := &extUse{bzl: m.qualify(bzl), name: name, pos: t.CallFrame(1).Pos.String(), module: m, repos: map[string]string{}}
		r.extensions = append(r.extensions, use)
		return &extProxy{use}, nil
	})
	env["use_repo"] = starlark.NewBuiltin("use_repo", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("%s: give the extension's proxy, then the repositories", b.Name())
		}
		p, ok := args[0].(*extProxy)
		if !ok {
			return nil, fmt.Errorf("%s: want use_extension()'s proxy first, got %s", b.Name(), args[0].Type())
		}
		for _, a := range args[1:] {
			s, ok := starlark.AsString(a)
			if !ok {
				return nil, fmt.Errorf("%s: want repository names, got %s", b.Name(), a.Type())
			}
			p.use.repos[s] = s
		}
		for _, kv := range kwargs {
			s, ok := starlark.AsString(kv[1])
			if !ok {
				return nil, fmt.Errorf("%s: %s: want a repository name, got %s", b.Name(), kv[0], kv[1].Type())
			}
			p.use.repos[string(kv[0].(starlark.String))] = s
		}
		return starlark.None, nil
	})
	env["use_repo_rule"] = starlark.NewBuiltin("use_repo_rule", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var bzl, name string
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "repo_rule_bzl_file", &bzl, "repo_rule_name", &name); err != nil {
			return nil, err
		}
		return starlark.NewBuiltin(name, func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if len(args) > 0 {
				return nil, fmt.Errorf("%s: a repository rule takes keyword arguments only", name)
			}
			r.repoRules = append(r.repoRules, &repoRuleUse{bzl: m.qualify(bzl), rule: name, pos: t.CallFrame(1).Pos.String(), kwargs: kwargs})
			return starlark.None, nil
		}), nil
	})
}

// httpBzl is rbs's http_archive and http_file, which WORKSPACE may load.
const httpBzl = "@bazel_tools//tools/build_defs/repo:http.bzl"

// workspaceRepoCalls reads a WORKSPACE's calls of repository rules that
// its top-level load()s of the main repository's files (or of httpBzl)
// bind: their arguments are evaluated as the expressions they are
// (literals, lists, dicts).
func (r *registrations) workspaceRepoCalls(f *syntax.File) error {
	bound := map[string][2]string{} // local name -> file, rule
	for _, stmt := range f.Stmts {
		if s, ok := stmt.(*syntax.LoadStmt); ok {
			module := s.Module.Value.(string)
			if len(module) == 0 || module[0] == '@' && module != httpBzl {
				continue
			}
			for i, to := range s.To {
				bound[to.Name] = [2]string{module, s.From[i].Name}
			}
			continue
		}
		call, fn := topLevelCall(stmt)
		b, ok := bound[fn]
		if call == nil || !ok {
			continue
		}
		start, _ := call.Span()
		use := &repoRuleUse{bzl: b[0], rule: b[1], pos: start.String()}
		thread := &starlark.Thread{Name: "WORKSPACE"}
		for _, a := range call.Args {
			kw, ok := a.(*syntax.BinaryExpr)
			if !ok || kw.Op != syntax.EQ {
				return fmt.Errorf("%s: %s: a repository rule takes keyword arguments only", start, fn)
			}
			v, err := starlark.EvalExprOptions(&syntax.FileOptions{}, thread, kw.Y, nil)
			if err != nil {
				return fmt.Errorf("%s: %s: %v", start, fn, err)
			}
			use.kwargs = append(use.kwargs, starlark.Tuple{starlark.String(kw.X.(*syntax.Ident).Name), v})
		}
		r.repoRules = append(r.repoRules, use)
	}
	return nil
}

// ruleRepos are the repositories the workspace files declare with
// repository rules, each fetched on first use.
func (w *Workspace) ruleRepos() map[string]localRepo {
	out := map[string]localRepo{}
	for _, u := range w.reg.repoRules {
		u := u
		name := ""
		for _, kv := range u.kwargs {
			if kv[0] == starlark.String("name") {
				name, _ = starlark.AsString(kv[1])
			}
		}
		if _, taken := out[name]; taken {
			continue // the root's, or an earlier module's
		}
		out[name] = localRepo{pos: u.pos, lazy: &lazyDir{get: func() (string, error) {
			rule, err := w.ruleIn(u.bzl, u.rule)
			if err != nil {
				return "", fmt.Errorf("%s: %v", u.pos, err)
			}
			spec, err := rule.spec(u.pos, nil, u.kwargs)
			if err != nil {
				return "", fmt.Errorf("%s: %v", u.pos, err)
			}
			return w.fetch(spec)
		}}}
	}
	runs := map[string]*extRun{}
	for _, u := range w.reg.extensions {
		run := runs[u.key()]
		if run == nil {
			run = &extRun{}
			runs[u.key()] = run
		}
		run.uses = append(run.uses, u)
	}
	for _, u := range w.reg.extensions {
		u, run := u, runs[u.key()]
		for _, apparent := range slices.Sorted(maps.Keys(u.repos)) {
			inner := u.repos[apparent]
			if _, taken := out[apparent]; taken {
				continue // the root's, or an earlier module's
			}
			out[apparent] = localRepo{pos: u.pos, lazy: &lazyDir{get: func() (string, error) {
				specs, err := w.runExtension(run)
				if err != nil {
					return "", err
				}
				spec, ok := specs[inner]
				if !ok {
					return "", fmt.Errorf("%s: use_repo: module extension %s of %s declares no repository %s (it declares %s)", u.pos, u.name, u.bzl, inner, sortedNames(specs))
				}
				return w.fetch(spec)
			}}}
		}
	}
	return out
}

func sortedNames(specs map[string]*repoSpec) string {
	var names []string
	for n := range specs {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return fmt.Sprint(names)
}

// runExtension runs an extension, once, for every module that uses it:
// the repositories it declares, by name.
func (w *Workspace) runExtension(run *extRun) (map[string]*repoSpec, error) {
	run.once.Do(func() { run.specs, run.err = w.evalExtension(run) })
	return run.specs, run.err
}

// evalExtension runs an extension with module_ctx: its modules are those
// that use it, the root first, each with the tags of its uses.
func (w *Workspace) evalExtension(run *extRun) (map[string]*repoSpec, error) {
	u := run.uses[0]
	m, err := loader.Resolve(u.bzl, "", "")
	if err != nil {
		return nil, fmt.Errorf("%s: use_extension: %v", u.pos, err)
	}
	globals, err := w.loader.Load(m)
	if err != nil {
		return nil, fmt.Errorf("%s: use_extension: %v", u.pos, err)
	}
	ext, ok := globals[u.name].(*ModuleExtension)
	if !ok {
		return nil, fmt.Errorf("%s: use_extension: %s has no module extension %s", u.pos, u.bzl, u.name)
	}
	var modules []starlark.Value
	for _, mi := range w.reg.modules {
		var mine []*extUse
		for _, use := range run.uses {
			if use.module == mi {
				mine = append(mine, use)
			}
		}
		if len(mine) == 0 {
			continue
		}
		tags, err := ext.moduleTags(mine)
		if err != nil {
			return nil, err
		}
		modules = append(modules, starlarkstruct.FromStringDict(starlark.String("bazel_module"), starlark.StringDict{
			"name": starlark.String(mi.name), "version": starlark.String(mi.version), "is_root": starlark.Bool(mi.repo == ""), "tags": tags,
		}))
	}
	scratch := filepath.Join(w.cfg.RepoDir, "_extensions", u.name)
	if err := os.MkdirAll(scratch, 0o755); err != nil {
		return nil, err
	}
	mctx := &repoContext{ws: w, dir: scratch, extra: starlark.StringDict{
		"modules": starlark.NewList(modules),
		"is_dev_dependency": starlark.NewBuiltin("is_dev_dependency", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.False, nil
		}),
		"root_module_has_non_dev_dependency": starlark.Bool(run.uses[0].module.repo == ""),
		"extension_metadata":                 starlark.NewBuiltin("extension_metadata", ignoredCall),
	}}
	declared := &declaredRepos{specs: map[string]*repoSpec{}}
	thread := &starlark.Thread{Name: "module extension " + u.name, Print: w.debug}
	defer guard.Track(thread)()
	thread.SetLocal(declaredKey, declared)
	if _, err := starlark.Call(thread, ext.impl, starlark.Tuple{mctx}, nil); err != nil {
		return nil, fmt.Errorf("module extension %s of %s failed: %w", u.name, u.bzl, err)
	}
	return declared.specs, nil
}

// moduleTags is a module's tags of extension e, from its uses, as
// module_ctx.modules[i].tags gives them: a list of structs per tag class,
// each checked against its class and given its defaults.
func (e *ModuleExtension) moduleTags(uses []*extUse) (starlark.Value, error) {
	tags := map[string][]starlark.Value{}
	for name := range e.tagClasses {
		tags[name] = nil
	}
	for _, u := range uses {
		for _, t := range u.tags {
			tc, ok := e.tagClasses[t.class]
			if !ok {
				return nil, fmt.Errorf("%s: module extension %s has no tag class %s", t.pos, u.name, t.class)
			}
			fields := starlark.StringDict{}
			for _, kv := range t.kwargs {
				name := string(kv[0].(starlark.String))
				a := tc.attrs[name]
				if a == nil {
					return nil, unknownAttr("tag "+t.class, name, sortedKeys(tc.attrs))
				}
				if err := a.check(name, kv[1]); err != nil {
					return nil, fmt.Errorf("%s: tag %s: %v", t.pos, t.class, err)
				}
				fields[name] = kv[1]
			}
			for name, a := range tc.attrs {
				if _, set := fields[name]; !set {
					if a.mandatory {
						return nil, fmt.Errorf("%s: tag %s: attribute %s is mandatory", t.pos, t.class, name)
					}
					fields[name] = a.zero()
				}
			}
			tags[t.class] = append(tags[t.class], starlarkstruct.FromStringDict(starlark.String(t.class), fields))
		}
	}
	tagFields := starlark.StringDict{}
	for name, list := range tags {
		tagFields[name] = starlark.NewList(list)
	}
	return starlarkstruct.FromStringDict(starlark.String("bazel_module_tags"), tagFields), nil
}

// lazyFS is a repository's files, fetched on first use.
type lazyFS struct{ dir *lazyDir }

func (l lazyFS) Open(name string) (fs.File, error) {
	dir, err := l.dir.path()
	if err != nil {
		return nil, err
	}
	return os.DirFS(dir).Open(name)
}
