package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/google/uuid"
	"github.com/rbs-build/rbs/cli/schema"
	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/jobs/sched"
	"github.com/rbs-build/rbs/jobs/spec"
	"github.com/rbs-build/rbs/jobs/units"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"github.com/rbs-build/rbs/rbe/platform"
	"github.com/rbs-build/rbs/rules/session"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// JobCmd is `rbs job`.
type JobCmd struct {
	Submit  JobSubmitCmd  `cmd:"" help:"Submit a job: a command, a script, or a built job target."`
	List    JobListCmd    `cmd:"" help:"List jobs."`
	Show    JobShowCmd    `cmd:"" help:"Show one job in detail."`
	Logs    JobLogsCmd    `cmd:"" help:"Print a job's output."`
	Wait    JobWaitCmd    `cmd:"" help:"Wait for jobs to end, printing each as it ends, or as soon as it can never start (DependencyNeverSatisfied), across restarts of the server; exits non-zero unless all COMPLETED."`
	Cancel  JobCancelCmd  `cmd:"" help:"Cancel jobs; exits non-zero, naming them, for jobs that had already ended, as scancel does."`
	Release JobReleaseCmd `cmd:"" help:"Release held jobs (submitted with --hold), so that they are scheduled."`
	Outputs JobOutputsCmd `cmd:"" help:"Download a job's outputs."`
	Queues  JobQueuesCmd  `cmd:"" help:"List queues, their occupancy and quotas."`
	Shares  JobSharesCmd  `cmd:"" help:"Fair share: each account's and user's shares, decayed usage, and the factor it puts in their jobs' priority."`
	Reserve JobReserveCmd `cmd:"" help:"Reserve workers for a maintenance window or a team."`
	Stats   JobStatsCmd   `cmd:"" help:"Account for ended jobs: wall and CPU time, CPU efficiency, peak memory, GPU-hours; totals per queue and user."`
}

// clientUser is the user this client runs as, whom the server records as
// the submitter of its jobs.
func clientUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

// jobsClient dials the server for a job command.
func jobsClient(f RemoteFlags) (jobspb.JobsClient, *grpc.ClientConn, error) {
	conn, err := client.Dial(f.options())
	if err != nil {
		return nil, nil, err
	}
	return jobspb.NewJobsClient(conn), conn, nil
}

// collect gathers the jobs of a streamed answer (List, Show, Wait, Cancel).
func collect[R any, P interface {
	*R
	GetJobs() []*jobspb.JobInfo
}](stream grpc.ServerStreamingClient[R], err error) ([]*jobspb.JobInfo, error) {
	if err != nil {
		return nil, err
	}
	var jobs []*jobspb.JobInfo
	for {
		page, err := stream.Recv()
		if err == io.EOF {
			return jobs, nil
		}
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, P(page).GetJobs()...)
	}
}

// JobSubmitCmd is `rbs job submit`.
type JobSubmitCmd struct {
	RemoteFlags
	StarlarkLimits
	Name          string        `short:"J" aliases:"job-name" help:"Job name (default: the command or script name); sbatch's --job-name too." placeholder:"NAME"`
	Queue         string        `short:"p" aliases:"partition" help:"Queue (default: the cluster's default queue, batch); sbatch's --partition too." placeholder:"QUEUE"`
	Priority      int32         `help:"Priority within the queue; higher runs first." placeholder:"N"`
	CPUs          int32         `name:"cpus" short:"c" aliases:"cpus-per-task" help:"CPUs reserved on the worker (default: 1, or the job target's); sbatch's --cpus-per-task too." placeholder:"N"`
	MemoryGB      units.GiB     `name:"memory-gb" help:"Memory reserved and enforced: a size such as 4G, 512MiB or 1.5GiB, a bare number being GiB (0: none)." placeholder:"SIZE"`
	Mem           units.MiB     `name:"mem" help:"Memory as sbatch's --mem spells it: a size such as 4G, a bare number being MiB (4000: 4000MiB); of --mem and --memory-gb the last given wins." placeholder:"SIZE"`
	GPUs          int32         `name:"gpus" help:"GPUs reserved on the worker (on each, with --nodes)." placeholder:"N"`
	Constraint    []string      `sep:"none" help:"Run only on workers that offer this platform property NAME=VALUE (their --property; OSFamily and ISA too), e.g. gpu=a100 (repeatable)." placeholder:"NAME=VALUE"`
	Preemptible   bool          `help:"Let a job of higher priority that cannot otherwise start preempt this one: it gets SIGTERM, the server's --preempt-grace, then SIGKILL, and goes back to PENDING to resume from its --checkpoint-dir."`
	Container     string        `help:"Run the command in this OCI image (podman or docker on the worker, whichever it has): the job's directory is the working directory, and the environment and GPUs are passed through. Only workers with a container runtime take the job." placeholder:"IMAGE"`
	Nodes         string        `name:"nodes" short:"N" help:"Run the job on N distinct workers at once, a gang (MIN-MAX: elastic, starting once MIN fit, on as many as fit up to MAX): the same command on each, with RBS_NODE_RANK, RBS_NNODES, RBS_NODELIST, RBS_MASTER_ADDR and RBS_MASTER_PORT (and PyTorch's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, NODE_RANK) set; --cpus, --memory-gb and --gpus are per node. The job ends when rank 0 ends; any other rank failing ends them all (default: 1, or the job target's)." placeholder:"N"`
	Time          spec.Duration `short:"t" help:"Time limit: 90s, 30m, 2h, 1d2h, or Slurm's MM, MM:SS, [D-]HH:MM:SS, a bare number being minutes (default: the queue's)." placeholder:"DURATION"`
	Deps          string        `short:"d" aliases:"dependency" help:"Dependencies: afterok:ID,afterany:ID,afternotok:ID; sbatch's --dependency too." placeholder:"DEPS"`
	Array         string        `short:"a" help:"Job array: 0-99, 1,3,7, 0-99:4 (every 4th), and %N to run at most N at once, as in 0-99%10." placeholder:"SPEC"`
	Export        string        `help:"Your environment variables the job gets: ALL (less machine- and session-bound ones such as HOME, TMPDIR and RBS_REMOTE_TOKEN), NONE, or NAME[,NAME=VALUE...], after ALL, to add." default:"ALL"`
	Env           []string      `sep:"none" help:"KEY=VALUE for the job's environment (repeatable; overrides --export)."`
	NoRequeue     bool          `help:"End the job as NODE_FAIL instead of requeueing it when its worker is lost."`
	Pack          string        `help:"Place a gang (--nodes) in as few domains of this topology label as it can, such as rack: the workers that share the label's value (their --topology or --property NAME=VALUE)." placeholder:"LABEL"`
	PackRequired  bool          `name:"pack-required" help:"With --pack, wait until one domain has room for every node, rather than spread."`
	MaxRetries    int32         `name:"max-retries" help:"Run the job again, up to N times, when an attempt ends FAILED, TIMEOUT or OUT_OF_MEMORY (never when CANCELLED); a requeue after a lost worker uses none (0 to 100; default: the job target's, else 0)." placeholder:"N"`
	CheckpointDir string        `name:"checkpoint-dir" help:"Directory, relative to the job's directory, recorded into the CAS when each attempt ends and restored, as writable files, into the next attempt's." placeholder:"DIR"`
	Cache         bool          `help:"Answer the job from the job cache when a job of the same key (its command, environment, inputs, platform, image, outputs and --cache-version) completed before, and remember its result when it completes (default: the job target's, else its queue's)."`
	NoCache       bool          `name:"no-cache" help:"Run the job whatever the job cache holds, and remember its result in place of the entry."`
	CacheVersion  string        `name:"cache-version" help:"A version that is part of the job's cache key: change it to miss the entries of earlier runs." placeholder:"TEXT"`
	Sweep         []string      `sep:"none" help:"Make the job an array over every combination of the parameters' values, as lr=0.1,0.01 (repeatable): each task gets its values as RBS_SWEEP_LR and in the command's {lr}. --array %N caps how many run at once." placeholder:"NAME=V1,V2"`
	Hold          bool          `help:"Submit the job held: it stays PENDING (JobHeldUser) until rbs job release ID. A held job is accepted even when no registered worker could ever run it, which is otherwise refused."`
	Parsable      bool          `help:"Print only the job id."`
	Interactive   bool          `short:"i" help:"Attach your stdin and stdout to the job through the server: your stdin is its stdin (end of file closes it), its output comes to your stdout, the submission line goes to stderr, and the exit status is the job's exit code, as with srun (1 for a job that ended without one, such as one cancelled before it ran)."`
	Inputs        []string      `sep:"none" help:"Stage PATH (a directory whole, skipping .git, .rbs and rbs-out; a file under its base name) or DEST=PATH (the same under the subdirectory DEST) into the job's directory, through the cluster's CAS (repeatable)."`
	Platform      platformFlag  `help:"Build the job target and the --inputs labels for this platform, OS-ARCH such as linux-arm64 (default: $RBS_TARGET_PLATFORM, else this machine's), and run the job only on workers of it. Another platform than this machine's is not built here: its outputs come from the cluster's action cache, filled by rbs build --platform P --remote on that cluster."`
	Outputs       []string      `sep:"none" help:"Record this file or directory, relative to the job's directory, into the CAS when the job ends, however it ends; fetch them with rbs job outputs (repeatable)."`
	Script        string        `help:"Run this script file (its #! line, else /bin/sh), with the arguments after -- if any. Its leading #RBS lines give flags, and its #SBATCH lines the sbatch options rbs has (--job-name, --partition, --cpus-per-task, --time, --dependency, --array, --nodes, --gpus, --mem, --export, --no-requeue, --requeue and their short names), warning of the others; flags on the command line win." type:"existingfile"`
	// Partial passthrough: the words before the command (or before --)
	// are all parsed as flags, so a mistyped flag is an error with a
	// suggestion instead of the start of the command; from the first
	// other word on, everything is the command's.
	Command []string `arg:"" optional:"" passthrough:"partial" help:"-- followed by the command to run (or the script's arguments), a //pkg:target job target, or, as with sbatch, a local script file (one that opens with #!) and its arguments, taken as --script FILE -- ARGS."`

	// o is what the flags set over a job's manifest, their text parsed
	// once the command line is (AfterApply).
	o manifest.Overrides `kong:"-"`
}

// AfterApply parses the text of the flags (a time, the dependencies,
// --env …) as kong parses the command line, so that a bad value is an
// error of the command line, before anything is built or sent.
func (c *JobSubmitCmd) AfterApply(kctx *kong.Context) error {
	var err error
	c.o, err = c.overrides(memoryOf(kctx, c.MemoryGB, c.Mem))
	return err
}

// memoryOf is the memory asked for: --memory-gb and --mem are one setting
// spelt two ways, so the last given wins, as when one flag is given twice
// (an #SBATCH --mem line, then --memory-gb typed).
func memoryOf(kctx *kong.Context, gib units.GiB, mib units.MiB) int64 {
	var mem int64
	for _, p := range kctx.Path {
		switch {
		case p.Flag == nil:
		case p.Flag.Name == "memory-gb":
			mem = int64(gib)
		case p.Flag.Name == "mem":
			mem = int64(mib)
		}
	}
	return mem
}

// Run implements the command. A job target and a command typed after --
// become the same request, a job manifest each, checked here as the
// server checks it before anything is uploaded.
func (c *JobSubmitCmd) Run() error {
	var ms []*manifest.Manifest
	var trees []*merkle.Tree
	// What is submitted may be built first: SIGINT and SIGTERM stop that.
	c.StarlarkLimits.apply()
	err := interruptible(func(ctx context.Context) error {
		if target, extra := c.target(); target != "" {
			var err error
			ms, trees, err = c.targetManifests(ctx, target, extra)
			return err
		}
		m, err := c.manifest()
		if err != nil {
			return err
		}
		if len(c.Inputs) > 0 {
			inputs, built, err := c.inputRoot(ctx)
			if err != nil {
				return err
			}
			m.InputRoot = inputs.Root.String()
			if m.Platform == "" {
				m.Platform = built
			}
			trees = append(trees, inputs)
		}
		warnLocalFiles(m.Command, trees)
		ms = []*manifest.Manifest{m}
		return nil
	})
	if err != nil {
		return err
	}
	if c.Interactive && len(ms) > 1 {
		return fmt.Errorf("--interactive attaches to one job: not to a pipeline")
	}
	// A retry of this request (after a failover, say) takes the same key,
	// so that it makes no second job.
	req := &jobspb.SubmitRequest{User: clientUser(), IdempotencyKey: uuid.NewString()}
	for i, m := range ms {
		if _, err := m.Job(i + 1); err != nil {
			return flagError(err)
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		req.Manifests = append(req.Manifests, b)
	}
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := checkPartitions(jobs, ms); err != nil {
		return err
	}
	if len(trees) > 0 {
		if err := uploadInputs(context.Background(), client.NewCAS(conn, ""), trees); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := jobs.Submit(ctx, req)
	if err != nil {
		return fmt.Errorf("submitting: %w", err)
	}
	if c.Interactive {
		return attach(jobs, resp.JobId, c.Parsable)
	}
	switch {
	case len(ms) > 1:
		printPipeline(os.Stdout, ms, resp, c.Parsable)
	case c.Parsable:
		fmt.Println(resp.JobId)
	default:
		fmt.Printf("Submitted job %d%s\n", resp.JobId, cacheNote(resp, 0, ms[0]))
	}
	return nil
}

// manifest is the job a command typed after -- (or --script) and the flags
// describe.
func (c *JobSubmitCmd) manifest() (*manifest.Manifest, error) {
	args := c.Command
	switch {
	case len(args) > 0 && args[0] == "--":
		args = args[1:]
	case len(args) > 0 && strings.HasPrefix(args[0], "-"):
		return nil, fmt.Errorf("command %q starts with -: give it after --, as in rbs job submit -- %s", args[0], args[0])
	}
	if len(args) == 0 && c.Script == "" {
		return nil, fmt.Errorf("nothing to run: give a command after --, or --script FILE")
	}
	m := &manifest.Manifest{Version: manifest.Version, Command: args, CPUs: 1, Nodes: 1}
	if c.Script != "" {
		b, err := os.ReadFile(c.Script)
		if err != nil {
			return nil, err
		}
		m.Script = string(b)
		m.Name = filepath.Base(c.Script)
	} else {
		m.Name = filepath.Base(args[0])
	}
	export, err := spec.ParseExport(c.Export)
	if err != nil {
		return nil, err
	}
	m.Env = export.Env(os.Environ())
	if c.Container != "" {
		// The image has its own programs and libraries: this machine's
		// search paths would hide them. --env can still give them.
		for _, k := range []string{"PATH", "LD_LIBRARY_PATH"} {
			delete(m.Env, k)
		}
	}
	c.o.Apply(m)
	if c.Platform != "" {
		p, err := c.targetPlatform()
		if err != nil {
			return nil, err
		}
		m.Platform = p.String()
	}
	return m, nil
}

// warnLocalFiles says on stderr which words of a command name a file here,
// relative to the working directory, that the job's directory will not
// hold (trees are its inputs, if any): the job runs on a worker, with
// only what it is sent.
func warnLocalFiles(command []string, trees []*merkle.Tree) {
	for _, w := range command {
		if strings.HasPrefix(w, "-") || filepath.IsAbs(w) {
			continue
		}
		if info, err := os.Stat(w); err != nil || !info.Mode().IsRegular() {
			continue
		}
		p := path.Clean(filepath.ToSlash(w))
		staged := false
		for _, t := range trees {
			_, found := slices.BinarySearchFunc(t.Files, p, func(f merkle.File, p string) int { return strings.Compare(f.Path, p) })
			staged = staged || found
		}
		if !staged {
			fmt.Fprintf(os.Stderr, "rbs: warning: %s is a local file; pass --inputs . to send it, or --script for a script\n", w)
		}
	}
}

// flags names the submit flag that sets each manifest field.
var flags = map[string]string{
	"cpus": "--cpus", "memory_bytes": "--memory-gb", "gpus": "--gpus", "time_limit_ms": "--time",
	"max_retries": "--max-retries", "checkpoint_dir": "--checkpoint-dir", "outputs": "--outputs",
	"array": "--array", "after": "--deps", "env": "--env", "platform": "--platform", "interactive": "-i", "nodes": "--nodes", "container": "--container", "constraints": "--constraint",
	"pack": "--pack", "pack_required": "--pack-required",
}

// flagError names the flag of a manifest field at fault.
func flagError(err error) error {
	var fe *manifest.FieldError
	if errors.As(err, &fe) {
		if flag, ok := flags[fe.Field]; ok {
			return fmt.Errorf("invalid %s: %s", flag, fe.Msg)
		}
		return fmt.Errorf("%s: %s", fe.Field, fe.Msg)
	}
	return err
}

// targetPlatform is the platform job targets and --inputs labels are built
// for: --platform, else $RBS_TARGET_PLATFORM, else this machine's.
func (c *JobSubmitCmd) targetPlatform() (platform.Platform, error) {
	if c.Platform == "" {
		return platform.FromEnv()
	}
	p, err := platform.Parse(string(c.Platform))
	if err != nil {
		return p, fmt.Errorf("--platform: %w", err)
	}
	return p, nil
}

// buildSession opens a build session in the working directory for the
// target platform. This machine runs only its own platform's actions, so
// for another the cluster submitted to is the remote cache: what rbs build
// --platform P --remote built there is found, and anything else is an
// error that says to build it so.
func (c *JobSubmitCmd) buildSession() (*session.Session, error) {
	p, err := c.targetPlatform()
	if err != nil {
		return nil, err
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	opts := session.Options{Dir: cwd, Jobs: runtime.NumCPU(), Out: os.Stderr, Platform: p}
	if p != platform.Host() {
		opts.Remote, opts.RemoteCache = c.RemoteFlags.options(), true
	}
	return session.Open(opts)
}

// target returns the job target the command line names in place of a
// command (a label, with no -- before it), and the arguments after it.
func (c *JobSubmitCmd) target() (string, []string) {
	if c.Script != "" || len(c.Command) == 0 || !isLabel(c.Command[0]) {
		return "", nil
	}
	extra := c.Command[1:]
	if len(extra) > 0 && extra[0] == "--" {
		extra = extra[1:]
	}
	return c.Command[0], extra
}

// overrides are what the flags given set over a job's manifest, their
// text (a time, the dependencies, --env) parsed; the values are checked
// with the rest of the manifest.
func (c *JobSubmitCmd) overrides(memory int64) (manifest.Overrides, error) {
	o := manifest.Overrides{
		Name: c.Name, Queue: c.Queue, Priority: c.Priority, CPUs: c.CPUs, GPUs: c.GPUs,
		MaxRetries: c.MaxRetries, CheckpointDir: c.CheckpointDir, Outputs: c.Outputs, Array: c.Array,
		NoRequeue: c.NoRequeue, Interactive: c.Interactive, Container: c.Container, Preemptible: c.Preemptible, Constraints: c.Constraint, Hold: c.Hold,
		Pack: c.Pack, PackRequired: c.PackRequired, CacheVersion: c.CacheVersion,
	}
	switch {
	case c.Cache && c.NoCache:
		return o, fmt.Errorf("--cache and --no-cache: give one")
	case c.Cache:
		o.Cache = "on"
	case c.NoCache:
		o.Cache = "refresh"
	}
	for _, s := range c.Sweep {
		name, values, err := spec.ParseSweep(s)
		if err != nil {
			return o, fmt.Errorf("--sweep: %w", err)
		}
		o.Sweep = append(o.Sweep, manifest.SweepParam{Name: name, Values: values})
	}
	if c.Nodes != "" {
		lo, hi, err := spec.ParseNodes(c.Nodes)
		if err != nil {
			return o, fmt.Errorf("invalid --nodes: %w", err)
		}
		o.Nodes = int32(hi)
		if lo != hi {
			o.MinNodes = int32(lo)
		}
	}
	o.MemoryBytes = memory
	o.TimeLimitMs = time.Duration(c.Time).Milliseconds()
	if c.Deps != "" {
		deps, err := spec.ParseDeps(c.Deps)
		if err != nil {
			return o, err
		}
		for _, d := range deps {
			o.After = append(o.After, manifest.Dep{Kind: string(d.Kind), Job: d.ID.String()})
		}
	}
	for _, kv := range c.Env {
		k, v, err := spec.ParseEnvVar(kv)
		if err != nil {
			return o, err
		}
		if o.Env == nil {
			o.Env = map[string]string{}
		}
		o.Env[k] = v
	}
	return o, nil
}

// JobListCmd is `rbs job list`.
type JobListCmd struct {
	RemoteFlags
	State   []string `help:"Only jobs in these states (PENDING, RUNNING, COMPLETED, …; repeatable or comma-separated)."`
	Queue   string   `short:"p" aliases:"partition" help:"Only jobs of this queue."`
	User    string   `short:"u" help:"Only jobs of this user."`
	History bool     `help:"Include jobs that have ended."`
	JSON    bool     `name:"json" help:"Print a JSON array of jobs."`
}

// Run implements the command.
func (c *JobListCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	var states []string
	for _, s := range c.State {
		for _, part := range strings.Split(s, ",") {
			states = append(states, strings.ToUpper(strings.TrimSpace(part)))
		}
	}
	list, err := collect(jobs.List(context.Background(), &jobspb.ListRequest{States: states, Queue: c.Queue, History: c.History}))
	if err != nil {
		return err
	}
	if c.User != "" {
		list = slices.DeleteFunc(list, func(j *jobspb.JobInfo) bool { return j.Record.Spec.GetUser() != c.User })
	}
	if c.JSON {
		return schema.Write(os.Stdout, schema.Jobs(list))
	}
	out := bufio.NewWriter(os.Stdout)
	printJobTable(out, list)
	return out.Flush()
}

// JobShowCmd is `rbs job show`.
type JobShowCmd struct {
	RemoteFlags
	ID   string `arg:"" help:"Job id, such as 42 or 42_7; an array's id shows all its tasks."`
	JSON bool   `name:"json" help:"Print JSON: an object, or an array of objects for an array's id."`
}

// Run implements the command.
func (c *JobShowCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	shown, err := collect(jobs.Show(context.Background(), &jobspb.ShowRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	if c.JSON {
		return schema.Write(os.Stdout, schema.Shown(c.ID, shown))
	}
	for i, j := range shown {
		if i > 0 {
			fmt.Println()
		}
		printJobDetail(os.Stdout, j)
	}
	return nil
}

// JobLogsCmd is `rbs job logs`.
type JobLogsCmd struct {
	RemoteFlags
	ID     string `arg:"" help:"Job id (one job or array task)."`
	Follow bool   `short:"f" help:"Follow the output until the job ends, across restarts of the server."`
	Rank   int32  `help:"Only the output of this node of a multi-node job (default: every node's lines, each prefixed with its rank)." default:"-1" placeholder:"N"`
}

// Run implements the command.
func (c *JobLogsCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	var written int64
	follow := func() error {
		stream, err := jobs.Logs(context.Background(), &jobspb.LogsRequest{Id: c.ID, Follow: c.Follow, Offset: written, OneRank: c.Rank >= 0, Rank: c.Rank})
		if err != nil {
			return err
		}
		for {
			resp, err := stream.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			n, err := os.Stdout.Write(resp.Data)
			written += int64(n)
			if err != nil {
				return err
			}
		}
	}
	// Saying whether the job has started is also the check that the
	// server is there at the start.
	notStarted := func() error { return sayNotStarted(jobs, c.ID, c.Follow) }
	if !c.Follow {
		if err := notStarted(); err != nil {
			return err
		}
		return follow()
	}
	return untilServerBack(notStarted, follow)
}

// sayNotStarted says on stderr when job id has not started, so has no
// output yet, and why it waits; an unknown job is an error.
func sayNotStarted(jobs jobspb.JobsClient, id string, follow bool) error {
	shown, err := collect(jobs.Show(context.Background(), &jobspb.ShowRequest{Id: id}))
	if err != nil || len(shown) != 1 || shown[0].Record.State != "PENDING" {
		return err
	}
	r := shown[0].Record
	why := "PENDING (" + r.PendingReason + ")"
	if r.PendingReason == "" {
		why = "PENDING"
	}
	then := "it has no output yet"
	if follow {
		then = "following its output from when it starts"
	}
	fmt.Fprintf(os.Stderr, "rbs: job %s has not started: it is %s; %s (rbs job show %s says more)\n", shown[0].Id, why, then, shown[0].Id)
	return nil
}

// serverBack is how long the commands that follow jobs (logs -f, wait)
// keep trying a server they have lost, such as one restarting.
const serverBack = 10 * time.Minute

// untilServerBack calls fn again while it fails because the server cannot
// be reached, for up to serverBack, and says so once on stderr. A server
// that cannot be reached at the start (a wrong address, say) fails at once:
// reach, a first call to the server, fails.
func untilServerBack(reach, fn func() error) error {
	if err := reach(); err != nil {
		return err
	}
	var since time.Time
	delay := 100 * time.Millisecond
	for {
		err := fn()
		if status.Code(err) != codes.Unavailable {
			return err
		}
		if since.IsZero() {
			since = time.Now()
			fmt.Fprintf(os.Stderr, "rbs: %v; trying again until it is back\n", err)
		} else if time.Since(since) > serverBack {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, 2*time.Second)
	}
}

// JobWaitCmd is `rbs job wait`.
type JobWaitCmd struct {
	RemoteFlags
	IDs     []string      `arg:"" name:"id" help:"Job ids; an array's id waits for all its tasks."`
	Timeout spec.Duration `help:"Give up after this long: 90s, 30m, 2h, 1d2h, or Slurm's MM, MM:SS, [D-]HH:MM:SS, a bare number being minutes, exiting non-zero and naming the jobs not ended (default: wait for ever)." placeholder:"DURATION"`
}

// Run implements the command. Each job is printed as it ends, or as soon as
// it can never start; a server that restarts meanwhile sends again those
// already printed, which are skipped.
func (c *JobWaitCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The timeout is this client's alone: ctx ends only when it is up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if c.Timeout > 0 {
		defer time.AfterFunc(time.Duration(c.Timeout), cancel).Stop()
	}
	printed := map[string]bool{}
	var bad []string
	reach := func() error {
		_, err := jobs.Queues(context.Background(), &jobspb.QueuesRequest{})
		return err
	}
	err = untilServerBack(reach, func() error {
		stream, err := jobs.Wait(ctx, &jobspb.WaitRequest{Ids: c.IDs})
		if err != nil {
			return err
		}
		for {
			page, err := stream.Recv()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			for _, j := range page.Jobs {
				if printed[j.Id] {
					continue
				}
				printed[j.Id] = true
				fmt.Println(waitLine(j))
				switch r := j.Record; {
				case r.State == "PENDING":
					bad = append(bad, j.Id+" can never start ("+r.PendingReason+")")
				case r.State != "COMPLETED":
					bad = append(bad, j.Id+" "+r.State)
				}
			}
		}
	})
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("timed out after %s: %s", time.Duration(c.Timeout), notEnded(jobs, c.IDs, printed))
	}
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d jobs did not complete: %s", len(bad), len(printed), strings.Join(bad, ", "))
	}
	return nil
}

// waitLine is how rbs job wait prints a job that is done with: its id, its
// state and its exit code, or why it can never start.
func waitLine(j *jobspb.JobInfo) string {
	r := j.Record
	if r.State != "PENDING" {
		return fmt.Sprintf("%s\t%s\texit %d", j.Id, r.State, r.ExitCode)
	}
	var never []string
	for _, d := range j.Deps {
		if d.NeverSatisfied {
			never = append(never, fmt.Sprintf("%s:%s (%s)", d.Kind, d.Id, d.State))
		}
	}
	why := r.PendingReason
	if len(never) > 0 {
		why += ": " + strings.Join(never, ", ") + " can never be satisfied"
	}
	return fmt.Sprintf("%s\tPENDING\t%s; the job can never start (cancel it with rbs job cancel %s)", j.Id, why, j.Id)
}

// notEnded says which of the jobs ids name have not been printed, with
// their states, as the server has them now.
func notEnded(jobs jobspb.JobsClient, ids []string, printed map[string]bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var left []string
	for _, id := range ids {
		shown, err := collect(jobs.Show(ctx, &jobspb.ShowRequest{Id: id}))
		if err != nil {
			return fmt.Sprintf("jobs not ended among %s (listing them: %v)", strings.Join(ids, " "), err)
		}
		for _, j := range shown {
			state := j.Record.State
			if printed[j.Id] || sched.State(state).Terminal() {
				continue
			}
			if state == "PENDING" && j.Record.PendingReason != "" {
				state += " (" + j.Record.PendingReason + ")"
			}
			left = append(left, j.Id+" "+state)
		}
	}
	return fmt.Sprintf("%s not ended: %s", units.Plural(len(left), "job", "jobs"), listed(left))
}

// maxListed is how many jobs an error names, of an array say.
const maxListed = 10

// listed joins items, the first maxListed of them and how many more.
func listed(items []string) string {
	if n := len(items); n > maxListed {
		items = append(items[:maxListed:maxListed], fmt.Sprintf("and %d more", n-maxListed))
	}
	return strings.Join(items, ", ")
}

// JobCancelCmd is `rbs job cancel`.
type JobCancelCmd struct {
	RemoteFlags
	IDs []string `arg:"" name:"id" help:"Job ids; an array's id cancels its tasks not yet ended."`
}

// Run implements the command. It prints the jobs it cancelled; an id whose
// jobs had all ended already is an error, as with scancel, once the others
// are cancelled.
func (c *JobCancelCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := jobs.Cancel(context.Background(), &jobspb.CancelRequest{Ids: c.IDs})
	if err != nil {
		return err
	}
	var all []*jobspb.JobInfo
	ended := map[string]bool{}
	for {
		page, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		all = append(all, page.Jobs...)
		for _, id := range page.AlreadyEnded {
			ended[id] = true
		}
	}
	for _, j := range all {
		if ended[j.Id] {
			continue
		}
		note := ""
		if j.Record.CancelRequested && j.Record.State == "RUNNING" {
			note = " (stopping)"
		}
		fmt.Printf("%s\t%s%s\n", j.Id, j.Record.State, note)
	}
	var over []string
	for _, id := range c.IDs {
		var named []string
		for _, j := range all {
			if j.Id == id || fmt.Sprint(j.Record.Id) == id {
				if !ended[j.Id] {
					named = nil
					break
				}
				named = append(named, j.Id+" "+j.Record.State)
			}
		}
		over = append(over, named...)
	}
	switch {
	case len(over) == 1:
		id, state, _ := strings.Cut(over[0], " ")
		return fmt.Errorf("job %s had already ended: %s", id, state)
	case len(over) > 1:
		return fmt.Errorf("%d jobs had already ended: %s", len(over), listed(over))
	}
	return nil
}

// JobReleaseCmd is `rbs job release`.
type JobReleaseCmd struct {
	RemoteFlags
	IDs []string `arg:"" name:"id" help:"Job ids; an array's id releases its held tasks."`
}

// Run implements the command: it prints the jobs it released.
func (c *JobReleaseCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := jobs.Release(ctx, &jobspb.ReleaseRequest{Ids: c.IDs})
	if err != nil {
		return err
	}
	for _, j := range resp.Jobs {
		fmt.Printf("Released job %s\n", j.Id)
	}
	return nil
}

// JobOutputsCmd is `rbs job outputs`.
type JobOutputsCmd struct {
	RemoteFlags
	ID   string `arg:"" help:"Job id (one job or array task, such as 42 or 42_7)."`
	Dest string `help:"Directory to write the outputs into; it must not exist yet (default: ./job-ID-outputs)."`
}

// Run implements the command.
func (c *JobOutputsCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	shown, err := collect(jobs.Show(context.Background(), &jobspb.ShowRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	if len(shown) != 1 {
		return fmt.Errorf("job %s is an array of %d tasks: give one task, such as %s_%d", c.ID, len(shown), c.ID, shown[0].Record.Index)
	}
	r := shown[0].Record
	if r.OutputRoot == "" {
		return fmt.Errorf("job %s has recorded no outputs: it was submitted without --outputs, has not ended yet, or left none of them", shown[0].Id)
	}
	root, err := digest.Parse(r.OutputRoot)
	if err != nil {
		return fmt.Errorf("job %s: the server sent a bad output root: %w", shown[0].Id, err)
	}
	dest := c.Dest
	if dest == "" {
		dest = "job-" + shown[0].Id + "-outputs"
	}
	files, size, err := merkle.Download(context.Background(), client.NewCAS(conn, ""), root, dest)
	if err != nil {
		return fmt.Errorf("downloading the outputs of job %s: %w", shown[0].Id, err)
	}
	fmt.Printf("Wrote %s (%s) of job %s to %s\n", units.Plural(files, "file", "files"), units.Human(size), shown[0].Id, dest)
	return nil
}

// JobQueuesCmd is `rbs job queues`.
type JobQueuesCmd struct {
	RemoteFlags
	JSON bool `name:"json" help:"Print a JSON array of queues."`
}

// Run implements the command.
func (c *JobQueuesCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := jobs.Queues(context.Background(), &jobspb.QueuesRequest{})
	if err != nil {
		return err
	}
	if c.JSON {
		return schema.Write(os.Stdout, schema.Queues(resp.Queues))
	}
	printQueues(os.Stdout, resp.Queues)
	return nil
}

// JobSharesCmd is `rbs job shares`.
type JobSharesCmd struct {
	RemoteFlags
	JSON bool `name:"json" help:"Print the shares as a JSON object."`
}

// Run implements the command.
func (c *JobSharesCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := jobs.Shares(context.Background(), &jobspb.SharesRequest{})
	if err != nil {
		return err
	}
	if c.JSON {
		return schema.Write(os.Stdout, schema.FromShares(resp))
	}
	printShares(os.Stdout, resp)
	return nil
}

// JobReserveCmd is `rbs job reserve`: it creates a maintenance window,
// removes one, or lists them.
type JobReserveCmd struct {
	RemoteFlags
	Name    string        `arg:"" optional:"" help:"The window to create; without it, the windows are listed."`
	In      spec.Delay    `help:"Start in this long: 0s (now), 90s, 30m, 2h, 1d, or Slurm's [D-]HH:MM:SS, a bare number being minutes (default: now)." placeholder:"DURATION"`
	For     spec.Duration `help:"How long it lasts: 30m, 2h, 1d2h, or Slurm's [D-]HH:MM:SS, a bare number being minutes (needed to create one)." placeholder:"DURATION"`
	Reason  string        `help:"Why, shown with the window and in the placement of the jobs it holds back."`
	Workers []string      `help:"The workers reserved, comma-separated (default: every worker)."`
	Cancel  string        `help:"Remove the window NAME." placeholder:"NAME"`
	JSON    bool          `name:"json" help:"List the windows as a JSON array."`
}

// Run implements the command.
func (c *JobReserveCmd) Run() error {
	jobs, conn, err := jobsClient(c.RemoteFlags)
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	switch {
	case c.Cancel != "":
		if c.Name != "" {
			return fmt.Errorf("give a window to create or --cancel NAME, not both")
		}
		if _, err := jobs.CancelReservation(ctx, &jobspb.CancelReservationRequest{Name: c.Cancel}); err != nil {
			return err
		}
		fmt.Printf("Removed reservation %s\n", c.Cancel)
		return nil
	case c.Name == "":
		resp, err := jobs.Reservations(ctx, &jobspb.ReservationsRequest{})
		if err != nil {
			return err
		}
		return printReservations(os.Stdout, resp.Reservations, c.JSON, time.Now())
	}
	if c.For == 0 {
		return fmt.Errorf("reservation %s: give its length with --for, such as --for 1h", c.Name)
	}
	length := time.Duration(c.For)
	start := time.Now().Add(time.Duration(c.In))
	r := &jobspb.Reservation{Name: c.Name, StartUnixMs: start.UnixMilli(), EndUnixMs: start.Add(length).UnixMilli(), Reason: c.Reason, Workers: c.Workers}
	if _, err := jobs.Reserve(ctx, &jobspb.ReserveRequest{Reservation: r}); err != nil {
		return err
	}
	fmt.Printf("Reserved %s from %s to %s\n", c.Name, start.UTC().Format(time.RFC3339), start.Add(length).UTC().Format(time.RFC3339))
	return nil
}
