package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rules"
	"github.com/rbs-build/rbs/rules/session"
	"github.com/rbs-build/rbs/starlark/label"
	"golang.org/x/term"
)

// BuildFlags are shared by build, test and run.
type BuildFlags struct {
	Jobs            int          `short:"j" help:"Actions run at once (default: the number of CPUs)."`
	KeepGoing       bool         `name:"keep_going" aliases:"keep-going" short:"k" help:"Go on past a failed action, building (and testing) everything that does not depend on it, as Bazel's --keep_going."`
	Remote          string       `help:"Execute on an rbs cluster or any REAPI server at this address (grpc://, grpcs:// or HOST:PORT)." env:"RBS_REMOTE"`
	RemoteCache     string       `name:"remote_cache" aliases:"remote-cache" help:"Run actions locally, sharing results through the REAPI cache at this address."`
	TokenFile       string       `name:"token-file" help:"File holding the bearer token of --remote (default: $RBS_REMOTE_TOKEN)." type:"existingfile"`
	TLSCA           string       `name:"tls-ca" help:"CA of --remote's certificate." type:"existingfile"`
	Platform        platformFlag `help:"Target platform, OS-ARCH such as linux-x86_64 or linux-arm64 (default: this machine's). Its outputs go to rbs-out/CPU-MODE/bin as Bazel names it (rbs-out/aarch64-fastbuild/bin), and remote actions run on workers of that platform." env:"RBS_TARGET_PLATFORM"`
	Define          []string     `help:"NAME=VALUE for config_setting's define_values and values = {\"define\": ...}, and a make variable (ctx.var). Repeatable." placeholder:"NAME=VALUE"`
	Mode            string       `name:"compilation_mode" aliases:"compilation-mode" short:"c" help:"fastbuild, dbg or opt, for config_setting's values = {\"compilation_mode\": ...} and $(COMPILATION_MODE)." default:"fastbuild"`
	Copt            []string     `help:"A flag for every C and C++ compilation (ctx.fragments.cpp.copts). Repeatable." placeholder:"FLAG"`
	Features        []string     `help:"Enable a feature for every target (ctx.features), or turn one off (-NAME). Repeatable." placeholder:"NAME"`
	Registry        []string     `help:"A registry of modules, in the Bazel Central Registry's layout (http, https or file URL), that MODULE.bazel's bazel_deps are looked up in, in order. Repeatable." placeholder:"URL"`
	CPU             string       `name:"cpu" help:"The target CPU as Bazel names it (k8, aarch64, armeabi-v7a, ...), as Bazel's --cpu: this machine's OS with that CPU, or --platform's, and $(TARGET_CPU)." placeholder:"CPU"`
	Platforms       string       `help:"The target platform as a platform() target, as Bazel's --platforms: its constraint values are what select(), config_setting and toolchain resolution see, and its @platforms//os and @platforms//cpu values the platform built for." placeholder:"LABEL"`
	ExtraToolchains []string     `name:"extra_toolchains" aliases:"extra-toolchains" help:"Register toolchains before the workspace's (a label, or PKG:all). Repeatable." placeholder:"PATTERN"`
	Set             []string     `help:"Set a build setting: --set //pkg:flag=VALUE, which --//pkg:flag=VALUE, --//pkg:flag (true) and --no//pkg:flag (false) stand for." placeholder:"//PKG:FLAG=VALUE"`
	StarlarkLimits

	// stamp keeps the state of what each build read and wrote, so that
	// the same build asked again can be found up to date: rbs build's.
	stamp bool
}

// configuration reads the flags that configure a build: --define,
// --compilation_mode and the build settings.
func (f BuildFlags) configuration(opts *session.Options) error {
	if !slices.Contains(rules.CompilationModes, f.Mode) {
		return fmt.Errorf("--compilation_mode %q: want one of %s", f.Mode, strings.Join(rules.CompilationModes, ", "))
	}
	opts.CompilationMode = f.Mode
	opts.Defines, opts.Settings = map[string]string{}, map[string]string{}
	for _, d := range f.Define {
		k, v, err := rules.ParseDefine(d)
		if err != nil {
			return err
		}
		opts.Defines[k] = v
	}
	for _, p := range f.ExtraToolchains {
		if err := rules.CheckRegistered(p); err != nil {
			return fmt.Errorf("--extra_toolchains %v", err)
		}
	}
	for _, r := range f.Registry {
		if u, err := url.Parse(r); err != nil || u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "file" {
			return fmt.Errorf("--registry %q: want an http, https or file URL", r)
		}
	}
	opts.ExtraToolchains, opts.Copts, opts.Features, opts.Registries = f.ExtraToolchains, f.Copt, f.Features, f.Registry
	if f.Platforms != "" {
		if f.Platform != "" {
			return fmt.Errorf("--platforms %s and --platform %s: give one", f.Platforms, f.Platform)
		}
		l, err := label.Parse(f.Platforms)
		if err != nil {
			return fmt.Errorf("--platforms: %w", err)
		}
		opts.Platforms = l.String()
	}
	for _, s := range f.Set {
		name, value, ok := strings.Cut(s, "=")
		l, err := label.Parse(name)
		if !ok || err != nil {
			return fmt.Errorf("build setting %q: want --//PKG:FLAG=VALUE", s)
		}
		opts.Settings[l.String()] = value
	}
	return nil
}

// session runs fn in a build session opened in the working directory,
// closing it afterwards; the context ends on SIGINT or SIGTERM. A session
// that executes actions first says where, on stderr.
func (f BuildFlags) session(executes bool, fn func(ctx context.Context, s *session.Session) error) error {
	opts := session.Options{Jobs: f.Jobs, KeepGoing: f.KeepGoing, Out: os.Stdout, Stamp: f.stamp}
	if err := f.configuration(&opts); err != nil {
		return err
	}
	if f.Platform != "" {
		p, err := platform.Parse(string(f.Platform))
		if err != nil {
			return fmt.Errorf("--platform: %w", err)
		}
		opts.Platform = p
	}
	if f.CPU != "" {
		base := opts.Platform
		if base.IsZero() {
			base = platform.Host()
		}
		p, err := rules.PlatformOfCPU(base, f.CPU)
		if err != nil {
			return fmt.Errorf("--cpu: %w", err)
		}
		opts.Platform, opts.CPU = p, f.CPU
	}
	if opts.Jobs == 0 {
		opts.Jobs = runtime.NumCPU()
	}
	switch {
	case f.RemoteCache != "":
		opts.Remote = RemoteFlags{Server: f.RemoteCache, TokenFile: f.TokenFile, TLSCA: f.TLSCA}.options()
		opts.RemoteCache = true
	case f.Remote != "":
		opts.Remote = RemoteFlags{Server: f.Remote, TokenFile: f.TokenFile, TLSCA: f.TLSCA}.options()
	}
	if term.IsTerminal(int(os.Stderr.Fd())) {
		opts.Progress = os.Stderr
	}
	if executes {
		fmt.Fprintln(os.Stderr, f.executing())
	}
	f.StarlarkLimits.apply()
	return interruptible(func(ctx context.Context) error {
		return withSession(opts, func(s *session.Session) error { return fn(ctx, s) })
	})
}

// executing says where a build's actions run: it is printed first, so
// that $RBS_REMOTE never sends a build to a cluster unsaid.
func (f BuildFlags) executing() string {
	switch {
	case f.RemoteCache != "":
		return fmt.Sprintf("executing locally, caching on %s (remote cache)", f.RemoteCache)
	case f.Remote != "" && f.Remote == os.Getenv("RBS_REMOTE"):
		return fmt.Sprintf("executing on %s (remote, from $RBS_REMOTE)", f.Remote)
	case f.Remote != "":
		return fmt.Sprintf("executing on %s (remote)", f.Remote)
	}
	return "executing locally"
}

// where is how the summary says where actions were executed.
func (f BuildFlags) where() string {
	if f.Remote != "" && f.RemoteCache == "" {
		return "remotely"
	}
	return "locally"
}

// interruptibleSession is withSession, interruptible.
func interruptibleSession(opts session.Options, fn func(*session.Session) error) error {
	return interruptible(func(context.Context) error { return withSession(opts, fn) })
}

// withSession opens a session in the working directory for fn.
func withSession(opts session.Options, fn func(*session.Session) error) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	opts.Dir = dir
	s, err := session.Open(opts)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(s)
}

// BuildCmd is `rbs build`.
type BuildCmd struct {
	BuildFlags
	NoBuild  bool     `name:"nobuild" help:"Load and analyse only."`
	Patterns []string `arg:"" optional:"" help:"Target patterns such as //app:train or //...."`
}

// Run implements the command.
func (c *BuildCmd) Run() error {
	c.stamp = true
	return c.session(!c.NoBuild, c.run)
}

func (c *BuildCmd) run(ctx context.Context, s *session.Session) error {
	if !c.NoBuild {
		// Not a file the last build of these targets read or wrote has
		// changed: nothing is loaded, analysed or looked up.
		last, upToDate := s.UpToDate(c.Patterns)
		if upToDate {
			fmt.Println(c.built(last.Targets, last.Actions, 0, last.Actions-last.Internal) + " (up to date: no file it read or wrote has changed since).")
			fmt.Print(last.Outputs)
			return nil
		}
		// Only sources its actions read have changed: run what they
		// feed, nothing loaded or analysed.
		if sum, ok, err := s.Rebuild(ctx, c.Patterns); ok {
			if err != nil {
				return err
			}
			st := sum.Stats
			fmt.Println(c.built(last.Targets, st.Total, st.Executed, st.Cached) + " (only sources changed: nothing loaded or analysed).")
			fmt.Print(last.Outputs)
			return s.Remember(sum, last.Outputs)
		}
	}
	if c.NoBuild {
		// What loading and analysis decide, kept for the next time.
		args := append([]string{"build --nobuild"}, c.Patterns...)
		out, ok := s.Answered(args...)
		if !ok {
			var err error
			out, err = s.Answer(args, func() (string, error) {
				sum, err := s.Build(ctx, c.Patterns, true)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("Analysed %d targets.\n", len(sum.Targets)), nil
			})
			if err != nil {
				return err
			}
		}
		fmt.Print(out)
		return nil
	}
	sum, err := s.Build(ctx, c.Patterns, false)
	if err != nil {
		return err
	}
	st := sum.Stats
	fmt.Println(c.built(len(sum.Targets), st.Total, st.Executed, st.Cached) + ".")
	var outputs strings.Builder
	printOutputs(&outputs, sum.Targets, s.Shown)
	fmt.Print(outputs.String())
	return s.Remember(sum, outputs.String())
}

// built is the line that sums a build up: its targets, its actions, those
// executed and those cached, the rest being internal.
func (c *BuildCmd) built(targets, actions, executed, cached int) string {
	line := fmt.Sprintf("Built %s: %s, %d executed %s, %d cached", units.Plural(targets, "target", "targets"), units.Plural(actions, "action", "actions"), executed, c.where(), cached)
	if internal := actions - executed - cached; internal > 0 {
		line += fmt.Sprintf(", %d internal (files rbs wrote or copied itself)", internal)
	}
	return line
}

// maxOutputTargets is how many targets' outputs a build lists.
const maxOutputTargets = 10

// printOutputs lists the files of the targets built, at their paths from
// the workspace root as shown shows them, as Bazel does.
func printOutputs(w io.Writer, targets []*rules.Configured, shown func(*rules.File) string) {
	for i, c := range targets {
		if i == maxOutputTargets {
			fmt.Fprintf(w, "(%s more not listed: name fewer to see their outputs)\n", units.Plural(len(targets)-i, "target", "targets"))
			return
		}
		if len(c.Files) == 0 {
			fmt.Fprintf(w, "Target %s up-to-date (nothing to build)\n", c.Label)
			continue
		}
		fmt.Fprintf(w, "Target %s up-to-date:\n", c.Label)
		for _, f := range c.Files {
			fmt.Fprintf(w, "  %s\n", shown(f))
		}
	}
}

// TestCmd is `rbs test`.
type TestCmd struct {
	BuildFlags
	TagFilters string   `name:"test_tag_filters" aliases:"test-tag-filters" help:"Comma-separated tags: a keeps tests tagged a, -b drops tests tagged b."`
	TestArg    []string `name:"test_arg" aliases:"test-arg" sep:"none" help:"Argument passed to every test (repeatable)."`
	TestOutput string   `name:"test_output" aliases:"test-output" enum:"summary,errors,all" default:"summary" help:"Whose test logs to print besides the summary, as Bazel's --test_output: summary (none), errors (the failed tests'), all."`
	Patterns   []string `arg:"" optional:"" help:"Test target patterns."`
}

// Run implements the command.
func (c *TestCmd) Run() error { return c.session(true, c.run) }

func (c *TestCmd) run(ctx context.Context, s *session.Session) error {
	var filters []string
	if c.TagFilters != "" {
		filters = strings.Split(c.TagFilters, ",")
	}
	results, err := s.Test(ctx, c.Patterns, filters, c.TestArg)
	if results == nil {
		return err
	}
	for _, r := range results {
		if c.TestOutput == "all" || c.TestOutput == "errors" && !r.Passed && !r.Unbuilt {
			log, rerr := os.ReadFile(filepath.Join(s.Root(), r.Log))
			if rerr != nil {
				return rerr
			}
			fmt.Printf("==> %s (%s) <==\n%s", r.Log, r.Label, log)
			if len(log) > 0 && log[len(log)-1] != '\n' {
				fmt.Println()
			}
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	failed := 0
	for _, r := range results {
		if !r.Passed {
			failed++
		}
		switch {
		case r.Unbuilt:
			fmt.Fprintf(tw, "%s\tFAILED TO BUILD\n", r.Label)
			continue
		case r.Passed && r.Cached:
			fmt.Fprintf(tw, "%s\t(cached) PASSED", r.Label)
		case r.Passed:
			fmt.Fprintf(tw, "%s\tPASSED", r.Label)
		default:
			fmt.Fprintf(tw, "%s\tFAILED", r.Label)
		}
		fmt.Fprintf(tw, "\tin %.1fs\t%s\n", r.Duration.Seconds(), r.Log)
	}
	tw.Flush()
	fmt.Printf("%s: %d passed, %d failed.\n", units.Plural(len(results), "test", "tests"), len(results)-failed, failed)
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d tests failed", failed, len(results))
	}
	return nil
}

// RunCmd is `rbs run`.
type RunCmd struct {
	BuildFlags
	Target string `arg:"" help:"The executable target to run."`
	// Partial passthrough, as for job submit: a mistyped flag after the
	// target is an error, not the program's first argument.
	Args []string `arg:"" optional:"" passthrough:"partial" help:"Arguments for the program, after --."`
}

// Run implements the command.
func (c *RunCmd) Run() error { return c.session(true, c.run) }

func (c *RunCmd) run(ctx context.Context, s *session.Session) error {
	prog, dir, defaultArgs, err := s.Runnable(ctx, c.Target)
	if err != nil {
		return err
	}
	args := c.Args
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	cmd := exec.Command(prog, append(defaultArgs, args...)...)
	cmd.Dir = dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// As under bazel run: RUNFILES_DIR is the runfiles tree's root
	// (RUNFILES_MANIFEST_FILE its manifest), and the program runs in the
	// workspace's directory in it;
	// BUILD_WORKSPACE_DIRECTORY and BUILD_WORKING_DIRECTORY are the
	// workspace root and the directory rbs run was started in.
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	cmd.Env = append(os.Environ(), "RUNFILES_DIR="+filepath.Dir(dir), "RUNFILES_MANIFEST_FILE="+filepath.Join(filepath.Dir(dir), "MANIFEST"), "BUILD_WORKSPACE_DIRECTORY="+s.Root(), "BUILD_WORKING_DIRECTORY="+wd)
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return exitError{ee, ee.ExitCode()}
		}
		return err
	}
	return nil
}

// QueryCmd is `rbs query`.
type QueryCmd struct {
	StarlarkLimits
	Output       string `enum:"label,label_kind,build" default:"label" help:"How each target is printed, as Bazel's --output: label, label_kind (its kind, then its label) or build (its rule as the BUILD file declares it)."`
	ImplicitDeps bool   `name:"implicit_deps" aliases:"implicit-deps" negatable:"" default:"true" help:"Follow what private attributes (_name) depend on too; --noimplicit_deps does not, as Bazel's."`
	Expr         string `arg:"" help:"Query expression: target patterns, deps(x[, depth]), rdeps(universe, x[, depth]), somepath(from, to), allpaths(from, to), kind(regex, x), tests(x), attr(name, regex, x), joined with + (union), - (except) and ^ (intersect)."`
}

// Run implements the command.
func (c *QueryCmd) Run() error {
	c.StarlarkLimits.apply()
	return interruptibleSession(session.Options{}, func(s *session.Session) error {
		args := []string{"query", "--output=" + c.Output, fmt.Sprintf("--implicit_deps=%t", c.ImplicitDeps), c.Expr}
		out, ok := s.Answered(args...)
		if !ok {
			var err error
			if out, err = s.Answer(args, func() (string, error) { return c.answer(s) }); err != nil {
				return err
			}
		}
		_, err := os.Stdout.WriteString(out)
		return err
	})
}

// answer is what the query prints.
func (c *QueryCmd) answer(s *session.Session) (string, error) {
	labels, err := s.Query(c.Expr, c.ImplicitDeps)
	if err != nil {
		return "", err
	}
	var w strings.Builder
	for _, l := range labels {
		switch c.Output {
		case "label":
			fmt.Fprintln(&w, l)
		case "label_kind":
			kind, err := s.Kind(l)
			if err != nil {
				return "", err
			}
			fmt.Fprintln(&w, kind, l)
		case "build":
			t, err := s.Target(l)
			if err != nil {
				return "", err
			}
			if t != nil {
				fmt.Fprintln(&w, rules.Declaration(t))
			}
		}
	}
	return w.String(), nil
}

// CleanCmd is `rbs clean`.
type CleanCmd struct {
	Expunge bool `help:"Also drop the repositories fetched for this workspace (repository rules, module extensions)."`
}

// Run implements the command.
func (c *CleanCmd) Run() error {
	return interruptibleSession(session.Options{}, func(s *session.Session) error { return s.Clean(c.Expunge) })
}

// platformFlag is a --platform value, OS-ARCH, checked when the command
// line is read; "" for this machine's.
type platformFlag string

// UnmarshalText lets flag parsers refuse a platform rbs does not know.
func (f *platformFlag) UnmarshalText(b []byte) error {
	if _, err := platform.Parse(string(b)); err != nil {
		return err
	}
	*f = platformFlag(b)
	return nil
}
