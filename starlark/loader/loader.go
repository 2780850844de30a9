// Package loader loads Starlark modules (.rbs and .bzl files) for rbs: it
// resolves load() labels against the workspace and against embedded
// repositories such as @rbs, executes each module once even when many
// goroutines ask for it at the same time, freezes its globals so they can
// be shared, and reports a load cycle with the whole cycle.
package loader

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/rbs-build/rbs/starlark/guard"
	"github.com/rbs-build/rbs/starlark/label"
	"github.com/rbs-build/rbs/starlark/spell"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Module names a loadable file: its repository ("" for the workspace) and
// slash-separated path in it.
type Module struct {
	Repo string
	Path string
}

func (m Module) String() string {
	if m.Repo == "" {
		return "//" + m.Path
	}
	return "@" + m.Repo + "//" + m.Path
}

// Package returns the directory of the module, as a package path.
func (m Module) Package() string {
	if d := path.Dir(m.Path); d != "." {
		return d
	}
	return ""
}

// Resolve turns the label of a load() in package pkg of repository repo
// into a Module: a label without a repository is one of repo. Both
// "//pkg:file.rbs" and the path form "//pkg/file.rbs" are accepted.
func Resolve(s, repo, pkg string) (Module, error) {
	l, err := label.ParseRelative(s, pkg)
	if err != nil {
		return Module{}, err
	}
	if !strings.HasPrefix(s, "@") {
		l.Repo = repo // "//pkg:f" in a repository's file names its own package
	}
	p := path.Join(l.Pkg, l.Name)
	if ext := path.Ext(l.Pkg); (ext == ".rbs" || ext == ".bzl") && l.Name == path.Base(l.Pkg) && !strings.Contains(s, ":") {
		p = l.Pkg // the path form
	}
	if ext := path.Ext(p); ext != ".rbs" && ext != ".bzl" {
		return Module{}, fmt.Errorf("cannot load %q: only .rbs and .bzl files can be loaded", s)
	}
	return Module{Repo: l.Repo, Path: p}, nil
}

// Loader loads and caches modules. It is safe for concurrent use.
type Loader struct {
	root  string
	repos map[string]fs.FS
	// env returns the predeclared names for a module.
	env func(Module) starlark.StringDict
	// loaded sees each module's globals once, before they are frozen.
	loaded func(Module, starlark.StringDict)
	// Print, if set, is the print() of every thread the loader makes.
	Print func(*starlark.Thread, string)

	mu    sync.Mutex
	cache map[Module]*entry
}

type entry struct {
	owner   *loadChain // the chain loading it, while in progress
	ready   chan struct{}
	globals starlark.StringDict
	err     error
}

// loadChain is one goroutine's stack of modules being loaded; waitsFor is
// the entry it is blocked on, for detecting cycles across goroutines.
type loadChain struct {
	stack    []Module
	waitsFor *entry
}

// New returns a Loader for the workspace at root with embedded repositories
// (such as "rbs"), a function giving each module its predeclared names, and
// an optional function that sees each module's globals before they are
// frozen (to name the rules a module exports, say).
func New(root string, repos map[string]fs.FS, env func(Module) starlark.StringDict, loaded func(Module, starlark.StringDict)) *Loader {
	return &Loader{root: root, repos: repos, env: env, loaded: loaded, cache: map[Module]*entry{}}
}

// ReadFile reads a file of a repository.
func (l *Loader) ReadFile(repo, p string) ([]byte, error) {
	if repo == "" {
		return os.ReadFile(filepath.Join(l.root, filepath.FromSlash(p)))
	}
	fsys, ok := l.repos[repo]
	if !ok {
		names := make([]string, 0, len(l.repos))
		for r := range l.repos {
			names = append(names, "@"+r)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown repository @%s: no local_repository, repository rule, bazel_dep with a local_path_override or --registry declares it; the repositories are %s", repo, strings.Join(names, ", "))
	}
	return fs.ReadFile(fsys, p)
}

// Modules returns the modules loaded or being loaded.
func (l *Loader) Modules() []Module {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms := make([]Module, 0, len(l.cache))
	for m := range l.cache {
		ms = append(ms, m)
	}
	return ms
}

// Load returns the frozen globals of a module, loading it if needed.
func (l *Loader) Load(m Module) (starlark.StringDict, error) {
	return l.load(&loadChain{}, m)
}

// ErrCycle marks a load cycle.
var ErrCycle = errors.New("load cycle")

func (l *Loader) load(chain *loadChain, m Module) (starlark.StringDict, error) {
	for i, s := range chain.stack {
		if s == m {
			return nil, cycleError(append(chain.stack[i:], m))
		}
	}
	l.mu.Lock()
	e, ok := l.cache[m]
	if ok {
		if e.owner != nil {
			// In progress on another goroutine: waiting on it must not
			// close a cycle.
			for w := e; w != nil && w.owner != nil; w = w.owner.waitsFor {
				if w.owner == chain {
					l.mu.Unlock()
					return nil, cycleError(append(chain.stack, m))
				}
			}
		}
		chain.waitsFor = e
		l.mu.Unlock()
		<-e.ready
		l.mu.Lock()
		chain.waitsFor = nil
		l.mu.Unlock()
		return e.globals, e.err
	}
	e = &entry{owner: chain, ready: make(chan struct{})}
	l.cache[m] = e
	l.mu.Unlock()

	chain.stack = append(chain.stack, m)
	e.globals, e.err = l.exec(chain, m)
	chain.stack = chain.stack[:len(chain.stack)-1]

	l.mu.Lock()
	e.owner = nil
	l.mu.Unlock()
	close(e.ready)
	return e.globals, e.err
}

func cycleError(ms []Module) error {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.String()
	}
	return fmt.Errorf("%w: %s", ErrCycle, strings.Join(names, " -> "))
}

func (l *Loader) exec(chain *loadChain, m Module) (starlark.StringDict, error) {
	src, err := l.ReadFile(m.Repo, m.Path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", m, err)
	}
	thread := l.Thread(m.String(), m.Repo, m.Package(), chain)
	defer guard.Track(thread)()
	env := l.env(m)
	globals, err := starlark.ExecFileOptions(fileOptions, thread, m.String(), src, env)
	if err != nil {
		return nil, Describe(suggest(err, env))
	}
	if l.loaded != nil {
		l.loaded(m, globals)
	}
	globals.Freeze()
	return globals, nil
}

// fileOptions allows what Bazel's dialect of Starlark allows.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}

// Thread returns a thread whose load() resolves labels relative to package
// pkg of repository repo.
func (l *Loader) Thread(name, repo, pkg string, chain *loadChain) *starlark.Thread {
	if chain == nil {
		chain = &loadChain{}
	}
	return &starlark.Thread{
		Name:  name,
		Print: l.Print,
		Load: func(_ *starlark.Thread, module string) (starlark.StringDict, error) {
			m, err := Resolve(module, repo, pkg)
			if err != nil {
				return nil, err
			}
			return l.load(chain, m)
		},
	}
}

// ExecBuild executes a BUILD file's source with the given predeclared names
// on a thread prepared by the caller (so that rule calls can find their
// package); load() resolves relative to pkg.
func (l *Loader) ExecBuild(thread *starlark.Thread, filename string, src []byte, env starlark.StringDict) error {
	defer guard.Track(thread)()
	_, err := starlark.ExecFileOptions(fileOptions, thread, filename, src, env)
	if err != nil {
		return Describe(suggest(err, env))
	}
	return nil
}

// suggest adds to each "undefined: NAME" of a file's resolve errors the
// predeclared name it was likely meant to be (cc_libary: cc_library),
// which Starlark's resolver cannot, as it does not see them.
func suggest(err error, env starlark.StringDict) error {
	var list resolve.ErrorList
	if !errors.As(err, &list) {
		return err
	}
	names := append(env.Keys(), starlark.Universe.Keys()...)
	for i, e := range list {
		if name, ok := strings.CutPrefix(e.Msg, "undefined: "); ok && !strings.Contains(name, " ") {
			list[i].Msg += spell.DidYouMean(name, names)
		}
	}
	return list
}

// Describe formats a Starlark error with its position and backtrace.
func Describe(err error) error {
	var evalErr *starlark.EvalError
	if errors.As(err, &evalErr) {
		return &Error{msg: shortBacktrace(evalErr.Backtrace()), err: err}
	}
	return err
}

// maxFrames is how many calls a backtrace shows at each end of a deep one.
const maxFrames = 20

// shortBacktrace leaves out the middle of a backtrace of more than twice
// maxFrames calls, as a recursion that did not end makes, saying how many.
func shortBacktrace(bt string) string {
	lines := strings.Split(bt, "\n")
	// The first line is the heading, the last the error: the rest calls.
	if len(lines) <= 2*maxFrames+2 {
		return bt
	}
	calls := lines[1 : len(lines)-1]
	out := append([]string{lines[0]}, calls[:maxFrames]...)
	out = append(out, fmt.Sprintf("  ... %d calls more ...", len(calls)-2*maxFrames))
	out = append(out, calls[len(calls)-maxFrames:]...)
	return strings.Join(append(out, lines[len(lines)-1]), "\n")
}

// Error is a Starlark evaluation error with its backtrace.
type Error struct {
	msg string
	err error
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.err }
