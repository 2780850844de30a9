package rules

// Repository rules, as Bazel has them: repository_rule(implementation,
// attrs, environ, local) makes a rule whose implementation writes a
// repository's files with repository_ctx (file, template, symlink, read,
// path, which, execute, os, attr, getenv, delete, patch, and download,
// download_and_extract and extract: download.go). A repository is
// declared by MODULE.bazel's use_repo_rule, by a module extension (see
// extension.go) or by a WORKSPACE call of a loaded repository rule; it is
// fetched when first used, into the repository cache
// (Config.RepoDir/NAME-HASH), and reused until its definition changes:
// the rule's file, its name, its attributes and the environment variables
// it names. rbs clean --expunge drops the cache.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/loader"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// RepositoryRule is what repository_rule() returns.
type RepositoryRule struct {
	name    string
	impl    starlark.Callable
	attrs   map[string]*Attr
	environ []string
	file    string // the module defining it, for the definition's digest
}

var _ starlark.Callable = (*RepositoryRule)(nil)

func (r *RepositoryRule) String() string        { return "<repository_rule " + r.Name() + ">" }
func (r *RepositoryRule) Type() string          { return "repository_rule" }
func (r *RepositoryRule) Freeze()               {}
func (r *RepositoryRule) Truth() starlark.Bool  { return true }
func (r *RepositoryRule) Hash() (uint32, error) { return starlark.String(r.Name()).Hash() }
func (r *RepositoryRule) export(name string) {
	if r.name == "" {
		r.name = name
	}
}

// Name is the global the rule was exported as.
func (r *RepositoryRule) Name() string {
	if r.name == "" {
		return "unnamed_repository_rule"
	}
	return r.name
}

func repositoryRuleBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var impl starlark.Callable
	var attrs *starlark.Dict
	var local, configure, remotable bool
	var environ *starlark.List
	var doc string
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "implementation", &impl, "attrs?", &attrs, "local?", &local,
		"environ?", &environ, "configure?", &configure, "remotable?", &remotable, "doc?", &doc); err != nil {
		return nil, err
	}
	m, err := attrMap(b.Name(), attrs)
	if err != nil {
		return nil, err
	}
	r := &RepositoryRule{impl: impl, attrs: m, file: thread.CallFrame(1).Pos.Filename()}
	if environ != nil {
		var err error
		if r.environ, err = stringList(environ); err != nil {
			return nil, fmt.Errorf("%s: environ: %v", b.Name(), err)
		}
	}
	return r, nil
}

// repoSpec is a declared repository: a rule and its attributes.
type repoSpec struct {
	name  string
	rule  *RepositoryRule
	attrs starlark.StringDict // every attribute, defaults applied
	pos   string
}

// declaredRepos collects the repositories declared while a module
// extension runs (a thread local).
type declaredRepos struct{ specs map[string]*repoSpec }

const declaredKey = "rbs.declared_repos"

// CallInternal declares a repository: in a module extension, or where rbs
// calls the rule for MODULE.bazel or WORKSPACE.
func (r *RepositoryRule) CallInternal(thread *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	d, ok := thread.Local(declaredKey).(*declaredRepos)
	if !ok {
		return nil, fmt.Errorf("%s: a repository rule is called from MODULE.bazel (use_repo_rule), a module extension or WORKSPACE", r.Name())
	}
	spec, err := r.spec(thread.CallFrame(1).Pos.String(), args, kwargs)
	if err != nil {
		return nil, err
	}
	if old, dup := d.specs[spec.name]; dup {
		return nil, fmt.Errorf("%s: repository %s is declared twice (first at %s)", spec.pos, spec.name, old.pos)
	}
	d.specs[spec.name] = spec
	return starlark.None, nil
}

// spec checks a call of the rule: a name and its attributes.
func (r *RepositoryRule) spec(pos string, args starlark.Tuple, kwargs []starlark.Tuple) (*repoSpec, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: repository rules take keyword arguments only", r.Name())
	}
	s := &repoSpec{rule: r, attrs: starlark.StringDict{}, pos: pos}
	for _, kv := range kwargs {
		name := string(kv[0].(starlark.String))
		switch {
		case name == "name":
			n, ok := starlark.AsString(kv[1])
			if !ok || n == "" {
				return nil, fmt.Errorf("%s: name must be a non-empty string", r.Name())
			}
			s.name = n
		case r.attrs[name] != nil:
			a := r.attrs[name]
			if err := a.check(name, kv[1]); err != nil {
				return nil, fmt.Errorf("%s %s: %v", r.Name(), s.name, err)
			}
			s.attrs[name] = kv[1]
			if a.isLabel() {
				// Labels of the main repository, where the repository
				// is declared, as Labels.
				s.attrs[name] = labelsIn(kv[1], "")
			}
		default:
			return nil, unknownAttr(r.Name(), name, sortedKeys(r.attrs))
		}
	}
	if s.name == "" {
		return nil, fmt.Errorf("%s: a repository needs a name", r.Name())
	}
	for name, a := range r.attrs {
		if _, set := s.attrs[name]; !set {
			if a.mandatory {
				return nil, fmt.Errorf("%s %s: attribute %s is mandatory", r.Name(), s.name, name)
			}
			s.attrs[name] = a.zero()
		}
	}
	s.attrs["name"] = starlark.String(s.name)
	return s, nil
}

// digest is the spec's definition: what, changed, makes it fetched again.
func (s *repoSpec) digest(ld *loader.Loader) string {
	h := sha256.New()
	repo, p := starlarkFile(s.rule.file)
	src, _ := ld.ReadFile(repo, p)
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00", s.rule.file, src, s.rule.Name())
	for _, k := range sortedDictKeys(s.attrs) {
		fmt.Fprintf(h, "%s=%s\x00", k, s.attrs[k])
	}
	for _, e := range s.rule.environ {
		fmt.Fprintf(h, "env %s=%s\x00", e, os.Getenv(e))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// fetchedMarker marks a repository whose implementation finished.
const fetchedMarker = ".rbs-fetched"

// fetch makes repository s, or finds it made: its directory.
func (w *Workspace) fetch(s *repoSpec) (string, error) {
	if w.cfg.RepoDir == "" {
		return "", fmt.Errorf("repository %s: no repository cache (Config.RepoDir)", s.name)
	}
	dir := filepath.Join(w.cfg.RepoDir, s.name+"-"+s.digest(w.loader))
	if _, err := os.Stat(filepath.Join(dir, fetchedMarker)); err == nil {
		return dir, nil
	}
	return w.make(dir, func(tmp string) error {
		rctx := &repoContext{ws: w, dir: tmp, spec: s}
		thread := &starlark.Thread{Name: "fetching @" + s.name, Print: w.debug}
		defer guard.Track(thread)()
		if _, err := starlark.Call(thread, s.rule.impl, starlark.Tuple{rctx}, nil); err != nil {
			return fmt.Errorf("fetching repository @%s (%s at %s) failed: %w", s.name, s.rule.Name(), s.pos, loader.Describe(err))
		}
		return nil
	})
}

// make makes repository directory dir with fill, aside and renamed into
// place once filled and marked, so that a fetch cut short, or one racing
// another build's, leaves no half-made repository.
func (w *Workspace) make(dir string, fill func(tmp string) error) (string, error) {
	if err := os.MkdirAll(w.cfg.RepoDir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(w.cfg.RepoDir, filepath.Base(dir)+".tmp-")
	if err != nil {
		return "", err
	}
	if err := fill(tmp); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, fetchedMarker), nil, 0o644); err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, fetchedMarker)); err == nil {
		os.RemoveAll(tmp) // another build made it meanwhile
		return dir, nil
	}
	os.RemoveAll(dir) // a fetch cut short before its marker
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(filepath.Join(dir, fetchedMarker)); serr == nil {
			return dir, nil // another build made it first
		}
		return "", err
	}
	return dir, nil
}

// lazyDir is a repository's directory, fetched on first use.
type lazyDir struct {
	once sync.Once
	get  func() (string, error)
	dir  string
	err  error
}

func (l *lazyDir) path() (string, error) {
	l.once.Do(func() { l.dir, l.err = l.get() })
	return l.dir, l.err
}

// repoContext is repository_ctx (and, with spec nil, module_ctx's file
// functions): it works in dir.
type repoContext struct {
	ws   *Workspace
	dir  string
	spec *repoSpec
	// extra are module_ctx's own fields.
	extra starlark.StringDict
}

var _ starlark.HasAttrs = (*repoContext)(nil)

func (c *repoContext) String() string {
	if c.spec == nil {
		return "<module_ctx>"
	}
	return "<repository_ctx for @" + c.spec.name + ">"
}
func (c *repoContext) Type() string { return "repository_ctx" }
func (c *repoContext) Freeze()      {}
func (c *repoContext) Truth() starlark.Bool {
	return true
}
func (c *repoContext) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: repository_ctx") }

func (c *repoContext) AttrNames() []string {
	names := []string{"delete", "download", "download_and_extract", "execute", "extract", "file", "getenv", "os", "patch", "path", "read",
		"report_progress", "symlink", "template", "which", "workspace_root"}
	if c.spec != nil {
		names = append(names, "attr", "name")
	}
	for k := range c.extra {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (c *repoContext) Attr(name string) (starlark.Value, error) {
	if v, ok := c.extra[name]; ok {
		return v, nil
	}
	fn := func(f func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error)) starlark.Value {
		return starlark.NewBuiltin(name, f)
	}
	switch name {
	case "name":
		if c.spec != nil {
			return starlark.String(c.spec.name), nil
		}
	case "attr":
		if c.spec != nil {
			return starlarkstruct.FromStringDict(starlark.String("attr"), c.spec.attrs), nil
		}
	case "workspace_root":
		return &repoPath{c.ws.Root}, nil
	case "os":
		env := starlark.NewDict(0)
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env.SetKey(starlark.String(k), starlark.String(v))
		}
		return starlarkstruct.FromStringDict(starlark.String("repository_os"), starlark.StringDict{
			"name": starlark.String(osName()), "arch": starlark.String(runtime.GOARCH), "environ": env,
		}), nil
	case "path":
		return fn(c.pathBuiltin), nil
	case "file":
		return fn(c.file), nil
	case "template":
		return fn(c.template), nil
	case "symlink":
		return fn(c.symlink), nil
	case "read":
		return fn(c.read), nil
	case "delete":
		return fn(c.delete), nil
	case "which":
		return fn(func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var prog string
			if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &prog); err != nil {
				return nil, err
			}
			p, err := exec.LookPath(prog)
			if err != nil {
				return starlark.None, nil
			}
			return &repoPath{p}, nil
		}), nil
	case "getenv":
		return fn(func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			var n string
			var def starlark.Value = starlark.None
			if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &n, "default?", &def); err != nil {
				return nil, err
			}
			if v, ok := os.LookupEnv(n); ok {
				return starlark.String(v), nil
			}
			return def, nil
		}), nil
	case "execute":
		return fn(c.execute), nil
	case "patch":
		return fn(c.patch), nil
	case "download":
		return fn(c.downloadBuiltin), nil
	case "download_and_extract":
		return fn(c.downloadAndExtract), nil
	case "extract":
		return fn(c.extract), nil
	case "report_progress":
		return fn(ignoredCall), nil
	}
	return nil, nil
}

// osName is repository_ctx.os.name as Bazel gives it.
func osName() string {
	if runtime.GOOS == "darwin" {
		return "mac os x"
	}
	return runtime.GOOS
}

// resolve is a path argument: a Label (a file of the main repository or
// a repository rbs knows), a path, or a string relative to the
// repository's directory.
func (c *repoContext) resolve(v starlark.Value) (string, error) {
	switch x := v.(type) {
	case *repoPath:
		return x.p, nil
	case Label:
		l := canonical(x.Label)
		dir, ok := c.ws.onDisk(l.Pkg)
		if !ok {
			return "", fmt.Errorf("%s: not a file on this machine", Label{l}.shown())
		}
		return filepath.Join(dir, filepath.FromSlash(l.Name)), nil
	case starlark.String:
		p := string(x)
		if filepath.IsAbs(p) {
			return p, nil
		}
		if err := inside(p); err != nil {
			return "", err
		}
		return filepath.Join(c.dir, filepath.FromSlash(p)), nil
	}
	return "", fmt.Errorf("want a path, a Label or a string, got %s", v.Type())
}

// inside checks a relative path stays in the repository's directory.
func inside(p string) error {
	clean := filepath.ToSlash(filepath.Clean(p))
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("path %q leaves the repository's directory", p)
	}
	return nil
}

func (c *repoContext) pathBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	p, err := c.resolve(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return &repoPath{p}, nil
}

// writable resolves a path the context writes: in its directory.
func (c *repoContext) writable(fn string, v starlark.Value) (string, error) {
	p, err := c.resolve(v)
	if err != nil {
		return "", fmt.Errorf("%s: %v", fn, err)
	}
	if rel, err := filepath.Rel(c.dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("%s: %s is outside the repository's directory", fn, p)
	}
	return p, os.MkdirAll(filepath.Dir(p), 0o755)
}

func (c *repoContext) file(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var at starlark.Value
	var content string
	executable := true
	var legacy bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &at, "content?", &content, "executable?", &executable, "legacy_utf8?", &legacy); err != nil {
		return nil, err
	}
	p, err := c.writable(b.Name(), at)
	if err != nil {
		return nil, err
	}
	return starlark.None, writeFile(p, []byte(content), executable)
}

func (c *repoContext) template(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var at, tmpl starlark.Value
	var subs *starlark.Dict
	executable := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &at, "template", &tmpl, "substitutions?", &subs, "executable?", &executable); err != nil {
		return nil, err
	}
	text, err := c.readArg(b.Name(), tmpl)
	if err != nil {
		return nil, err
	}
	if subs != nil {
		for _, kv := range subs.Items() {
			k, _ := starlark.AsString(kv[0])
			v, _ := starlark.AsString(kv[1])
			text = bytes.ReplaceAll(text, []byte(k), []byte(v))
		}
	}
	p, err := c.writable(b.Name(), at)
	if err != nil {
		return nil, err
	}
	return starlark.None, writeFile(p, text, executable)
}

func (c *repoContext) symlink(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var target, link starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "target", &target, "link_name", &link); err != nil {
		return nil, err
	}
	t, err := c.resolve(target)
	if err != nil {
		return nil, fmt.Errorf("%s: target: %v", b.Name(), err)
	}
	p, err := c.writable(b.Name(), link)
	if err != nil {
		return nil, err
	}
	os.Remove(p)
	return starlark.None, os.Symlink(t, p)
}

func (c *repoContext) read(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var at starlark.Value
	var watch starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &at, "watch?", &watch); err != nil {
		return nil, err
	}
	text, err := c.readArg(b.Name(), at)
	if err != nil {
		return nil, err
	}
	return starlark.String(text), nil
}

// readArg reads the file a path argument of fn names.
func (c *repoContext) readArg(fn string, v starlark.Value) ([]byte, error) {
	p, err := c.resolve(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	text, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", fn, err)
	}
	return text, nil
}

// writeFile writes a file of the repository, executable or not.
func writeFile(p string, content []byte, executable bool) error {
	mode := os.FileMode(0o644)
	if executable {
		mode = 0o755
	}
	return os.WriteFile(p, content, mode)
}

func (c *repoContext) delete(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var at starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &at); err != nil {
		return nil, err
	}
	p, err := c.writable(b.Name(), at)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Lstat(p)
	return starlark.Bool(statErr == nil), os.RemoveAll(p)
}

func (c *repoContext) execute(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var argv *starlark.List
	timeout := 600
	var env *starlark.Dict
	quiet := true
	var workdir starlark.Value = starlark.String("")
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "arguments", &argv, "timeout?", &timeout, "environment?", &env,
		"quiet?", &quiet, "working_directory?", &workdir); err != nil {
		return nil, err
	}
	if argv.Len() == 0 {
		return nil, fmt.Errorf("%s: arguments is empty", b.Name())
	}
	var words []string
	for i := 0; i < argv.Len(); i++ {
		switch x := argv.Index(i).(type) {
		case *repoPath:
			words = append(words, x.p)
		case Label:
			p, err := c.resolve(x)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", b.Name(), err)
			}
			words = append(words, p)
		default:
			s, ok := starlark.AsString(x)
			if !ok {
				s = x.String()
			}
			words = append(words, s)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(timeout)*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, words[0], words[1:]...)
	cmd.Dir = c.dir
	if wd, _ := starlark.AsString(workdir); wd != "" {
		d, err := c.resolve(starlark.String(wd))
		if err != nil {
			return nil, fmt.Errorf("%s: working_directory: %v", b.Name(), err)
		}
		cmd.Dir = d
	}
	cmd.Env = os.Environ()
	if env != nil {
		for _, kv := range env.Items() {
			k, _ := starlark.AsString(kv[0])
			v, _ := starlark.AsString(kv[1])
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		switch {
		case ctx.Err() != nil:
			code = 256
			stderr.WriteString(fmt.Sprintf("timed out after %d s\n", timeout))
		case errors.As(err, &ee):
			code = ee.ExitCode()
		default:
			code = 256
			stderr.WriteString(err.Error() + "\n")
		}
	}
	return starlarkstruct.FromStringDict(starlark.String("exec_result"), starlark.StringDict{
		"return_code": starlark.MakeInt(code), "stdout": starlark.String(stdout.String()), "stderr": starlark.String(stderr.String()),
	}), nil
}

func (c *repoContext) patch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var file starlark.Value
	strip := 0
	var watch starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "patch_file", &file, "strip?", &strip, "watch_patch?", &watch); err != nil {
		return nil, err
	}
	p, err := c.resolve(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return starlark.None, applyPatch(c.dir, p, strip)
}

// applyPatch applies a unified diff in dir with patch(1).
func applyPatch(dir, file string, strip int) error {
	cmd := exec.Command("patch", fmt.Sprintf("-p%d", strip), "--batch", "--forward", "-i", file)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("patch %s: %v\n%s", file, err, out)
	}
	return nil
}

// repoPath is a path value (repository_ctx.path()).
type repoPath struct{ p string }

var _ starlark.HasAttrs = (*repoPath)(nil)

func (p *repoPath) String() string        { return p.p }
func (p *repoPath) Type() string          { return "path" }
func (p *repoPath) Freeze()               {}
func (p *repoPath) Truth() starlark.Bool  { return true }
func (p *repoPath) Hash() (uint32, error) { return starlark.String(p.p).Hash() }
func (p *repoPath) AttrNames() []string {
	return []string{"basename", "dirname", "exists", "get_child", "is_dir", "readdir", "realpath"}
}

func (p *repoPath) Attr(name string) (starlark.Value, error) {
	switch name {
	case "basename":
		return starlark.String(filepath.Base(p.p)), nil
	case "dirname":
		return &repoPath{filepath.Dir(p.p)}, nil
	case "exists":
		_, err := os.Stat(p.p)
		return starlark.Bool(err == nil), nil
	case "is_dir":
		info, err := os.Stat(p.p)
		return starlark.Bool(err == nil && info.IsDir()), nil
	case "realpath":
		r, err := filepath.EvalSymlinks(p.p)
		if err != nil {
			return nil, err
		}
		return &repoPath{r}, nil
	case "get_child":
		return starlark.NewBuiltin("get_child", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			parts := []string{p.p}
			for _, a := range args {
				s, ok := starlark.AsString(a)
				if !ok {
					return nil, fmt.Errorf("get_child: want strings, got %s", a.Type())
				}
				parts = append(parts, filepath.FromSlash(s))
			}
			return &repoPath{filepath.Join(parts...)}, nil
		}), nil
	case "readdir":
		return starlark.NewBuiltin("readdir", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
			entries, err := os.ReadDir(p.p)
			if err != nil {
				return nil, err
			}
			out := make([]starlark.Value, len(entries))
			for i, e := range entries {
				out[i] = &repoPath{filepath.Join(p.p, e.Name())}
			}
			return starlark.NewList(out), nil
		}), nil
	}
	return nil, nil
}

// ruleIn loads the repository rule name from bzl, a label of the main
// repository or of one rbs knows.
func (w *Workspace) ruleIn(bzl, name string) (*RepositoryRule, error) {
	m, err := loader.Resolve(bzl, "", "")
	if err != nil {
		return nil, err
	}
	globals, err := w.loader.Load(m)
	if err != nil {
		return nil, err
	}
	r, ok := globals[name].(*RepositoryRule)
	if !ok {
		return nil, fmt.Errorf("%s has no repository rule %s", bzl, name)
	}
	return r, nil
}
