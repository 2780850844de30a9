package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/process"
	"golang.org/x/sys/unix"
)

// containerRuntime is how the worker runs the jobs that name an image: the
// podman or docker it found, and the flags that make `run` work on this
// machine.
type containerRuntime struct {
	// kind is "podman" or "docker", as offered in Resources.container_runtime.
	kind string
	path string
	// flags go to every `run`, after the job's own: those worked out for
	// this machine, then the --container-flag values, which may override
	// them.
	flags []string
	// cdi says that podman knows the NVIDIA GPUs as CDI devices
	// (nvidia.com/gpu=UUID), so that a job's are named to it.
	cdi bool
}

// containerHost is what detection reads of the machine; tests fake it.
type containerHost struct {
	lookPath func(name string) (string, error)
	// output runs a program and returns its standard output, or an error
	// that holds its standard error.
	output func(ctx context.Context, prog string, args ...string) (string, error)
	// nofile and nproc are the worker's own limits, pidMax the kernel's
	// (/proc/sys/kernel/pid_max).
	nofile, nproc unix.Rlimit
	pidMax        uint64
	// nvidiaCDI says that a CDI spec of NVIDIA GPUs is installed.
	nvidiaCDI bool
}

// thisHost is this machine, its programs run through r.
func thisHost(r *process.Reaper) containerHost {
	h := containerHost{lookPath: execLookPath, output: r.Output, pidMax: 1 << 22}
	unix.Getrlimit(unix.RLIMIT_NOFILE, &h.nofile)
	unix.Getrlimit(unix.RLIMIT_NPROC, &h.nproc)
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			h.pidMax = n
		}
	}
	for _, dir := range []string{"/etc/cdi", "/var/run/cdi"} {
		specs, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, s := range specs {
			if b, err := os.ReadFile(s); err == nil && strings.Contains(string(b), "nvidia.com/gpu") {
				h.nvidiaCDI = true
			}
		}
	}
	return h
}

// execLookPath finds a program in the worker's PATH.
func execLookPath(name string) (string, error) {
	return process.LookPath(name, "/", nil, true)
}

// containerKinds are the runtimes the worker knows, in the order "auto"
// tries them.
var containerKinds = []string{"podman", "docker"}

// detectContainers finds the container runtime that choice names: "auto"
// the first of podman and docker on PATH that answers `info`;
// "podman" or "docker" that one; a path the program there, podman or
// docker by its name; "none" none. It returns nil and no error for none,
// and nil and why when the runtime cannot be used. extra are the
// --container-flag values.
func detectContainers(ctx context.Context, choice string, extra []string, h containerHost) (*containerRuntime, error) {
	switch {
	case choice == "none":
		return nil, nil
	case choice == "auto":
		var why []string
		for _, kind := range containerKinds {
			path, err := h.lookPath(kind)
			if err != nil {
				why = append(why, kind+": not on PATH")
				continue
			}
			rt, err := probeContainers(ctx, kind, path, extra, h)
			if err == nil {
				return rt, nil
			}
			why = append(why, err.Error())
		}
		return nil, errors.New(strings.Join(why, "; "))
	case slices.Contains(containerKinds, choice):
		path, err := h.lookPath(choice)
		if err != nil {
			return nil, fmt.Errorf("%s: not on PATH", choice)
		}
		return probeContainers(ctx, choice, path, extra, h)
	case strings.Contains(choice, "/"):
		for _, kind := range containerKinds {
			if strings.HasPrefix(filepath.Base(choice), kind) {
				return probeContainers(ctx, kind, choice, extra, h)
			}
		}
		return nil, fmt.Errorf("%s: the program's name says neither podman nor docker", choice)
	}
	return nil, fmt.Errorf("invalid container runtime %q: want auto, podman, docker, none or the path of podman or docker", choice)
}

// probeContainers asks the runtime at path which OCI runtime it uses
// (which also tells that it works: docker's fails without its daemon) and
// works out the flags its runs need here.
func probeContainers(ctx context.Context, kind, path string, extra []string, h containerHost) (*containerRuntime, error) {
	format := "{{.Host.OCIRuntime.Name}}"
	if kind == "docker" {
		format = "{{.DefaultRuntime}}"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	oci, err := h.output(ctx, path, "info", "--format", format)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", kind, path, err)
	}
	rt := &containerRuntime{kind: kind, path: path}
	if kind == "podman" {
		// crun, podman's usual default, fails where runc works (hybrid
		// cgroups); runc is preferred where both are installed.
		if oci = strings.TrimSpace(oci); oci != "runc" {
			if runc, err := h.lookPath("runc"); err == nil {
				rt.flags = append(rt.flags, "--runtime", runc)
			}
		}
		// podman's defaults ask for more open files and processes than a
		// process without CAP_SYS_RESOURCE may raise its limits to, and
		// for at most 2,048 processes: the job gets the limits it would
		// have outside the container. podman lowers its own process limit
		// to pid_max, and a container cannot get more than podman has.
		rt.flags = append(rt.flags,
			"--ulimit", "nofile="+rlimitText(h.nofile.Cur)+":"+rlimitText(h.nofile.Max),
			"--ulimit", "nproc="+rlimitText(min(h.nproc.Cur, h.pidMax))+":"+rlimitText(min(h.nproc.Max, h.pidMax)),
			"--pids-limit", "-1")
		rt.cdi = h.nvidiaCDI
	}
	rt.flags = append(rt.flags, extra...)
	return rt, nil
}

// rlimitText is a limit as --ulimit reads it.
func rlimitText(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "-1"
	}
	return strconv.FormatUint(v, 10)
}

// offered is what Register says of the runtime: "" for none.
func (c *containerRuntime) offered() string {
	if c == nil {
		return ""
	}
	return c.kind
}

// containerJob is one job attempt to run in a container.
type containerJob struct {
	name, image, dir string
	// envFile holds the job's environment, one KEY=VALUE a line: values
	// on the command line would show in ps to every user of the machine.
	envFile string
	// user is who the job runs as, the image's USER notwithstanding: as
	// outside a container, the worker's user or --run-as's, who owns the
	// job's directory.
	user        process.User
	memoryBytes int64
	interactive bool
	// gpus are the pinned GPUs as NVIDIA_VISIBLE_DEVICES names them.
	gpus []string
	args []string
}

// runArgs is the command line that runs j: as j's user, with the job's
// directory mounted at the same path as the working directory, the host's network (a gang's
// ranks reach each other as they would outside), an init process that
// passes signals on and reaps, and a name to stop and remove it by.
func (c *containerRuntime) runArgs(j containerJob) []string {
	args := []string{c.path, "run", "--rm", "--init", "--name", j.name, "--network", "host",
		"-v", j.dir + ":" + j.dir, "-w", j.dir, "--env-file", j.envFile}
	if j.interactive {
		args = append(args, "-i")
	}
	args = append(args, "--user", fmt.Sprintf("%d:%d", j.user.UID, j.user.GID))
	for _, g := range j.user.Groups {
		args = append(args, "--group-add", strconv.FormatUint(uint64(g), 10))
	}
	if j.memoryBytes > 0 {
		m := strconv.FormatInt(j.memoryBytes, 10)
		args = append(args, "--memory", m, "--memory-swap", m)
	}
	switch {
	case len(j.gpus) == 0:
	case c.kind == "docker":
		// The quotes keep the comma from splitting the value.
		args = append(args, "--gpus", `"device=`+strings.Join(j.gpus, ",")+`"`)
	case c.cdi:
		for _, g := range j.gpus {
			args = append(args, "--device", "nvidia.com/gpu="+g)
		}
	}
	args = append(args, c.flags...)
	return append(append(args, j.image), j.args...)
}

// removeArgs is the command line that kills and removes the container
// named name at once.
func (c *containerRuntime) removeArgs(name string) []string {
	if c.kind == "podman" {
		return []string{c.path, "rm", "--force", "--time", "0", name}
	}
	return []string{c.path, "rm", "--force", name}
}

// remove kills and removes the container named name, if it is there.
func (c *containerRuntime) remove(r *process.Reaper, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := c.removeArgs(name)
	_, err := r.Output(ctx, args[0], args[1:]...)
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "no such container") {
		return nil
	}
	return err
}

// sweep removes the containers of jobs whose worker process is gone.
func (c *containerRuntime) sweep(r *process.Reaper) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := r.Output(ctx, c.path, "ps", "--all", "--filter", "name="+groupPrefix, "--format", "{{.Names}}")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range strings.Fields(out) {
		if !orphaned(name) {
			continue
		}
		if err := c.remove(r, name); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// containerEnvFile writes the environment of a job in a container, vars
// ("KEY=VALUE"), to path, and returns the names of those it left out: a
// value with a newline cannot be written on one line.
func containerEnvFile(path string, vars []string) ([]string, error) {
	var b strings.Builder
	var left []string
	for _, kv := range vars {
		if strings.ContainsAny(kv, "\n\r") {
			k, _, _ := strings.Cut(kv, "=")
			left = append(left, k)
			continue
		}
		b.WriteString(kv + "\n")
	}
	return left, os.WriteFile(path, []byte(b.String()), 0o600)
}

// runContainer runs an attempt's command, args, in its image with spec's
// I/O and time limit, and stops and removes the container
// however the command ends: podman or docker passes the SIGTERM of a
// cancel or time limit on to it, but a SIGKILL after the grace ends only
// the client. It returns notes for the job's message.
func (rn *Runner) runContainer(ctx context.Context, a *workerpb.AssignJob, name, dir string, args []string, env map[string]string, spec process.Spec) (process.Result, []string, error) {
	rt := rn.containers
	gpus := pinnedGPUs(a.GpuIndices, rn.cfg.GPUs)
	j := containerJob{
		name:        rn.payloadName(name),
		image:       a.ContainerImage,
		dir:         dir,
		envFile:     filepath.Join(rn.cfg.Root, name+".env"),
		user:        process.User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())},
		memoryBytes: a.MemoryBytes,
		interactive: a.Interactive,
		args:        args,
	}
	if rn.cfg.RunAs != nil {
		j.user = *rn.cfg.RunAs
	}
	if len(a.GpuIndices) > 0 {
		j.gpus = strings.Split(gpus.nvidia, ",")
	}
	// The image gives the rest of the environment (its PATH above all).
	left, err := containerEnvFile(j.envFile, withJobVars(map[string]string{}, env, gpus))
	defer os.Remove(j.envFile)
	if err != nil {
		return process.Result{}, nil, fmt.Errorf("writing the job's environment: %w", err)
	}
	var notes []string
	if len(left) > 0 {
		notes = append(notes, "not passed into the container, as their values hold a newline: "+strings.Join(left, ", "))
	}
	spec.Args = rt.runArgs(j)
	spec.Dir = dir
	spec.Env = runtimeEnv()
	res, runErr := process.Run(ctx, rn.cfg.Reaper.Wrap(spec))
	if err := rt.remove(rn.cfg.Reaper, j.name); err != nil {
		rn.cfg.Log.Warn("removing a job's container", "task", a.TaskId, "container", j.name, "err", err)
	}
	return res, notes, runErr
}

// runtimeEnv is the environment podman or docker runs with: the worker's,
// less its own settings (RBS_WORKER_TOKEN among them).
func runtimeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RBS_") {
			env = append(env, kv)
		}
	}
	return env
}

// startContainers finds the container runtime cfg names and removes the
// containers that workers gone before left. A runtime named outright that
// does not work is an error; one "auto" finds none of is logged.
func startContainers(ctx context.Context, cfg Config) (*containerRuntime, error) {
	r := cfg.Reaper
	choice := cfg.ContainerRuntime
	if choice == "" {
		choice = "none"
	}
	rt, err := detectContainers(ctx, choice, cfg.ContainerFlags, thisHost(r))
	switch {
	case err != nil && choice != "auto":
		return nil, fmt.Errorf("--container-runtime %s: %w", choice, err)
	case err != nil:
		cfg.Log.Info("no container runtime: jobs that name an image go to other workers", "reason", err)
		return nil, nil
	case rt == nil:
		return nil, nil
	}
	cfg.Log.Info("container runtime", "runtime", rt.kind, "path", rt.path, "flags", strings.Join(rt.flags, " "))
	if n, err := rt.sweep(r); err != nil {
		cfg.Log.Warn("removing the containers of a previous worker", "err", err)
	} else if n > 0 {
		cfg.Log.Info("removed the containers of jobs of a previous worker", "containers", n)
	}
	return rt, nil
}
