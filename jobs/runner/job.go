package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/memlimit"
	"github.com/rbs-build/rbs/rbe/process"
)

const (
	// jobGrace is how long a job's process group has between SIGTERM and
	// SIGKILL when it is cancelled or runs out of time.
	jobGrace = 10 * time.Second
	// logChunk and logFlush bound how much output and how long the worker
	// holds before sending it.
	logChunk = 64 << 10
	logFlush = 200 * time.Millisecond
	// drainTimeout bounds the wait for output after a job's process ended,
	// in case an escaped descendant holds the pipe open.
	drainTimeout = 2 * time.Second
	// groupPrefix starts the names of job memory groups and containers,
	// followed by the worker's pid, so that a later worker can sweep those
	// of one that died.
	groupPrefix = "rbs-job-"
)

// sweepGroups removes the memory groups, and kills the processes, of jobs
// whose worker process is gone.
func sweepGroups() (int, error) {
	return memlimit.Sweep(orphaned)
}

// payloadName names what a job attempt's payload runs in (its memory
// group, its container): the worker's pid and session, then the
// attempt's name.
func (rn *Runner) payloadName(name string) string {
	return fmt.Sprintf("%s%d-%s-%s", groupPrefix, os.Getpid(), rn.cfg.Session, name)
}

// orphaned reports whether name is a payloadName of a worker process that
// is gone.
func orphaned(name string) bool {
	rest, ok := strings.CutPrefix(name, groupPrefix)
	if !ok {
		return false
	}
	pidText, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// jobEnv is the environment a job starts with: a few variables of the
// worker's own (HOME, USER and LOGNAME those of u when the job runs as
// u), then the job's (RBS_JOB_ID and friends included), then the GPUs
// pinned to it.
func jobEnv(dir string, u *process.User, env map[string]string, gpus gpuEnv) []string {
	vars := map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin", "TMPDIR": dir, "HOME": dir}
	for _, k := range []string{"PATH", "HOME", "LANG", "USER", "LOGNAME", "SHELL"} {
		if v, ok := os.LookupEnv(k); ok {
			vars[k] = v
		}
	}
	if u != nil {
		vars["HOME"], vars["USER"], vars["LOGNAME"] = u.Home, u.Name, u.Name
	}
	return withJobVars(vars, env, gpus)
}

// withJobVars is vars, then env, then the GPUs pinned, as "KEY=VALUE"
// strings, sorted.
func withJobVars(vars, env map[string]string, gpus gpuEnv) []string {
	for k, v := range env {
		vars[k] = v
	}
	// As with Slurm, the scheduler's devices win over the job's own --env
	// and --export for these two, so that a job cannot reach GPUs pinned
	// to another.
	vars["CUDA_VISIBLE_DEVICES"] = gpus.cuda
	vars["NVIDIA_VISIBLE_DEVICES"] = gpus.nvidia
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// gpuEnv is how a job is shown its GPUs: CUDA_VISIBLE_DEVICES lists their
// indices (as Slurm does), NVIDIA_VISIBLE_DEVICES (read by the NVIDIA
// container runtime) their UUIDs, or indices when a UUID is unknown. With
// no GPUs, CUDA_VISIBLE_DEVICES is empty, which CUDA reads as no device,
// and NVIDIA_VISIBLE_DEVICES is "void", which mounts none: without them a
// job would see every GPU of the machine.
type gpuEnv struct{ cuda, nvidia string }

// pinnedGPUs gives the gpuEnv of the GPUs of indices pinned, among those
// the worker offers.
func pinnedGPUs(pinned []int32, offered []*workerpb.Gpu) gpuEnv {
	if len(pinned) == 0 {
		return gpuEnv{cuda: "", nvidia: "void"}
	}
	uuids := map[int32]string{}
	for _, g := range offered {
		uuids[g.Index] = g.Uuid
	}
	indices := make([]string, len(pinned))
	ids := make([]string, len(pinned))
	byUUID := true
	for i, g := range pinned {
		indices[i] = strconv.Itoa(int(g))
		ids[i] = uuids[g]
		byUUID = byUUID && ids[i] != ""
	}
	if !byUUID {
		ids = indices
	}
	return gpuEnv{cuda: strings.Join(indices, ","), nvidia: strings.Join(ids, ",")}
}

// stopGrace is how long an attempt has between SIGTERM and SIGKILL: what
// the server asks (a preemptible job's --preempt-grace), else jobGrace.
func stopGrace(a *workerpb.AssignJob) time.Duration {
	if a.StopGraceMs > 0 {
		return time.Duration(a.StopGraceMs) * time.Millisecond
	}
	return jobGrace
}

// freePort returns a TCP port free on every interface of this machine,
// for a gang's rank 0 to serve the other ranks on.
func freePort() (int, error) {
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run runs one attempt of a job and returns how it ended; its output
// goes to the outbox as it is written.
func (rn *Runner) Run(ctx context.Context, a *workerpb.AssignJob) *workerpb.JobEnded {
	end := &workerpb.JobEnded{TaskId: a.TaskId}
	fail := func(msg string) *workerpb.JobEnded {
		end.State, end.Message, end.ExitCode = "FAILED", msg, 127
		return end
	}
	if a.Interactive {
		defer rn.endStdin(a.TaskId)
	}
	name := strings.NewReplacer("#", "-", "/", "-").Replace(a.TaskId)
	dir, err := rn.dirs.Take()
	if err != nil {
		return fail("creating the job's directory: " + err.Error())
	}
	// The directory is kept for another attempt only when the attempt ran
	// as the worker's own user and its memory group was found empty at
	// the end: nothing of it runs on (execroot.Spares).
	var emptied bool
	defer func() { rn.dirs.Give(dir, emptied && rn.cfg.RunAs == nil) }()
	var tree *execroot.Tree
	if a.InputRoot != "" {
		var err error
		if tree, err = rn.jobTree(ctx, a.InputRoot); err != nil {
			return fail("staging the job's inputs: " + errorText(err))
		}
	}
	tree, err = rn.withUpstream(ctx, tree, a.Upstream)
	if err != nil {
		return fail(err.Error())
	}
	args := a.Command
	if a.Script != "" {
		args = append([]string{filepath.Join(dir, scriptName)}, a.Command...)
		if !strings.HasPrefix(a.Script, "#!") {
			args = append([]string{"/bin/sh"}, args...)
		}
	}
	// What failed before the job could start, or after it ended, says why
	// the attempt failed, or what was not recorded.
	var failed string
	before := func(dir string) error {
		if a.CheckpointRoot != "" {
			if err := rn.restoreCheckpoint(ctx, a.CheckpointRoot, dir, a.CheckpointDir); err != nil {
				failed = "restoring the job's checkpoint: " + errorText(err)
				return err
			}
		}
		if a.Script != "" {
			if err := os.WriteFile(filepath.Join(dir, scriptName), []byte(a.Script), 0o755); err != nil {
				failed = "writing the job's script: " + err.Error()
				return err
			}
		}
		// Only now, with the inputs staged and the script written (a
		// process the user left running could put a symlink in its
		// place), is the directory the user's.
		if err := rn.cfg.RunAs.HandOver(dir); err != nil {
			failed = "giving the job's directory to its user: " + err.Error()
			return err
		}
		if a.CheckpointRoot != "" {
			if err := rn.cfg.RunAs.GiveFiles(filepath.Join(dir, filepath.FromSlash(a.CheckpointDir))); err != nil {
				failed = "giving the job's checkpoint to its user: " + err.Error()
				return err
			}
		}
		return nil
	}
	// The job's start, which execroot.Run calls: in its memory group, or
	// in a container, with its output streamed to the server.
	var peak int64
	var oom bool
	var notes []string
	run := func(ctx context.Context, spec process.Spec) (process.Result, error) {
		// A job in a container has the container's memory limit instead:
		// its processes are not the worker's children.
		var group *memlimit.Group
		var onStart func(pid int) error
		if a.ContainerImage == "" {
			var err error
			if group, err = rn.groups.New(a.MemoryBytes); err != nil {
				failed = "setting up the memory limit: " + err.Error()
				return process.Result{}, err
			}
			defer group.Close()
			if !group.PlacesAtStart() {
				onStart = group.Add
			}
		} else if rn.containers == nil {
			failed = "the job runs in the image " + a.ContainerImage + ", and this worker has no container runtime"
			return process.Result{}, errors.New(failed)
		}
		// An interactive attempt reads a pipe fed by the server; others
		// /dev/null. The worker's copy of the read end is closed once the
		// job has its own, so that writing fails once the job no longer
		// reads.
		if a.Interactive {
			stdin, err := rn.openStdin(a.TaskId)
			if err != nil {
				failed = "creating the job's stdin: " + err.Error()
				return process.Result{}, err
			}
			defer stdin.Close()
			spec.Stdin = stdin
			place := onStart
			onStart = func(pid int) error {
				stdin.Close()
				if place == nil {
					return nil
				}
				return place(pid)
			}
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			failed = err.Error()
			return process.Result{}, err
		}
		// The output is also kept in a file until the job's end is
		// delivered, so that what a broken stream lost can be sent again.
		out := newJobOutput(rn.outputFile(a.TaskId), a.MaxOutputBytes)
		defer out.close()
		rn.mu.Lock()
		rn.outputs[a.TaskId] = out
		rn.mu.Unlock()
		streamed := make(chan int64, 1)
		go func() { streamed <- rn.streamOutput(a.TaskId, pr, out) }()
		defer func() {
			pw.Close()
			select {
			case end.OutputBytes = <-streamed:
			case <-time.After(drainTimeout):
				pr.Close()
				end.OutputBytes = <-streamed
			}
			pr.Close()
		}()

		env := a.Env
		if a.PickMasterPort {
			port, err := freePort()
			if err != nil {
				failed = "picking a port for the gang's rank 0: " + err.Error()
				return process.Result{}, err
			}
			env = maps.Clone(a.Env)
			env["MASTER_PORT"], env["RBS_MASTER_PORT"] = strconv.Itoa(port), strconv.Itoa(port)
			rn.cfg.Started(a.TaskId, int32(port))
			rn.cfg.Outbox <- &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_JobStarted{JobStarted: &workerpb.JobStarted{TaskId: a.TaskId, MasterPort: int32(port)}}}
		}
		spec.Stdout, spec.Stderr = pw, pw
		spec.Timeout, spec.Grace, spec.OnStart = time.Duration(a.TimeLimitMs)*time.Millisecond, stopGrace(a), onStart
		var res process.Result
		if a.ContainerImage != "" {
			res, notes, err = rn.runContainer(ctx, a, name, dir, args, env, spec)
		} else {
			spec.Args, spec.Env = args, jobEnv(dir, rn.cfg.RunAs, env, pinnedGPUs(a.GpuIndices, rn.cfg.GPUs))
			spec.Credential = rn.cfg.RunAs.Credential()
			spec = rn.cfg.Reaper.Wrap(spec)
			if group.PlacesAtStart() {
				start := spec.Start
				spec.Start = func(cmd *exec.Cmd) error { return group.Start(cmd, start) }
			}
			res, err = process.Run(ctx, spec)
		}
		if err != nil {
			failed = "cannot run the job: " + err.Error()
			return res, err
		}
		// The peak of a job in a container is unknown: the rusage of the
		// podman or docker client is not the job's.
		if group != nil {
			var err error
			if peak, oom, err = group.Stats(); err != nil || peak == 0 {
				peak = res.MaxRSS
			}
			// What the payload left in its memory group dies before its
			// files are read.
			if err := group.Close(); err != nil {
				rn.cfg.Log.Warn("ending a job's memory group", "task", a.TaskId, "err", err)
			} else {
				emptied = group.Mode() != memlimit.ModeRlimit
			}
		}
		return res, nil
	}
	// The directory is taken back from the --run-as user once the job
	// has ended; without it, no input is checked and no output recorded.
	var reclaimed error
	ran, err := rn.cfg.Cache.Run(ctx, execroot.Spec{
		Source: rn.source(), Tree: tree, Root: dir, Before: before, Exec: run,
		After: func(dir string) error { reclaimed = rn.cfg.RunAs.Reclaim(dir); return nil },
	})
	var staging *execroot.StageError
	switch {
	case errors.As(err, &staging):
		return fail("staging the job's inputs: " + errorText(staging.Err))
	case err != nil && failed != "":
		return fail(failed)
	case err != nil:
		return fail(err.Error())
	case ran.StartErr != nil:
		return fail(failed)
	}
	res := ran.Process
	if ran.Unchecked != nil && reclaimed == nil {
		notes = append(notes, "checking the job's inputs for changes: "+ran.Unchecked.Error())
	}
	notes = append(notes, rn.jobFiles(ctx, a, dir, ran.Changed, reclaimed, end)...)
	end.Message = strings.Join(notes, "; ")
	end.PeakMemoryBytes, end.OomKilled, end.ExitCode = peak, oom, int32(res.ExitCode)
	end.CpuTimeMs = res.CPUTime.Milliseconds()
	switch {
	case res.Cancelled:
		end.State = "CANCELLED"
	case res.TimedOut:
		end.State = "TIMEOUT"
	case oom:
		end.State = "OUT_OF_MEMORY"
	case res.ExitCode == 0:
		end.State = "COMPLETED"
	default:
		end.State = "FAILED"
	}
	return end
}

// jobFiles ends an attempt that ran, its directory taken back from the
// --run-as user (reclaimed: the error doing so) and its inputs checked
// (changed names one written in place): it records the outputs and the
// checkpoint. It returns notes for the job's message.
func (rn *Runner) jobFiles(ctx context.Context, a *workerpb.AssignJob, dir, changed string, reclaimed error, end *workerpb.JobEnded) []string {
	if reclaimed != nil {
		return []string{"taking the job's directory back from its user, so no input was checked and no output recorded: " + reclaimed.Error()}
	}
	var notes []string
	if changed != "" {
		notes = append(notes, fmt.Sprintf("input %s was written to in place while the job ran; inputs are hard links into the worker's cache, so it was dropped from the cache (copy an input before changing it)", changed))
	}
	notes = append(notes, rn.recordOutputs(ctx, dir, a.Outputs, end)...)
	if a.CheckpointDir != "" {
		notes = append(notes, rn.recordCheckpoint(ctx, dir, a.CheckpointDir, end)...)
	}
	return notes
}

// outputFile is where a job attempt's output is kept.
func (rn *Runner) outputFile(task string) string {
	return filepath.Join(rn.cfg.Root, strings.NewReplacer("#", "-", "/", "-").Replace(task)+".out")
}

// Resend returns the output of running or finished job attempts that
// the server lacks, given how much of each it has.
func (rn *Runner) Resend(stored map[string]int64) []*workerpb.WorkerMessage {
	var msgs []*workerpb.WorkerMessage
	for task, have := range stored {
		rn.mu.Lock()
		out := rn.outputs[task]
		rn.mu.Unlock()
		if out == nil {
			continue
		}
		for off := have; ; {
			data, at, skipped, err := out.read(off, logChunk)
			if err != nil || len(data) == 0 {
				break
			}
			msgs = append(msgs, jobLog(task, at, skipped, data))
			off = at + int64(len(data))
		}
	}
	return msgs
}

func jobLog(task string, offset, skipped int64, data []byte) *workerpb.WorkerMessage {
	return &workerpb.WorkerMessage{Kind: &workerpb.WorkerMessage_JobLog{JobLog: &workerpb.JobLog{TaskId: task, Offset: offset, Skipped: skipped, Data: data}}}
}

// streamOutput keeps what the job writes on r in out, sends it in chunks as
// it comes (the head; the tail once r ends), and returns how many bytes the
// job wrote.
func (rn *Runner) streamOutput(task string, r io.Reader, out *jobOutput) int64 {
	more := make(chan struct{}, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		buf := make([]byte, logChunk)
		kept := true
		for {
			n, err := r.Read(buf)
			if n > 0 && kept {
				// What cannot be kept is still read, so that the job
				// is not held up writing to a full pipe.
				if err := out.write(buf[:n]); err != nil {
					rn.cfg.Log.Warn("keeping a job's output: the rest is dropped", "task", task, "err", err)
					kept = false
				} else {
					select {
					case more <- struct{}{}:
					default:
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var sent int64
	// send sends what there is from sent on; with whole, only full chunks.
	send := func(whole bool) {
		for {
			data, at, skipped, err := out.read(sent, logChunk)
			if err != nil || len(data) == 0 || whole && len(data) < logChunk {
				return
			}
			rn.cfg.Outbox <- jobLog(task, at, skipped, data)
			sent = at + int64(len(data))
		}
	}
	t := time.NewTicker(logFlush)
	defer t.Stop()
	for {
		select {
		case <-more:
			send(true)
		case <-t.C:
			send(false)
		case <-copied:
			size := out.end()
			send(false)
			return size
		}
	}
}
