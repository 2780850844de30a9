// Package session carries out rbs build, test, run, query and clean in a
// workspace: it finds the workspace, loads and analyses the targets, and
// executes their actions locally or on a remote REAPI server, reporting
// progress on a terminal.
package session

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/executor"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rules"
	"github.com/rbs-build/rbs/rules/engine"
	"github.com/rbs-build/rbs/starlark/label"
)

// OutDir is where outputs land, relative to the workspace root; BinLink is
// the convenience symlink to its bin directory.
const (
	OutDir  = "rbs-out"
	BinLink = "rbs-bin"
)

// Options configure a Session.
type Options struct {
	Dir  string // where the command runs; the workspace is found from it
	Jobs int
	// KeepGoing builds (and tests) what does not depend on a failed
	// action instead of stopping at the first failure.
	KeepGoing bool
	Remote    client.Options // Target "" for local execution
	// RemoteCache, with Remote set, runs actions locally and only shares
	// results through the remote cache.
	RemoteCache bool
	CacheDir    string    // the local CAS and action cache
	Out         io.Writer // results
	// Debug receives what print() prints while loading and analysing,
	// and what it printed when a build is answered without them; nil is
	// standard error.
	Debug    io.Writer
	Progress io.Writer // a live progress line; nil for none
	// Platform is the target platform; the zero value stands for this
	// machine's.
	Platform platform.Platform
	// Stamp keeps, for each build that succeeds, the state of the files
	// it read and wrote (see UpToDate and Remember): rbs build's.
	Stamp bool
	// Defines, Settings, CompilationMode, Platforms, ExtraToolchains,
	// Copts, Features and Registries are the rest of the configuration
	// (rules.Config).
	Defines         map[string]string
	Settings        map[string]string
	CompilationMode string
	Platforms, CPU  string
	ExtraToolchains []string
	Copts, Features []string
	Registries      []string
}

// Session is one command in a workspace.
type Session struct {
	opts Options
	ws   *rules.Workspace
	cwd  string // package of Dir
	exec executor.Executor
	done func()
	// last is what UpToDate found of the last build, for Rebuild.
	last *last
	// analysisRead are the files the last analysis read beside those
	// loading did, absolute (an include-scanned source, say).
	analysisRead []string
	// jobs holds the job targets this session built, by label, with
	// the manifest written and the input root it names; trees the input
	// roots made, by the runfiles laid out in them, which the jobs of a
	// pipeline often share.
	jobs  map[string]PipelineJob
	trees map[string]*merkle.Tree
	// debug passes on and keeps what print() printed.
	debug *debugLog
}

// debugLog passes print()'s lines on to w and keeps them, for a stamp to
// replay.
type debugLog struct {
	w   io.Writer
	mu  sync.Mutex
	buf strings.Builder
}

func (d *debugLog) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.buf.Write(p)
	return d.w.Write(p)
}

func (d *debugLog) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.buf.String()
}

// replay prints again what print() printed when the answer now given
// without loading was made; it is not kept a second time.
func (d *debugLog) replay(recorded string) {
	if recorded != "" {
		io.WriteString(d.w, recorded)
	}
}

// Open finds the workspace around opts.Dir.
func Open(opts Options) (*Session, error) {
	root, err := label.FindWorkspace(opts.Dir)
	if err != nil {
		return nil, err
	}
	if opts.Debug == nil {
		opts.Debug = os.Stderr
	}
	debug := &debugLog{w: opts.Debug}
	repos, err := repoDir(opts, root)
	if err != nil {
		return nil, err
	}
	ws, err := rules.Open(root, rules.Config{Platform: opts.Platform, Defines: opts.Defines, Settings: opts.Settings, CompilationMode: opts.CompilationMode,
		Platforms: opts.Platforms, CPU: opts.CPU, ExtraToolchains: opts.ExtraToolchains, Copts: opts.Copts, Features: opts.Features, RepoDir: repos, Registries: opts.Registries, Debug: debug})
	if err != nil {
		return nil, err
	}
	if err := ws.CheckSettings(); err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(root, opts.Dir)
	if err != nil {
		return nil, err
	}
	cwd := filepath.ToSlash(rel)
	if cwd == "." {
		cwd = ""
	}
	if opts.Jobs <= 0 {
		opts.Jobs = 4
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	return &Session{opts: opts, ws: ws, cwd: cwd, done: func() {}, debug: debug}, nil
}

// Root is the workspace root.
func (s *Session) Root() string { return s.ws.Root }

// Platform is the target platform.
func (s *Session) Platform() platform.Platform { return s.ws.Platform }

// Close releases the session's connections.
func (s *Session) Close() { s.done() }

func (s *Session) executor() (executor.Executor, error) {
	if s.exec != nil {
		return s.exec, nil
	}
	var remote *executor.Remote
	if s.opts.Remote.Target != "" {
		conn, err := client.Dial(s.opts.Remote)
		if err != nil {
			return nil, err
		}
		s.done = func() { conn.Close() }
		remote = executor.NewRemote(conn, "")
		if !s.opts.RemoteCache {
			s.exec = executor.Cached(remote.Cache(), remote)
			return s.exec, nil
		}
	}
	dir, err := s.cacheDir()
	if err != nil {
		return nil, err
	}
	local, err := executor.NewLocal(dir, 10<<30)
	if err != nil {
		return nil, err
	}
	// Digests of unchanged files carry over from the previous build.
	digests := filepath.Join(dir, "digests")
	merkle.LoadDigests(digests)
	closeConn := s.done
	s.done = func() {
		closeConn()
		merkle.SaveDigests(digests)
	}
	s.exec = executor.Cached(local.Cache(), local)
	if remote != nil {
		// Shared results first; a miss runs here, through the local
		// cache, and is shared.
		s.exec = executor.Cached(remote.Cache(), s.exec)
	}
	return s.exec, nil
}

// cacheDir is where builds keep what outlives them: the local CAS and
// action cache, file digests and stamps.
func (s *Session) cacheDir() (string, error) { return cacheDirOf(s.opts) }

func cacheDirOf(opts Options) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(base, "rbs", "build"), nil
}

// repoDir is the repository cache of the workspace at root: beside the
// action cache, one directory per workspace.
func repoDir(opts Options, root string) (string, error) {
	cache, err := cacheDirOf(opts)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(root))
	return filepath.Join(cache, "repos", hex.EncodeToString(sum[:8])), nil
}

func (s *Session) engine() (*engine.Engine, error) {
	ex, err := s.executor()
	if err != nil {
		return nil, err
	}
	e := &engine.Engine{Root: s.ws.Root, Exec: ex, Jobs: s.opts.Jobs, Platform: s.ws.Platform.Properties(), KeepGoing: s.opts.KeepGoing, RepoMapping: s.ws.RepoMapping()}
	if s.opts.Progress != nil {
		var mu sync.Mutex
		last := time.Time{}
		e.Progress = func(st engine.Stats) {
			mu.Lock()
			defer mu.Unlock()
			if time.Since(last) < 50*time.Millisecond && st.Done != st.Total {
				return
			}
			last = time.Now()
			fmt.Fprintf(s.opts.Progress, "\r\033[K[%d / %d] %d running, %d executed, %d cached", st.Done, st.Total, st.Running, st.Executed, st.Cached)
		}
	}
	return e, nil
}

func (s *Session) endProgress() {
	if s.opts.Progress != nil {
		fmt.Fprint(s.opts.Progress, "\r\033[K")
	}
}

// Summary is what a build did.
type Summary struct {
	Targets []*rules.Configured
	Stats   engine.Stats
	// Runfiles maps an executable's exec path to its runfiles tree.
	Runfiles map[string][]rules.Runfile
	// analysis is what analysis found: the targets named and what they
	// depend on (Targets, by label), and their actions.
	analysis *rules.Analysis

	// record, when set, is what Remember keeps of the build.
	record *record
}

// Build loads, analyses and (unless noBuild) builds the targets the
// patterns name.
func (s *Session) Build(ctx context.Context, patterns []string, noBuild bool) (*Summary, error) {
	if len(patterns) == 0 {
		return nil, fmt.Errorf("no targets given: name some, such as //... or //pkg:target")
	}
	// The workspace as loading finds it, before it is loaded.
	var rec *record
	if s.opts.Stamp && !noBuild {
		var err error
		if rec, err = s.beginRecord(patterns); err != nil {
			return nil, err
		}
	}
	labels, err := s.ws.Expand(patterns, s.cwd)
	if err != nil {
		return nil, err
	}
	an, err := s.ws.Analyze(labels)
	if err != nil {
		return nil, err
	}
	return s.build(ctx, rec, an, labels, patterns, noBuild)
}

// build is Build once the labels the patterns name are analysed (an): it
// builds them, unless noBuild, and records the build in rec, if set.
func (s *Session) build(ctx context.Context, rec *record, an *rules.Analysis, labels []label.Label, patterns []string, noBuild bool) (*Summary, error) {
	s.analysisRead = s.abs(an.Read)
	for _, l := range labels {
		if _, err := an.Targets[l.String()].Job(); err != nil {
			return nil, err
		}
	}
	sum := &Summary{Runfiles: an.Runfiles, analysis: an}
	var files []*rules.File
	for _, l := range labels {
		c := an.Targets[l.String()]
		sum.Targets = append(sum.Targets, c)
		files = append(files, c.Files...)
		if c.Executable != nil {
			files = append(files, rules.RunfileFiles(an.Runfiles[c.Executable.Path()])...)
		}
	}
	if noBuild {
		return sum, nil
	}
	if rec != nil {
		if err := rec.analysed(newPlan(an, files), append(s.ws.Read(), s.analysisRead...)); err != nil {
			return nil, err
		}
	}
	e, err := s.engine()
	if err != nil {
		return nil, err
	}
	st, err := e.Build(ctx, an, files)
	s.endProgress()
	sum.Stats = st
	var pe *executor.PlatformError
	if errors.As(err, &pe) {
		targets := strings.Join(patterns, " ")
		return sum, fmt.Errorf("%s is not built for %s, and this machine (%s) cannot build it: %s needs a worker of that platform.\nBuild it for the workers' platform first, on a cluster with %s workers: rbs build --platform %s --remote HOST:PORT %s",
			targets, pe.Want, pe.Host, pe.Description, pe.Want, pe.Want, targets)
	}
	if err != nil {
		return sum, err
	}
	manifests, err := s.writeManifests(sum.Targets)
	if err != nil {
		return sum, err
	}
	// As Bazel's --build_runfile_links: a program built runs from
	// rbs-bin with its runfiles tree beside it.
	for _, c := range sum.Targets {
		if exe := c.Executable; exe != nil {
			if _, err := engine.MakeRunfiles(s.ws.Root, s.ws.Name, exe, an.Runfiles[exe.Path()], s.ws.RepoMapping()); err != nil {
				return sum, fmt.Errorf("the runfiles tree of %s: %w", c.Label, err)
			}
		}
	}
	s.linkBin()
	if rec != nil {
		rec.plan.Manifests = manifests
		if sum.record, err = rec.built(); err != nil {
			return sum, err
		}
	}
	return sum, nil
}

// linkBin points the rbs-bin convenience link at the bin directory of the
// configuration built, as bazel-bin is: rbs-out/k8-fastbuild/bin.
func (s *Session) linkBin() {
	link := filepath.Join(s.ws.Root, BinLink)
	bin := filepath.FromSlash(s.ws.BinDir())
	if target, err := os.Readlink(link); err == nil && target == bin {
		return
	}
	os.Remove(link)
	os.Symlink(bin, link)
}

// Shown is where a user finds the file f from the workspace root: through
// the rbs-bin link when the build's own configuration made it
// (rbs-bin/pkg/out.txt), as Bazel shows bazel-bin/pkg/out.txt, else its
// exec path.
func (s *Session) Shown(f *rules.File) string {
	if rest, ok := strings.CutPrefix(f.Path(), s.ws.BinDir()+"/"); ok && f.Generated {
		return BinLink + "/" + rest
	}
	return f.Path()
}

// TestResult is the outcome of one test target.
type TestResult struct {
	Label    label.Label
	Passed   bool
	Cached   bool
	Unbuilt  bool // not run: building it failed (KeepGoing)
	ExitCode int
	Duration time.Duration
	Log      string // path of the test log, relative to the workspace
}

// Test builds the test targets the patterns name and runs them. tagFilters
// selects tests by tag: "a" keeps tests tagged a, "-b" drops those tagged b.
func (s *Session) Test(ctx context.Context, patterns []string, tagFilters []string, args []string) ([]TestResult, error) {
	labels, err := s.ws.Expand(patterns, s.cwd)
	if err != nil {
		return nil, err
	}
	if labels, err = s.ws.SuiteTests(labels); err != nil {
		return nil, err
	}
	var tests []label.Label
	for _, l := range labels {
		pkg, err := s.ws.Package(l.Pkg)
		if err != nil {
			return nil, err
		}
		def, ok := pkg.Targets[l.Name]
		if ok && def.IsTest() && tagsMatch(def.Tags, tagFilters) {
			tests = append(tests, l)
		}
	}
	if len(tests) == 0 {
		// As Bazel does, what the patterns name is built first.
		if len(labels) > 0 {
			if _, err := s.Build(ctx, patterns, false); err != nil {
				return nil, err
			}
		}
		return nil, fmt.Errorf("no test targets were found, yet testing was requested (%s names none)", strings.Join(patterns, " "))
	}
	var patternsOfTests []string
	for _, l := range tests {
		patternsOfTests = append(patternsOfTests, l.String())
	}
	sum, err := s.Build(ctx, patternsOfTests, false)
	var failed *engine.FailedError
	if errors.As(err, &failed) {
		// Keep going: run the tests that were built.
		sum.Targets = slices.DeleteFunc(sum.Targets, func(c *rules.Configured) bool {
			return slices.ContainsFunc(rules.RunfileFiles(sum.Runfiles[c.Executable.Path()]), func(f *rules.File) bool { return failed.Unbuilt[f.Path()] })
		})
	} else if err != nil {
		return nil, err
	}
	e, err := s.engine()
	if err != nil {
		return nil, err
	}
	results := make([]TestResult, len(sum.Targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.Jobs)
	for i, c := range sum.Targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = s.runTest(ctx, e, c, sum.Runfiles[c.Executable.Path()], append(c.Def.Args, args...))
		}()
	}
	wg.Wait()
	if failed != nil {
		built := map[string]bool{}
		for _, r := range results {
			built[r.Label.String()] = true
		}
		for _, l := range tests {
			if !built[l.String()] {
				results = append(results, TestResult{Label: l, Unbuilt: true, ExitCode: -1})
			}
		}
		return results, failed
	}
	return results, nil
}

func (s *Session) runTest(ctx context.Context, e *engine.Engine, c *rules.Configured, runfiles []rules.Runfile, args []string) TestResult {
	start := time.Now()
	r := TestResult{Label: c.Label, Log: filepath.Join(OutDir, "testlogs", c.Label.Pkg, c.Label.Name, "test.log")}
	res, err := e.RunTest(ctx, s.ws.Name, c.Executable, runfiles, args, "Testing "+c.Label.String())
	var log []byte
	if err != nil {
		log = []byte(err.Error() + "\n")
		r.ExitCode = -1
	} else {
		log = append(res.Stdout, res.Stderr...)
		r.ExitCode, r.Cached, r.Passed = res.ExitCode, res.Cached, res.ExitCode == 0
	}
	r.Duration = time.Since(start)
	path := filepath.Join(s.ws.Root, r.Log)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, log, 0o644)
	return r
}

// tagsMatch reports whether a test with tags passes --test_tag_filters:
// it has one of the tags asked for (if any is), and none of those refused
// (-tag). A test tagged manual runs when named, as in Bazel: the
// wildcards that name tests skip it.
func tagsMatch(tags, filters []string) bool {
	has := map[string]bool{}
	for _, t := range tags {
		has[t] = true
	}
	wantAny := false
	matched := false
	for _, f := range filters {
		if f == "" {
			continue
		}
		if neg, ok := strings.CutPrefix(f, "-"); ok {
			if has[neg] {
				return false
			}
			continue
		}
		wantAny = true
		if has[f] {
			matched = true
		}
	}
	return !wantAny || matched
}

// Runnable builds an executable target and lays out its runfiles tree; it
// returns the program's path and the directory to run it in.
func (s *Session) Runnable(ctx context.Context, target string) (program, dir string, args []string, err error) {
	sum, err := s.Build(ctx, []string{target}, false)
	if err != nil {
		return "", "", nil, err
	}
	if len(sum.Targets) != 1 {
		return "", "", nil, fmt.Errorf("%s names %d targets; rbs run needs one", target, len(sum.Targets))
	}
	c := sum.Targets[0]
	if c.Executable == nil {
		if m, _ := c.Job(); m != nil {
			return "", "", nil, fmt.Errorf("%s is a job target, which runs on the cluster, not here: submit it with rbs job submit %[1]s", c.Label)
		}
		return "", "", nil, fmt.Errorf("%s is not executable: rbs run takes a target with an executable, such as a py_binary, sh_binary or cc_binary", c.Label)
	}
	dir, err = engine.MakeRunfiles(s.ws.Root, s.ws.Name, c.Executable, sum.Runfiles[c.Executable.Path()], s.ws.RepoMapping())
	if err != nil {
		return "", "", nil, err
	}
	return filepath.Join(dir, filepath.FromSlash(c.Executable.ShortPath)), dir, c.Def.Args, nil
}

// Clean removes the build outputs (the local action cache stays), and with
// expunge the repositories fetched for the workspace too.
func (s *Session) Clean(expunge bool) error {
	os.Remove(filepath.Join(s.ws.Root, BinLink))
	if err := os.RemoveAll(filepath.Join(s.ws.Root, OutDir)); err != nil || !expunge {
		return err
	}
	dir, err := repoDir(s.opts, s.ws.Root)
	if err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// Staged is a file of a built target as a job stages it: its place in the
// job's directory and the file on disk it comes from.
type Staged struct {
	Path   string // slash-separated, relative
	Source string // absolute
}

// Outputs builds the targets a pattern names and returns their files at
// their short paths and, for an executable, its runfiles beside it as
// the bin directory lays them out (PKG/NAME.runfiles/WORKSPACE/...), so that the
// program finds them as it does when built here.
func (s *Session) Outputs(ctx context.Context, pattern string) ([]Staged, error) {
	sum, err := s.Build(ctx, []string{pattern}, false)
	if err != nil {
		return nil, err
	}
	var out []Staged
	add := func(at string, f *rules.File) {
		out = append(out, Staged{Path: at, Source: filepath.Join(s.ws.Root, filepath.FromSlash(f.Path()))})
	}
	for _, c := range sum.Targets {
		for _, f := range c.Files {
			add(f.ShortPath, f)
		}
		if exe := c.Executable; exe != nil {
			add(exe.ShortPath, exe)
			for _, r := range sum.Runfiles[exe.Path()] {
				add(exe.ShortPath+".runfiles/"+r.Path, r.File)
			}
		}
	}
	return out, nil
}

// ManifestPath is where a build writes a job target's manifest,
// relative to the workspace: rbs-out/k8-fastbuild/bin/PKG/NAME.job.json.
func (s *Session) ManifestPath(l label.Label) string {
	return filepath.Join(filepath.FromSlash(s.ws.BinDir()), filepath.FromSlash(l.Pkg), l.Name+".job.json")
}

// jobTree is the input root of a built job target: its runfiles (the
// binary, the binary's runfiles, the data) at their paths in the workspace,
// the layout the job runs in.
func (s *Session) jobTree(c *rules.Configured) (*merkle.Tree, error) {
	runfiles := c.RunfilesFiles()
	var key strings.Builder
	for _, f := range runfiles {
		key.WriteString(f.ShortPath + "\x00" + f.Path() + "\x00")
	}
	if t, ok := s.trees[key.String()]; ok {
		return t, nil
	}
	var files []merkle.File
	for _, f := range runfiles {
		fs, err := merkle.PathFiles(f.ShortPath, filepath.Join(s.ws.Root, filepath.FromSlash(f.Path())))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Label, err)
		}
		files = append(files, fs...)
	}
	t, err := merkle.Build(files)
	if err != nil {
		return nil, err
	}
	if s.trees == nil {
		s.trees = map[string]*merkle.Tree{}
	}
	s.trees[key.String()] = t
	return t, nil
}

// writeManifests writes the manifest of every job target among the built
// ones, with the digest of its input root.
func (s *Session) writeManifests(targets []*rules.Configured) (paths []string, err error) {
	for _, c := range targets {
		m, err := c.Job()
		if err != nil {
			return nil, err
		}
		if m == nil {
			continue
		}
		tree, err := s.jobTree(c)
		if err != nil {
			return nil, err
		}
		m.InputRoot = tree.Root.String()
		m.Platform = s.ws.Platform.String()
		b, err := m.Encode()
		if err != nil {
			return nil, err
		}
		// What is submitted is what was written, as read back.
		written, err := manifest.Decode(b)
		if err != nil {
			return nil, err
		}
		if s.jobs == nil {
			s.jobs = map[string]PipelineJob{}
		}
		s.jobs[c.Label.String()] = PipelineJob{written, tree}
		path := filepath.Join(s.ws.Root, s.ManifestPath(c.Label))
		paths = append(paths, path)
		// A manifest as the last build wrote it is left alone: reading
		// it back costs less than writing it anew.
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, b) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// jobOf returns the manifest of a built job target, as its build wrote it
// under its bin directory, and its input root, to upload before the job
// is submitted: those this session's build made, else read back.
func (s *Session) jobOf(c *rules.Configured) (*manifest.Manifest, *merkle.Tree, error) {
	if m, err := c.Job(); err != nil {
		return nil, nil, err
	} else if m == nil {
		return nil, nil, fmt.Errorf("%s is not a job target: give an ml_training_job, batch_job or gpu_job from @rbs//job/rules.rbs, or a command after --", c.Label)
	}
	if j, ok := s.jobs[c.Label.String()]; ok {
		delete(s.jobs, c.Label.String()) // the caller may change the manifest
		return j.Manifest, j.Tree, nil
	}
	b, err := os.ReadFile(filepath.Join(s.ws.Root, s.ManifestPath(c.Label)))
	if err != nil {
		return nil, nil, err
	}
	m, err := manifest.Decode(b)
	if err != nil {
		return nil, nil, err
	}
	tree, err := s.jobTree(c)
	if err != nil {
		return nil, nil, err
	}
	if tree.Root.String() != m.InputRoot {
		return nil, nil, fmt.Errorf("%s: the manifest's input root %s is not that of the files built, %s", c.Label, m.InputRoot, tree.Root)
	}
	return m, tree, nil
}

// PipelineJob is one job of a pipeline: its manifest and its input root.
type PipelineJob struct {
	Manifest *manifest.Manifest
	Tree     *merkle.Tree
}

// Pipeline builds the job targets a target submits, a job_pipeline's jobs
// or one job target, each with the job targets it runs after, transitively,
// in one build, and returns them in an order where every job comes after
// the ones it runs after.
func (s *Session) Pipeline(ctx context.Context, target string) ([]PipelineJob, error) {
	sum, err := s.Build(ctx, []string{target}, true)
	if err != nil {
		return nil, err
	}
	if len(sum.Targets) != 1 {
		return nil, fmt.Errorf("%s names %d targets; give one job target or job_pipeline", target, len(sum.Targets))
	}
	roots := sum.Targets[0].PipelineJobs()
	if roots == nil {
		roots = []string{sum.Targets[0].Label.String()}
	}
	// Find the job targets, and what each runs after, by analysis alone,
	// a level at a time, taking those the pipeline's analysis configured
	// from it; then build them all at once.
	// When the pipeline's analysis configured them all, it is the one
	// their build goes by (unless the build is stamped, whose record
	// begins before loading).
	first, reuse := sum.analysis, !s.opts.Stamp
	after := map[string][]string{}
	var all []string
	var labels []label.Label
	for frontier := roots; len(frontier) > 0; {
		var level []*rules.Configured
		var rest []string
		for _, l := range frontier {
			if c := first.Targets[l]; c != nil {
				level = append(level, c)
			} else {
				rest = append(rest, l)
			}
		}
		if len(rest) > 0 {
			reuse = false
			sum, err := s.Build(ctx, rest, true)
			if err != nil {
				return nil, err
			}
			level = append(level, sum.Targets...)
		}
		var next []string
		for _, c := range level {
			l := c.Label.String()
			if _, ok := after[l]; ok {
				continue
			}
			m, err := c.Job()
			if err != nil {
				return nil, err
			}
			if m == nil {
				return nil, fmt.Errorf("%s is not a job target: a pipeline's jobs are ml_training_job, batch_job or gpu_job targets", l)
			}
			after[l] = []string{}
			all, labels = append(all, l), append(labels, c.Label)
			for _, d := range m.After {
				after[l] = append(after[l], d.Label)
				if _, ok := after[d.Label]; !ok {
					next = append(next, d.Label)
				}
			}
		}
		frontier = next
	}
	if reuse {
		sum, err = s.build(ctx, nil, first, labels, all, false)
	} else {
		sum, err = s.Build(ctx, all, false)
	}
	if err != nil {
		return nil, err
	}
	built := map[string]*rules.Configured{}
	for _, c := range sum.Targets {
		built[c.Label.String()] = c
	}
	var order []PipelineJob
	placed, visiting := map[string]bool{}, map[string]bool{}
	var visit func(l string) error
	visit = func(l string) error {
		if placed[l] {
			return nil
		}
		if visiting[l] {
			return fmt.Errorf("%s runs after itself", l)
		}
		visiting[l] = true
		for _, d := range after[l] {
			if err := visit(d); err != nil {
				return err
			}
		}
		c := built[l]
		if c == nil {
			return fmt.Errorf("%s was not among the targets built", l)
		}
		m, tree, err := s.jobOf(c)
		if err != nil {
			return err
		}
		placed[l] = true
		order = append(order, PipelineJob{m, tree})
		return nil
	}
	for _, l := range roots {
		if err := visit(l); err != nil {
			return nil, err
		}
	}
	return order, nil
}
