package rules

// The Go half of the C/C++ rules (rules/cc/rules.rbs): the system toolchain,
// and the include scanner that keeps a compile's inputs to the headers its
// source includes.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/google/shlex"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// ccToolchain is the system C/C++ toolchain.
type ccToolchain struct {
	cc, cxx, ar []string // the program and its flags
	err         error
}

// findCCToolchain finds the toolchain: $CC and $CXX (each a program and
// flags), else gcc and g++, else clang and clang++, on PATH; and ar ($AR).
func findCCToolchain() ccToolchain {
	var t ccToolchain
	find := func(env string, names ...string) ([]string, error) {
		if v := strings.Fields(os.Getenv(env)); len(v) > 0 {
			p, err := exec.LookPath(v[0])
			if err != nil {
				return nil, fmt.Errorf("$%s names %s: %v", env, v[0], err)
			}
			return append([]string{p}, v[1:]...), nil
		}
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return []string{p}, nil
			}
		}
		return nil, fmt.Errorf("no %s: set $%s or install one of %s", strings.ToLower(env), env, strings.Join(names, ", "))
	}
	var errs []error
	var err error
	if t.cc, err = find("CC", "gcc", "clang", "cc"); err != nil {
		errs = append(errs, err)
	}
	if t.cxx, err = find("CXX", "g++", "clang++", "c++"); err != nil {
		errs = append(errs, err)
	}
	if t.ar, err = find("AR", "ar", "llvm-ar"); err != nil {
		errs = append(errs, err)
	}
	t.err = errors.Join(errs...)
	return t
}

var (
	ccOnce sync.Once
	ccTC   ccToolchain
)

// systemCC is the toolchain, found once.
func systemCC() ccToolchain {
	ccOnce.Do(func() { ccTC = findCCToolchain() })
	return ccTC
}

// value is the toolchain as the C/C++ rules see it.
func (t ccToolchain) value() starlark.Value {
	list := func(ss []string) *starlark.List {
		out := make([]starlark.Value, len(ss))
		for i, s := range ss {
			out[i] = starlark.String(s)
		}
		return starlark.NewList(out)
	}
	return starlarkstruct.FromStringDict(starlark.String("CcToolchainInfo"), starlark.StringDict{
		"cc":         starlark.String(t.cc[0]),
		"cxx":        starlark.String(t.cxx[0]),
		"ar":         starlark.String(t.ar[0]),
		"conlyopts":  list(t.cc[1:]),
		"cxxopts":    list(t.cxx[1:]),
		"linkopts":   list(t.cxx[1:]),
		"env":        starlark.NewDict(0),
		"compiler":   starlark.String(filepath.Base(t.cc[0])),
		"target_cpu": starlark.None,
	})
}

// ccToolchainBuiltin is cc_toolchain(). Without a toolchain on this
// machine, analysis goes on with the programs' plain names, which the
// workers that run the actions may have on their PATH.
func ccToolchainBuiltin(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
	t := systemCC()
	if t.err != nil {
		return ccToolchain{cc: []string{"gcc"}, cxx: []string{"g++"}, ar: []string{"ar"}}.value(), nil
	}
	return t.value(), nil
}

// shellSplitBuiltin is cc_shell_split(s): the words of s as a Bourne shell
// reads them, which is how Bazel reads copts, defines and linkopts.
func shellSplitBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var s string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &s); err != nil {
		return nil, err
	}
	words, err := shlex.Split(s)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", s, err)
	}
	out := make([]starlark.Value, len(words))
	for i, w := range words {
		out[i] = starlark.String(w)
	}
	return starlark.NewList(out), nil
}

// includeLine matches an #include (or #import) and what it names.
var includeLine = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*(?:include|import|include_next)[ \t]*([<"][^>"\n]*[>"]|\S+)`)

// includeScan scans sources and headers for what they include, once each.
type includeScan struct {
	an    *analyzer
	mu    sync.Mutex
	found map[string][]string // by exec path: the #include operands; nil: cannot tell
	read  map[string]bool
	// sources are the source files read, from the workspace root.
	sources []string
}

// includes returns the #include operands of f ("<a.h>", "\"b.h\""), and
// false when they cannot be known at analysis: a generated file not copied
// from a source, or an include through a macro.
func (s *includeScan) includes(f *File) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read[f.Path()] {
		inc := s.found[f.Path()]
		return inc, inc != nil
	}
	s.read[f.Path()] = true
	src := f
	for src.Generated {
		a := s.an.actions[src.Path()]
		if a == nil || a.Copy == nil {
			return nil, false
		}
		src = a.Copy
	}
	s.sources = append(s.sources, src.ShortPath)
	b, err := os.ReadFile(filepath.Join(s.an.ws.Root, filepath.FromSlash(src.ShortPath)))
	if err != nil {
		return nil, false
	}
	inc := []string{}
	for _, m := range includeLine.FindAllStringSubmatch(string(b), -1) {
		op := m[1]
		if op[0] != '<' && op[0] != '"' {
			return nil, false // #include MACRO
		}
		inc = append(inc, op)
	}
	s.found[f.Path()] = inc
	return inc, true
}

// ccScanIncludes is cc_scan_includes(src, headers, includes): of headers,
// those src includes, directly or through one another, resolving quoted
// includes against the including file's directory, the workspace root and
// the output root, and both kinds against includes (-I directories). When
// that cannot be told (a generated header, an #include through a macro),
// all headers.
func (an *analyzer) ccScanIncludes(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var src *File
	var headers, dirs *starlark.List
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "src", &src, "headers", &headers, "includes", &dirs); err != nil {
		return nil, err
	}
	byPath := map[string]*File{}
	all := make([]starlark.Value, 0, headers.Len())
	for i := 0; i < headers.Len(); i++ {
		f, ok := headers.Index(i).(*File)
		if !ok {
			return nil, fmt.Errorf("%s: headers must be Files, got %s", b.Name(), headers.Index(i).Type())
		}
		byPath[f.Path()] = f
		all = append(all, f)
	}
	search, err := stringList(dirs)
	if err != nil {
		return nil, fmt.Errorf("%s: includes: %v", b.Name(), err)
	}
	quoteRoots := append([]string{".", an.ws.BinDir()}, search...)
	var used []starlark.Value
	seen := map[string]bool{}
	queue := []*File{src}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		ops, ok := an.scan.includes(f)
		if !ok {
			return starlark.NewList(all), nil
		}
		for _, op := range ops {
			name := op[1 : len(op)-1]
			roots := search
			if op[0] == '"' {
				roots = append([]string{path.Dir(f.Path())}, quoteRoots...)
			}
			for _, r := range roots {
				h := byPath[path.Clean(path.Join(r, name))]
				if h == nil {
					continue
				}
				if !seen[h.Path()] {
					seen[h.Path()] = true
					used = append(used, h)
					queue = append(queue, h)
				}
				break
			}
		}
	}
	return starlark.NewList(used), nil
}
