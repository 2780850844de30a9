package rules

// What the workspace files declare: the toolchains and execution platforms
// of register_toolchains and register_execution_platforms, and the local
// repositories (localrepo.go), in MODULE.bazel (evaluated, as Bazel
// evaluates it) and then in WORKSPACE or WORKSPACE.bazel (whose top-level
// calls with literal arguments are read; the file is not run, as its
// load()s name repositories rbs does not fetch). rbs does not fetch
// modules: a bazel_dep without a local_path_override is served by rbs's
// own copy when rbs has one, and use_extension and the other overrides
// are read and have no effect yet.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// registration is one pattern given to register_toolchains or
// register_execution_platforms, and where.
type registration struct {
	pattern string
	pos     string
}

// registrations are a workspace's, in the order they take precedence,
// with the names the workspace files give.
type registrations struct {
	toolchains, platforms []registration
	// files are the workspace files read.
	files []string
	// mainRepo is the main repository's name in runfiles trees: _main
	// with a MODULE.bazel, else WORKSPACE's workspace(name = ...), else
	// __main__. module is the name MODULE.bazel's module() gives it
	// (its repo_name, else its name), by which a runfiles library finds
	// it too.
	mainRepo, module string
	// repos are the repositories in directories of this machine.
	repos map[string]localRepo
	// extensions and repoRules declare repositories with repository
	// rules (extension.go).
	extensions []*extUse
	repoRules  []*repoRuleUse
	// deps are MODULE.bazel's bazel_deps, and overrides its
	// single_version_override and archive_override (registry.go).
	deps      []moduleDep
	overrides map[string]moduleOverride
	// modules are the modules whose MODULE.bazel was read: the root
	// first, then its dependencies, each once.
	modules []*moduleInfo
}

// moduleInfo is a module of the graph, as module_ctx.modules shows it:
// its name and version, and the repository it is (apparent to the root;
// "" for the root itself).
type moduleInfo struct {
	name, version, repo string
}

// qualify makes a label written in module m's MODULE.bazel one of its
// repository: //pkg:x in module foo is @foo//pkg:x.
func (m *moduleInfo) qualify(s string) string {
	switch {
	case m.repo == "" || strings.HasPrefix(s, "@"):
		return s
	case strings.HasPrefix(s, "//"):
		return "@" + m.repo + s
	case strings.HasPrefix(s, ":"):
		return "@" + m.repo + "//" + s
	}
	return s
}

// registerCall is register_toolchains or register_execution_platforms of
// module m's MODULE.bazel: its patterns, in m's repository, go to to.
func registerCall(name string, m *moduleInfo, to *[]registration) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		for _, kv := range kwargs {
			if kv[0] != starlark.String("dev_dependency") {
				return nil, fmt.Errorf("%s: unexpected keyword argument %s", b.Name(), kv[0])
			}
		}
		for _, a := range args {
			s, ok := starlark.AsString(a)
			if !ok {
				return nil, fmt.Errorf("%s: want label patterns as strings, got %s", b.Name(), a.Type())
			}
			*to = append(*to, registration{pattern: m.qualify(s), pos: t.CallFrame(1).Pos.String()})
		}
		return starlark.None, nil
	})
}

// moduleCall is module(): it names m, and the root module's repository.
func (r *registrations) moduleCall(m *moduleInfo) *starlark.Builtin {
	return starlark.NewBuiltin("module", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, version, repoName string
		var level int
		var compat starlark.Value
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name?", &name, "version?", &version,
			"compatibility_level?", &level, "repo_name?", &repoName, "bazel_compatibility?", &compat); err != nil {
			return nil, err
		}
		m.name, m.version = name, version
		if m.repo == "" {
			r.module = name
			if repoName != "" {
				r.module = repoName
			}
		}
		return starlark.None, nil
	})
}

// execModule evaluates a MODULE.bazel in env.
func execModule(file string, src []byte, env starlark.StringDict) error {
	thread := &starlark.Thread{Name: "MODULE.bazel"}
	defer guard.Track(thread)()
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, file, src, env); err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s", ee.Backtrace())
		}
		return err
	}
	return nil
}

// readDepModule reads the MODULE.bazel of the dependency module name, in
// repository repo, from src, after the root's: its toolchain and platform
// registrations come after the root's, its extension uses join the
// root's (module_ctx.modules), and the repositories it takes from them
// or declares with use_repo_rule are known under their names unless the
// root declares those. Its own dependencies and overrides are the
// registry's business (registry.go).
func (r *registrations) readDepModule(name, repo, file string, src []byte) error {
	env := r.moduleEnv(&moduleInfo{name: name, repo: repo})
	for _, name := range []string{"bazel_dep", "local_path_override", "single_version_override", "archive_override"} {
		env[name] = starlark.NewBuiltin(name, ignoredCall)
	}
	return execModule(file, src, env)
}

// moduleEnv is what a MODULE.bazel of module m, a module of the graph
// from now on, may call, but for its dependencies and overrides.
func (r *registrations) moduleEnv(m *moduleInfo) starlark.StringDict {
	r.modules = append(r.modules, m)
	env := starlark.StringDict{
		"module":                       r.moduleCall(m),
		"register_toolchains":          registerCall("register_toolchains", m, &r.toolchains),
		"register_execution_platforms": registerCall("register_execution_platforms", m, &r.platforms),
	}
	r.moduleRepoCalls(env, m)
	for _, name := range moduleCalls {
		env[name] = starlark.NewBuiltin(name, ignoredCall)
	}
	return env
}

// readRegistrations reads the registrations of the workspace at root.
func readRegistrations(root string) (registrations, error) {
	r := registrations{mainRepo: "__main__"}
	if err := r.readModule(root, filepath.Join(root, "MODULE.bazel")); err != nil {
		return r, err
	}
	for _, name := range []string{"WORKSPACE.bazel", "WORKSPACE"} {
		err := r.readWorkspace(root, filepath.Join(root, name))
		if !errors.Is(err, os.ErrNotExist) {
			return r, err
		}
	}
	return r, nil
}

// moduleCalls are the MODULE.bazel functions that rbs takes without
// acting on them yet.
var moduleCalls = []string{"multiple_version_override", "git_override", "inject_repo", "override_repo", "include", "flag_alias"}

// readModule evaluates a MODULE.bazel, if there is one. A bazel_dep with
// a local_path_override is a repository in that directory, under the
// dependency's repo_name (else its name).
func (r *registrations) readModule(root, file string) error {
	src, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	r.files = append(r.files, file)
	r.mainRepo = "_main"
	env := r.moduleEnv(&moduleInfo{})
	r.moduleOverrideCalls(env)
	deps := map[string]moduleDep{}
	type override struct{ dir, pos string }
	overrides := map[string]override{}
	var order []string
	env["bazel_dep"] = bazelDep(func(d moduleDep, _ bool) {
		deps[d.name] = d
		r.deps = append(r.deps, d)
	})
	env["local_path_override"] = starlark.NewBuiltin("local_path_override", func(t *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		var name, dir string
		if err := starlark.UnpackArgs(b.Name(), args, kwargs, "module_name", &name, "path", &dir); err != nil {
			return nil, err
		}
		if _, dup := overrides[name]; !dup {
			order = append(order, name)
		}
		overrides[name] = override{dir: dir, pos: t.CallFrame(1).Pos.String()}
		return starlark.None, nil
	})
	if err := execModule(file, src, env); err != nil {
		return err
	}
	for _, name := range order {
		o := overrides[name]
		d, ok := deps[name]
		if !ok {
			return fmt.Errorf("%s: local_path_override of module %s, which no bazel_dep names", o.pos, name)
		}
		if err := r.addLocal(root, d.repo, o.dir, nil, o.pos); err != nil {
			return err
		}
	}
	for _, name := range order {
		repo := deps[name].repo
		file := filepath.Join(r.repos[repo].dir, "MODULE.bazel")
		src, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := r.readDepModule(name, repo, file, src); err != nil {
			return err
		}
	}
	return nil
}

func ignoredCall(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return starlark.None, nil
}

// readWorkspace reads the registrations of a WORKSPACE file: its
// top-level register_toolchains and register_execution_platforms calls
// whose arguments are string literals, its local_repository and
// new_local_repository calls, and the name workspace() gives the main
// repository when there is no MODULE.bazel.
func (r *registrations) readWorkspace(root, file string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	r.files = append(r.files, file)
	f, err := (&syntax.FileOptions{}).Parse(file, src, 0)
	if err != nil {
		return err
	}
	if err := r.workspaceRepoCalls(f); err != nil {
		return err
	}
	for _, stmt := range f.Stmts {
		call, fn := topLevelCall(stmt)
		if call == nil {
			continue
		}
		var to *[]registration
		switch fn {
		case "local_repository", "new_local_repository":
			start, _ := call.Span()
			kw := literalKwargs(call)
			var build []byte
			if fn == "new_local_repository" {
				switch {
				case kw["build_file_content"] != "":
					build = []byte(kw["build_file_content"])
				case kw["build_file"] != "":
					b, err := readBuildFile(root, kw["build_file"])
					if err != nil {
						return fmt.Errorf("%s: %v", start, err)
					}
					build = b
				default:
					return fmt.Errorf("%s: new_local_repository %s needs build_file or build_file_content", start, kw["name"])
				}
			}
			if err := r.addLocal(root, kw["name"], kw["path"], build, start.String()); err != nil {
				return err
			}
			continue
		case "workspace":
			if name := literalKwargs(call)["name"]; name != "" && r.mainRepo == "__main__" {
				r.mainRepo = name
			}
			continue
		case "register_toolchains":
			to = &r.toolchains
		case "register_execution_platforms":
			to = &r.platforms
		default:
			continue
		}
		for _, a := range call.Args {
			lit, ok := a.(*syntax.Literal)
			if !ok || lit.Token != syntax.STRING {
				continue // a keyword argument or a computed value
			}
			start, _ := a.Span()
			*to = append(*to, registration{pattern: lit.Value.(string), pos: start.String()})
		}
	}
	return nil
}

// CheckRegistered checks a pattern given to --extra_toolchains.
func CheckRegistered(pattern string) error {
	if _, _, err := parseRegistered(pattern); err != nil {
		return fmt.Errorf("%q: %v", pattern, err)
	}
	return nil
}

// parseRegistered parses a registered pattern: an absolute label or
// pattern, in the workspace or (not recursive) in another repository.
func parseRegistered(s string) (repo string, p label.Pattern, err error) {
	rest := s
	if strings.HasPrefix(rest, "@") {
		i := strings.Index(rest, "//")
		if i < 0 {
			return "", p, fmt.Errorf("no // after the repository")
		}
		repo, rest = strings.TrimLeft(rest[:i], "@"), rest[i:]
	}
	if !strings.HasPrefix(rest, "//") {
		return "", p, fmt.Errorf("want an absolute label or pattern")
	}
	if p, err = label.ParsePattern(rest, ""); err != nil {
		return "", p, err
	}
	if repo != "" && p.Recursive {
		return "", p, fmt.Errorf("recursive patterns in other repositories are not supported")
	}
	return repo, p, nil
}

// topLevelCall is the call a statement is, and the name of the function
// it calls; nil for any other statement.
func topLevelCall(stmt syntax.Stmt) (*syntax.CallExpr, string) {
	e, ok := stmt.(*syntax.ExprStmt)
	if !ok {
		return nil, ""
	}
	call, ok := e.X.(*syntax.CallExpr)
	if !ok {
		return nil, ""
	}
	fn, ok := call.Fn.(*syntax.Ident)
	if !ok {
		return nil, ""
	}
	return call, fn.Name
}

// literalKwargs are a call's keyword arguments given as string literals.
func literalKwargs(call *syntax.CallExpr) map[string]string {
	out := map[string]string{}
	for _, a := range call.Args {
		kw, ok := a.(*syntax.BinaryExpr)
		if !ok || kw.Op != syntax.EQ {
			continue
		}
		id, _ := kw.X.(*syntax.Ident)
		lit, ok := kw.Y.(*syntax.Literal)
		if id != nil && ok && lit.Token == syntax.STRING {
			out[id.Name] = lit.Value.(string)
		}
	}
	return out
}

// expandRegistered expands a registered pattern to the labels it names,
// sorted as Bazel sorts a pattern's targets: a label, or PKG:all (and
// PKG:*) in the workspace or a well-known repository, or //PKG/... in the
// workspace.
func (w *Workspace) expandRegistered(r registration) ([]label.Label, error) {
	fail := func(err error) ([]label.Label, error) {
		return nil, fmt.Errorf("%s: invalid registered %s: %v", r.pos, r.pattern, err)
	}
	repo, p, err := parseRegistered(r.pattern)
	if err != nil {
		return fail(err)
	}
	switch {
	case p.Recursive:
		ls, err := w.Expand([]string{p.String()}, "")
		if err != nil {
			return fail(err)
		}
		sort.Slice(ls, func(i, j int) bool { return ls[i].String() < ls[j].String() })
		return ls, nil
	case p.Name == "all" || p.Name == "*":
		pkg, err := w.Package(canonical(label.Label{Repo: repo, Pkg: p.Pkg, Name: p.Name}).Pkg)
		if err != nil {
			return fail(err)
		}
		var ls []label.Label
		for _, n := range sortedTargetNames(pkg) {
			ls = append(ls, label.Label{Pkg: pkg.Name, Name: n})
		}
		return ls, nil
	}
	return []label.Label{canonical(label.Label{Repo: repo, Pkg: p.Pkg, Name: p.Name})}, nil
}
