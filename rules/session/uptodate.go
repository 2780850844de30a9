package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rbs-build/rbs/rbe/gobfile"
	"github.com/rbs-build/rbs/rules"
	"github.com/rbs-build/rbs/rules/engine"
	"github.com/rbs-build/rbs/rules/stamp"
	"github.com/rbs-build/rbs/starlark/label"
)

// stampKey is all that decides a build besides the files its stamp
// records: this rbs binary, where and how it was asked, and the
// environment.
type stampKey struct {
	Rbs             string
	RbsState        stamp.State
	Root, Dir       string
	Patterns        []string
	Platform        string
	Defines         map[string]string
	Settings        map[string]string
	CompilationMode string
	Platforms, CPU  string
	ExtraToolchains []string
	Copts, Features []string
	Registries      []string
	Remote          string
	RemoteCache     bool
	KeepGoing       bool
	Env             []string
}

// shellNoise are variables a shell changes between commands that no build
// reads.
var shellNoise = []string{"_", "OLDPWD", "SHLVL"}

// stampFile is where the stamp of a build of patterns, as s is configured,
// is kept: in the cache directory, named by a digest of its key. Its plan
// is kept beside it, in the same name with ".plan" added.
func (s *Session) stampFile(patterns []string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(shellNoise, name)
	})
	slices.Sort(env)
	key := stampKey{
		Rbs: exe, Root: s.ws.Root, Dir: s.opts.Dir, Patterns: patterns,
		Platform: s.ws.Platform.String(), Defines: s.opts.Defines, Settings: s.opts.Settings, CompilationMode: s.opts.CompilationMode,
		Platforms: s.opts.Platforms, CPU: s.opts.CPU, ExtraToolchains: s.opts.ExtraToolchains, Copts: s.opts.Copts, Features: s.opts.Features, Registries: s.opts.Registries,
		Remote: s.opts.Remote.Target, RemoteCache: s.opts.RemoteCache, KeepGoing: s.opts.KeepGoing, Env: env,
	}
	rbs := stamp.New()
	if err := rbs.Add(exe); err != nil {
		return "", err
	}
	key.RbsState = rbs.Files[exe]
	b, err := json.Marshal(key)
	if err != nil {
		return "", err
	}
	dir, err := s.cacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return filepath.Join(dir, "stamps", hex.EncodeToString(sum[:16])), nil
}

// plan is what a build ran, kept beside its stamp so that a build after
// only sources changed can run what they feed without loading or
// analysing anything.
type plan struct {
	// Actions are the actions the build's files need.
	Actions []*rules.Action
	// Sources are the source files they read, Outputs the files they
	// write, relative to the workspace root.
	Sources, Outputs []string
	// Read are the files loading and analysis read (absolute paths);
	// Manifests the job manifests the build wrote.
	Read, Manifests []string
	// Late says an action's command line or content is made when it
	// runs, by Starlark the plan does not keep (Args that expand
	// directories): such a plan is not run again without analysis.
	Late bool
}

// newPlan is the plan of the actions that make files, each after those
// that make its inputs.
func newPlan(an *rules.Analysis, files []*rules.File) *plan {
	p := &plan{}
	seen := map[*rules.Action]bool{}
	var visit func(f *rules.File)
	visit = func(f *rules.File) {
		if !f.Generated {
			p.Sources = append(p.Sources, f.Path())
			return
		}
		a := an.Producer[f.Path()]
		if a == nil || seen[a] {
			return
		}
		seen[a] = true
		for _, in := range reads(a) {
			visit(in)
		}
		p.Actions = append(p.Actions, a)
		p.Late = p.Late || a.LateArgs != nil || a.LateContent != nil
		for _, o := range a.Outputs {
			p.Outputs = append(p.Outputs, o.Path())
		}
	}
	for _, f := range files {
		visit(f)
	}
	return p
}

// reads returns the files action a reads.
func reads(a *rules.Action) []*rules.File {
	if a.Copy == nil {
		return a.Inputs
	}
	return append(slices.Clip(a.Inputs), a.Copy)
}

// record is a build's stamp and plan in the making.
type record struct {
	s     *Session
	file  string
	stamp *stamp.Stamp
	plan  *plan
	// summary, when set, is the summary to keep: that of the build whose
	// outputs a Rebuild brought up to date, whose plan is kept already.
	summary *stamp.Summary
}

// beginRecord starts the record of a build of patterns: it forgets the
// last one, so that only a build that succeeds leaves one, and records the
// workspace as loading walks it.
func (s *Session) beginRecord(patterns []string) (*record, error) {
	file, err := s.stampFile(patterns)
	if err != nil {
		return nil, err
	}
	if err := stamp.Remove(file); err != nil {
		return nil, err
	}
	// What the build makes in the workspace's own directory is made
	// first, so that the first build leaves a record too.
	if err := os.MkdirAll(filepath.Join(s.ws.Root, OutDir), 0o755); err != nil {
		return nil, err
	}
	s.linkBin()
	st := stamp.New()
	skip := func(name string, dir bool) bool { return dir && label.SkipDir(name) || name == BinLink }
	if err := st.Walk(s.ws.Root, skip); err != nil {
		return nil, err
	}
	return &record{s: s, file: file, stamp: st}, nil
}

// analysed records the sources the plan's actions read and the files
// loading and analysis read, before the actions run.
func (r *record) analysed(p *plan, read []string) error {
	r.plan = p
	p.Read = read
	return r.stamp.Add(append(r.s.abs(p.Sources), read...)...)
}

// abs returns the paths ps, relative to the workspace root, made absolute.
func (s *Session) abs(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p
		if !filepath.IsAbs(p) {
			out[i] = filepath.Join(s.ws.Root, filepath.FromSlash(p))
		}
	}
	return out
}

// built completes the record once the build has succeeded, with its
// outputs: nil when a file it recorded before changed while it ran, as
// the build may have read either version.
func (r *record) built() (*record, error) {
	if r.stamp.Changed() {
		return nil, nil
	}
	if err := r.stamp.Add(append(r.plan.Manifests, filepath.Join(r.s.ws.Root, BinLink))...); err != nil {
		return nil, err
	}
	for _, o := range r.s.abs(r.plan.Outputs) {
		if err := r.stamp.Walk(o, stamp.None); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Remember keeps the record of the build sum reports, with what it printed
// of its outputs, so that the same build asked again finds it up to date
// (UpToDate) or builds again only what changed sources feed (Rebuild).
func (s *Session) Remember(sum *Summary, outputs string) error {
	r := sum.record
	if r == nil {
		return nil
	}
	if r.summary != nil {
		r.stamp.Summary = *r.summary
	} else {
		st := sum.Stats
		r.stamp.Summary = stamp.Summary{Targets: len(sum.Targets), Actions: st.Total, Internal: st.Total - st.Executed - st.Cached, Outputs: outputs, Debug: s.debug.String()}
	}
	return r.save()
}

func (r *record) save() error {
	if r.summary != nil {
		return r.stamp.Save(r.file) // a Rebuild's plan is the last build's
	}
	if err := gobfile.Save(r.file+".plan", r.plan); err != nil {
		return err
	}
	// The stamp last: without it the plan is never read.
	return r.stamp.Save(r.file)
}

// last is what the last successful build of some patterns left: its stamp
// and the files that have changed since.
type last struct {
	file    string
	stamp   *stamp.Stamp
	changes []string
}

// UpToDate reports whether a build of patterns would change nothing: the
// last build of them, as s is configured, succeeded, and not one file it
// read or wrote has changed since. It returns that build's summary.
func (s *Session) UpToDate(patterns []string) (stamp.Summary, bool) {
	s.last = nil
	file, err := s.stampFile(patterns)
	if err != nil {
		return stamp.Summary{}, false
	}
	st, err := stamp.Load(file)
	if err != nil {
		return stamp.Summary{}, false
	}
	s.last = &last{file: file, stamp: st, changes: st.Changes()}
	if len(s.last.changes) > 0 {
		return st.Summary, false
	}
	s.debug.replay(st.Summary.Debug)
	return st.Summary, true
}

// Rebuild builds again what the last build of patterns built, after
// UpToDate found it not up to date, without loading or analysing anything
// when all that changed since are sources its actions read, and no more:
// not a BUILD or .bzl file, not a directory, not an output, not a file
// analysis read. It runs the actions those sources feed, and those
// actions' own inputs as needed. ok is false when it cannot: then Build.
func (s *Session) Rebuild(ctx context.Context, patterns []string) (sum *Summary, ok bool, err error) {
	l := s.last
	if l == nil || len(l.changes) == 0 {
		return nil, false, nil
	}
	// The executor opens its caches while the plan is read: whichever
	// way the build goes, it needs them.
	var e *engine.Engine
	var eerr error
	opened := make(chan struct{})
	go func() {
		e, eerr = s.engine()
		close(opened)
	}()
	defer func() { <-opened }()
	p, err := loadPlan(l.file + ".plan")
	if err != nil || len(p.Manifests) > 0 || p.Late {
		return nil, false, nil
	}
	sources := map[string]bool{}
	for _, src := range s.abs(p.Sources) {
		sources[src] = true
	}
	for _, r := range p.Read {
		delete(sources, r)
	}
	changed := map[string]bool{}
	for _, c := range l.changes {
		if !sources[c] || !isRegular(c) {
			return nil, false, nil
		}
		changed[c] = true
	}
	// The record starts as the last build's, its outputs set apart, the
	// changed sources as they are now: nothing else has changed.
	if err := stamp.Remove(l.file); err != nil {
		return nil, false, err
	}
	outputs := map[string]bool{}
	for _, o := range append(s.abs(append(slices.Clip(p.Outputs), BinLink)), p.Manifests...) {
		outputs[o] = true
	}
	rec := &record{s: s, file: l.file, stamp: stamp.New(), plan: p}
	lastOutputs := stamp.New()
	for name, st := range l.stamp.Files {
		if outputs[name] || outputs[strings.TrimSuffix(name, " ->")] {
			lastOutputs.Files[name] = st
		} else {
			rec.stamp.Files[name] = st
		}
	}
	if err := rec.stamp.Add(l.changes...); err != nil {
		return nil, false, err
	}
	// The actions the changed sources feed, and what those feed in turn.
	an := &rules.Analysis{Producer: map[string]*rules.Action{}}
	for _, a := range p.Actions {
		for _, o := range a.Outputs {
			an.Producer[o.Path()] = a
		}
	}
	// The actions the changed sources feed, and those they feed in turn:
	// the plan has each after those that make its inputs.
	var files []*rules.File
	dirty := map[string]bool{}
	for _, a := range p.Actions {
		if !slices.ContainsFunc(reads(a), func(f *rules.File) bool {
			return dirty[f.Path()] || !f.Generated && changed[filepath.Join(s.ws.Root, filepath.FromSlash(f.Path()))]
		}) {
			continue
		}
		for _, o := range a.Outputs {
			dirty[o.Path()] = true
			files = append(files, o)
		}
	}
	if <-opened; eerr != nil {
		return nil, false, eerr
	}
	st, err := e.Build(ctx, an, files)
	s.endProgress()
	if err != nil {
		return nil, true, err
	}
	s.linkBin()
	last := l.stamp.Summary
	s.debug.replay(last.Debug)
	sum = &Summary{Stats: st}
	sum.Stats.Total = last.Actions
	sum.Stats.Cached = last.Actions - last.Internal - st.Executed
	rec.summary = &last
	// The outputs of the actions that did not run are as UpToDate found
	// them; those that ran are recorded anew.
	if rec.stamp.Changed() {
		return sum, true, nil
	}
	for name, st := range lastOutputs.Files {
		rec.stamp.Files[name] = st
	}
	for _, f := range files {
		delete(rec.stamp.Files, filepath.Join(s.ws.Root, filepath.FromSlash(f.Path())))
		if err := rec.stamp.Walk(filepath.Join(s.ws.Root, filepath.FromSlash(f.Path())), stamp.None); err != nil {
			return nil, true, err
		}
	}
	sum.record = rec
	return sum, true, nil
}

// isRegular reports whether p is a regular file.
func isRegular(p string) bool {
	info, err := os.Lstat(p)
	return err == nil && info.Mode().IsRegular()
}

// loadPlan reads the plan in file.
func loadPlan(file string) (*plan, error) {
	p := &plan{}
	if err := gobfile.Load(file, p); err != nil {
		return nil, err
	}
	return p, nil
}
