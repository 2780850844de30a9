// Package engine executes the action graph that analysis produced: it
// finds the actions needed for the requested files, runs them in
// dependency order with bounded parallelism on an executor (local or
// remote), and reports progress. Actions whose results are cached run
// nothing, so a build with nothing changed runs no action.
package engine

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/executor"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rules"
)

// Stats counts what a build did.
type Stats struct {
	Total    int // actions needed
	Done     int
	Running  int
	Executed int // actions that ran a process
	Cached   int // actions served from the action cache
}

// Engine runs actions.
type Engine struct {
	Root string // the workspace root, which is also the exec root
	Exec executor.Executor
	Jobs int
	// Platform holds the platform properties (OSFamily, ISA) of the target
	// platform, which every action carries, so that a remote executor sends
	// it to a worker of that platform.
	Platform map[string]string
	Progress func(Stats) // called on every change, from one goroutine at a time
	// Log receives the output of failed actions.
	Log io.Writer
	// KeepGoing, as Bazel's --keep_going, runs every action that does
	// not depend on a failed one instead of stopping at the first failure.
	KeepGoing bool
	// RepoMapping is the _repo_mapping file of the runfiles trees that
	// actions and tests run in.
	RepoMapping string
}

// FailedError is a build that went on past failed actions (KeepGoing).
type FailedError struct {
	Errs    []error         // of the failed actions, in the order they failed
	Skipped int             // actions not run as they depend on a failed one
	Unbuilt map[string]bool // exec paths of the outputs of both
}

func (e *FailedError) Error() string {
	msgs := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		msgs[i] = err.Error()
	}
	return fmt.Sprintf("%s\nfailed actions: %d; not run, as they depend on them: %d", strings.Join(msgs, "\n"), len(e.Errs), e.Skipped)
}

// ActionError is an action that ran and failed.
type ActionError struct {
	Action   *rules.Action
	ExitCode int
	Output   string
}

func (e *ActionError) Error() string {
	return fmt.Sprintf("%s failed (exit %d):\n%s", e.Action.Description(), e.ExitCode, e.Output)
}

type node struct {
	action  *rules.Action
	deps    []*node
	waiting int
	users   []*node
	skipped bool // depends on a failed action (KeepGoing)
}

// Build makes the given files, running what is needed.
func (e *Engine) Build(ctx context.Context, an *rules.Analysis, files []*rules.File) (Stats, error) {
	nodes := map[*rules.Action]*node{}
	var visit func(f *rules.File) *node
	var order []*node
	visit = func(f *rules.File) *node {
		if !f.Generated {
			return nil
		}
		a := an.Producer[f.Path()]
		if a == nil {
			return nil
		}
		if n, ok := nodes[a]; ok {
			return n
		}
		n := &node{action: a}
		nodes[a] = n
		for _, in := range a.Inputs {
			if d := visit(in); d != nil && !containsNode(n.deps, d) {
				n.deps = append(n.deps, d)
			}
		}
		order = append(order, n)
		return n
	}
	for _, f := range files {
		if !f.Generated {
			if _, err := os.Stat(filepath.Join(e.Root, f.Path())); err != nil {
				return Stats{}, fmt.Errorf("missing source file %s", f.ShortPath)
			}
		}
		visit(f)
	}
	for _, n := range order {
		n.waiting = len(n.deps)
		for _, d := range n.deps {
			d.users = append(d.users, n)
		}
	}
	st := Stats{Total: len(order)}
	if len(order) == 0 {
		return st, nil
	}
	jobs := max(e.Jobs, 1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var mu sync.Mutex
	var firstErr error
	ready := make(chan *node, len(order))
	for _, n := range order {
		if n.waiting == 0 {
			ready <- n
		}
	}
	failed := &FailedError{Unbuilt: map[string]bool{}}
	// fail records n's failure, under mu: its outputs and those of the
	// actions depending on it go unbuilt, and those actions, passed to the
	// loop as skipped, never run.
	var fail func(n *node)
	fail = func(n *node) {
		for _, o := range n.action.Outputs {
			failed.Unbuilt[o.Path()] = true
		}
		for _, u := range n.users {
			if !u.skipped {
				u.skipped = true
				failed.Skipped++
				ready <- u
				fail(u)
			}
		}
	}
	report := func() {
		if e.Progress != nil {
			e.Progress(st)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, jobs)
	remaining := len(order)
	for remaining > 0 {
		var n *node
		select {
		case n = <-ready:
		case <-ctx.Done():
		}
		if n == nil {
			break
		}
		remaining--
		mu.Lock()
		skipped := n.skipped
		mu.Unlock()
		if skipped {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		mu.Lock()
		st.Running++
		report()
		mu.Unlock()
		go func(n *node) {
			defer wg.Done()
			defer func() { <-sem }()
			ran, cached, err := e.run(ctx, n.action)
			mu.Lock()
			defer mu.Unlock()
			st.Running--
			if err != nil && e.KeepGoing && ctx.Err() == nil {
				failed.Errs = append(failed.Errs, err)
				fail(n)
				report()
				return
			}
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				cancel()
				report()
				return
			}
			st.Done++
			if ran {
				st.Executed++
			}
			if cached {
				st.Cached++
			}
			report()
			for _, u := range n.users {
				u.waiting--
				if u.waiting == 0 {
					ready <- u
				}
			}
		}(n)
	}
	wg.Wait()
	if firstErr != nil {
		return st, firstErr
	}
	if err := ctx.Err(); err != nil {
		return st, err
	}
	if len(failed.Errs) > 0 {
		return st, failed
	}
	return st, nil
}

func containsNode(ns []*node, n *node) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}

// run performs one action and reports whether a process ran and whether
// the result came from the cache.
func (e *Engine) run(ctx context.Context, a *rules.Action) (ran, cached bool, err error) {
	switch {
	case a.Write:
		content := a.Content
		if a.LateContent != nil {
			if content, err = a.LateContent(e.listDir); err != nil {
				return false, false, fmt.Errorf("%s: %w", a.Description(), err)
			}
		}
		return false, false, writeIfChanged(filepath.Join(e.Root, a.Outputs[0].Path()), []byte(content), a.Executable)
	case a.Copy != nil:
		b, err := os.ReadFile(filepath.Join(e.Root, a.Copy.Path()))
		if err != nil {
			return false, false, fmt.Errorf("%s: %w", a.Description(), err)
		}
		return false, false, writeIfChanged(filepath.Join(e.Root, a.Outputs[0].Path()), a.Substitute(b), a.Executable)
	}
	act := &executor.Action{Description: a.Description(), Args: a.Args, Env: a.Env, Platform: e.Platform}
	if a.LateArgs != nil {
		if act.Args, err = a.LateArgs(e.listDir); err != nil {
			return false, false, fmt.Errorf("%s: %w", a.Description(), err)
		}
	}
	if !a.Platform.IsZero() {
		act.Platform = a.Platform.Properties()
	}
	for _, o := range a.Outputs {
		if o.IsDirectory {
			act.OutputDirs = append(act.OutputDirs, o.Path())
		} else {
			act.Outputs = append(act.Outputs, o.Path())
		}
	}
	inputs, err := e.inputs(a.Inputs)
	if err != nil {
		return false, false, fmt.Errorf("%s: %w", a.Description(), err)
	}
	for _, tool := range slices.Sorted(maps.Keys(a.ToolTrees)) {
		tree, err := e.treeInputs(tool, a.ToolTrees[tool])
		if err != nil {
			return false, false, fmt.Errorf("%s: %w", a.Description(), err)
		}
		inputs = append(inputs, tree...)
	}
	act.Inputs = inputs
	res, err := e.Exec.Run(ctx, act, e.Root)
	if err != nil {
		return false, false, err
	}
	if res.ExitCode != 0 {
		return true, false, &ActionError{Action: a, ExitCode: res.ExitCode, Output: string(res.Stdout) + string(res.Stderr)}
	}
	return !res.Cached, res.Cached, nil
}

// listDir lists the files the directory output dir holds, made by the
// action that ran before, in path order: the Expander of Args that expand
// directories.
func (e *Engine) listDir(dir *rules.File) ([]*rules.File, error) {
	root := filepath.Join(e.Root, filepath.FromSlash(dir.Path()))
	var out []*rules.File
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		out = append(out, &rules.File{ShortPath: dir.ShortPath + "/" + filepath.ToSlash(rel), Generated: true, Bin: dir.Bin, Owner: dir.Owner})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expanding directory %s: %w", dir.ShortPath, err)
	}
	return out, nil
}

// inputs describes files on disk (sources in the workspace, generated files
// under rbs-out) for the executor.
func (e *Engine) inputs(files []*rules.File) ([]merkle.File, error) {
	seen := map[string]bool{}
	var out []merkle.File
	for _, f := range files {
		p := f.Path()
		if seen[p] {
			continue
		}
		seen[p] = true
		abs := filepath.Join(e.Root, filepath.FromSlash(p))
		info, err := os.Stat(abs)
		if err != nil {
			return nil, fmt.Errorf("input %s: %w", p, err)
		}
		if info.IsDir() {
			sub, err := dirFiles(abs, p)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		mf, err := merkle.FileFromDisk(p, abs, info.Mode()&0o111 != 0)
		if err != nil {
			return nil, err
		}
		out = append(out, mf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func dirFiles(abs, rel string) ([]merkle.File, error) {
	var out []merkle.File
	err := filepath.Walk(abs, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		r, _ := filepath.Rel(abs, p)
		mf, err := merkle.FileFromDisk(rel+"/"+filepath.ToSlash(r), p, info.Mode()&0o111 != 0)
		if err != nil {
			return err
		}
		out = append(out, mf)
		return nil
	})
	return out, err
}

func writeIfChanged(path string, b []byte, executable bool) error {
	mode := os.FileMode(0o644)
	if executable {
		mode = 0o755
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
		if info, err := os.Stat(path); err == nil && info.Mode().Perm() == mode {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	os.Remove(path)
	return os.WriteFile(path, b, mode)
}

// RunfilesDir returns where the runfiles tree of an executable lives,
// relative to the exec root.
func RunfilesDir(exe *rules.File) string { return exe.Path() + ".runfiles" }

// MakeRunfiles lays out the runfiles tree of an executable on disk, a
// symlink per file, with its repository mapping (_repo_mapping) and its
// manifest (MANIFEST, and EXE.runfiles_manifest beside it: a line
// "PATH TARGET" per file). It returns the main repository's directory in
// it.
func MakeRunfiles(root, wsName string, exe *rules.File, tree []rules.Runfile, repoMapping string) (string, error) {
	dir := filepath.Join(root, RunfilesDir(exe))
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	var manifest strings.Builder
	for _, r := range tree {
		dst := filepath.Join(dir, filepath.FromSlash(r.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		target := filepath.Join(root, filepath.FromSlash(r.File.Path()))
		if err := os.Symlink(target, dst); err != nil && !os.IsExist(err) {
			return "", err
		}
		fmt.Fprintf(&manifest, "%s %s\n", r.Path, target)
	}
	if err := os.MkdirAll(filepath.Join(dir, wsName), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "_repo_mapping"), []byte(repoMapping), 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(&manifest, "_repo_mapping %s\n", filepath.Join(dir, "_repo_mapping"))
	for _, p := range []string{filepath.Join(dir, "MANIFEST"), dir + "_manifest"} {
		if err := os.WriteFile(p, []byte(manifest.String()), 0o644); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, wsName), nil
}

// RunTest runs a test executable in its runfiles tree as an action: cached
// like any action when the test passes, so an unchanged passing test does
// not run again.
func (e *Engine) RunTest(ctx context.Context, wsName string, exe *rules.File, tree []rules.Runfile, args []string, desc string) (*executor.Result, error) {
	rf := RunfilesDir(exe) + "/" + wsName
	// RUNFILES_DIR and TEST_SRCDIR are the runfiles tree's root, as Bazel
	// sets them, for the runfiles libraries; RUNFILES_MANIFEST_FILE its
	// manifest, written where the tree lands.
	script := fmt.Sprintf(`RUNFILES_DIR="$PWD"/%s TEST_SRCDIR="$PWD"/%[1]s RUNFILES_MANIFEST_FILE="$PWD"/%[1]s/MANIFEST
export RUNFILES_DIR TEST_SRCDIR RUNFILES_MANIFEST_FILE
(cd "$RUNFILES_DIR" && find . ! -type d ! -path ./MANIFEST | sed "s|^\./\(.*\)|\1 $RUNFILES_DIR/\1|" | LC_ALL=C sort) > "$RUNFILES_MANIFEST_FILE"
cd %s && exec ./%s "$@"`,
		shellQuote(RunfilesDir(exe)), shellQuote(rf), shellQuote(exe.ShortPath))
	act := &executor.Action{
		Description: desc,
		Platform:    e.Platform,
		Args:        append([]string{"/bin/sh", "-c", script, "test"}, args...),
		Env: map[string]string{
			"PATH":           "/usr/local/bin:/usr/bin:/bin",
			"TEST_WORKSPACE": wsName,
			"HOME":           "/tmp",
			"TEST_TMPDIR":    "/tmp",
		},
	}
	inputs, err := e.treeInputs(exe.Path(), tree)
	if err != nil {
		return nil, err
	}
	act.Inputs = inputs
	return e.Exec.Run(ctx, act, e.Root)
}

// treeInputs are the inputs that lay out the runfiles tree of the
// executable at exec path exe, beside it (EXE.runfiles/), with its
// _repo_mapping.
func (e *Engine) treeInputs(exe string, tree []rules.Runfile) ([]merkle.File, error) {
	dir := exe + ".runfiles"
	var out []merkle.File
	for _, r := range tree {
		abs := filepath.Join(e.Root, filepath.FromSlash(r.File.Path()))
		info, err := os.Stat(abs)
		if err != nil {
			return nil, err
		}
		mf, err := merkle.FileFromDisk(dir+"/"+r.Path, abs, info.Mode()&0o111 != 0)
		if err != nil {
			return nil, err
		}
		out = append(out, mf)
	}
	mapping := []byte(e.RepoMapping)
	return append(out, merkle.File{Path: dir + "/_repo_mapping", Digest: digest.FromBytes(mapping), Data: mapping}), nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
