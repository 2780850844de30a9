package rules

// What the workspace file registers: the toolchains and execution
// platforms of register_toolchains and register_execution_platforms, in
// MODULE.bazel (evaluated, as Bazel evaluates it) and then in WORKSPACE
// or WORKSPACE.bazel (whose top-level calls with literal arguments are
// read; the file is not run, as its load()s name repositories rbs does
// not fetch). rbs does not fetch modules: bazel_dep, use_extension and the
// overrides are read and have no effect yet.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
}

// readRegistrations reads the registrations of the workspace at root.
func readRegistrations(root string) (registrations, error) {
	r := registrations{mainRepo: "__main__"}
	if err := r.readModule(filepath.Join(root, "MODULE.bazel")); err != nil {
		return r, err
	}
	for _, name := range []string{"WORKSPACE.bazel", "WORKSPACE"} {
		err := r.readWorkspace(filepath.Join(root, name))
		if !errors.Is(err, os.ErrNotExist) {
			return r, err
		}
	}
	return r, nil
}

// moduleCalls are the MODULE.bazel functions that rbs takes without
// acting on them yet.
var moduleCalls = []string{"bazel_dep", "local_path_override", "single_version_override", "multiple_version_override",
	"archive_override", "git_override", "use_repo", "inject_repo", "override_repo", "include"}

// readModule evaluates a MODULE.bazel, if there is one.
func (r *registrations) readModule(file string) error {
	src, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	r.files = append(r.files, file)
	r.mainRepo = "_main"
	register := func(name string, to *[]registration) *starlark.Builtin {
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
				*to = append(*to, registration{pattern: s, pos: t.CallFrame(1).Pos.String()})
			}
			return starlark.None, nil
		})
	}
	env := starlark.StringDict{
		"module": starlark.NewBuiltin("module", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var name, version, repoName string
			var level int
			var compat starlark.Value
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name?", &name, "version?", &version,
				"compatibility_level?", &level, "repo_name?", &repoName, "bazel_compatibility?", &compat); err != nil {
				return nil, err
			}
			r.module = name
			if repoName != "" {
				r.module = repoName
			}
			return starlark.None, nil
		}),
		"register_toolchains":          register("register_toolchains", &r.toolchains),
		"register_execution_platforms": register("register_execution_platforms", &r.platforms),
		"use_extension": starlark.NewBuiltin("use_extension", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return moduleProxy{}, nil
		}),
		"use_repo_rule": starlark.NewBuiltin("use_repo_rule", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			return starlark.NewBuiltin("repo_rule", ignoredCall), nil
		}),
	}
	for _, name := range moduleCalls {
		env[name] = starlark.NewBuiltin(name, ignoredCall)
	}
	thread := &starlark.Thread{Name: "MODULE.bazel"}
	if _, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, file, src, env); err != nil {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			return fmt.Errorf("%s", ee.Backtrace())
		}
		return err
	}
	return nil
}

func ignoredCall(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	return starlark.None, nil
}

// moduleProxy is what use_extension returns: its tags (ext.tag(...)) are
// taken.
type moduleProxy struct{}

func (moduleProxy) String() string       { return "<module extension proxy>" }
func (moduleProxy) Type() string         { return "module_extension_proxy" }
func (moduleProxy) Freeze()              {}
func (moduleProxy) Truth() starlark.Bool { return true }
func (moduleProxy) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: module_extension_proxy")
}
func (moduleProxy) AttrNames() []string { return nil }
func (moduleProxy) Attr(name string) (starlark.Value, error) {
	return starlark.NewBuiltin(name, ignoredCall), nil
}

// readWorkspace reads the registrations of a WORKSPACE file: its
// top-level register_toolchains and register_execution_platforms calls
// whose arguments are string literals, and the name workspace() gives
// the main repository when there is no MODULE.bazel.
func (r *registrations) readWorkspace(file string) error {
	src, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	r.files = append(r.files, file)
	f, err := (&syntax.FileOptions{}).Parse(file, src, 0)
	if err != nil {
		return err
	}
	for _, stmt := range f.Stmts {
		e, ok := stmt.(*syntax.ExprStmt)
		if !ok {
			continue
		}
		call, ok := e.X.(*syntax.CallExpr)
		if !ok {
			continue
		}
		fn, ok := call.Fn.(*syntax.Ident)
		if !ok {
			continue
		}
		var to *[]registration
		switch fn.Name {
		case "workspace":
			for _, a := range call.Args {
				if kw, ok := a.(*syntax.BinaryExpr); ok && kw.Op == syntax.EQ {
					id, _ := kw.X.(*syntax.Ident)
					lit, ok := kw.Y.(*syntax.Literal)
					if id != nil && id.Name == "name" && ok && lit.Token == syntax.STRING && r.mainRepo == "__main__" {
						r.mainRepo = lit.Value.(string)
					}
				}
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
