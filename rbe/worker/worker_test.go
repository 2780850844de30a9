package worker_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/longrunning/autogen/longrunningpb"
	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/clustertest"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/scheduler"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// rig is an in-process server with one in-process worker.
type rig struct {
	t     *testing.T
	conn  *grpc.ClientConn
	cas   *client.CAS
	exec  repb.ExecutionClient
	store blobstore.Store
	sched *scheduler.Scheduler
}

func newRig(t *testing.T) *rig {
	c := clustertest.Start(t)
	return &rig{t: t, conn: c.Conn, cas: client.NewCAS(c.Conn, ""), exec: repb.NewExecutionClient(c.Conn), store: c.CAS, sched: c.Sched}
}

func (r *rig) put(m proto.Message) digest.Digest {
	r.t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.putBytes(b)
}

func (r *rig) putBytes(b []byte) digest.Digest {
	r.t.Helper()
	d := digest.FromBytes(b)
	if err := blobstore.PutBytes(context.Background(), r.store, d, b); err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *rig) get(d *repb.Digest) string {
	r.t.Helper()
	dd, err := digest.FromProto(d)
	if err != nil {
		r.t.Fatal(err)
	}
	b, err := blobstore.GetBytes(context.Background(), r.store, dd)
	if err != nil {
		r.t.Fatal(err)
	}
	return string(b)
}

// action stores a Command and Action over the given input root.
func (r *rig) action(cmd *repb.Command, root *repb.Directory, timeout time.Duration) digest.Digest {
	if root == nil {
		root = &repb.Directory{}
	}
	if cmd.EnvironmentVariables == nil {
		cmd.EnvironmentVariables = []*repb.Command_EnvironmentVariable{{Name: "PATH", Value: "/usr/bin:/bin"}}
	}
	a := &repb.Action{CommandDigest: r.put(cmd).Proto(), InputRootDigest: r.put(root).Proto()}
	if timeout > 0 {
		a.Timeout = durationpb.New(timeout)
	}
	return r.put(a)
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

// execute runs an action to completion and returns the final response.
func (r *rig) execute(d digest.Digest) (*repb.ExecuteResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	stream, err := r.exec.Execute(ctx, &repb.ExecuteRequest{ActionDigest: d.Proto(), SkipCacheLookup: true})
	if err != nil {
		return nil, err
	}
	var last *longrunningpb.Operation
	for {
		op, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		last = op
	}
	return response(r.t, last), nil
}

func response(t *testing.T, op *longrunningpb.Operation) *repb.ExecuteResponse {
	t.Helper()
	if op == nil || !op.Done {
		t.Fatalf("operation did not complete: %v", op)
	}
	resp := &repb.ExecuteResponse{}
	if err := op.GetResponse().UnmarshalTo(resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestOutputsOfEveryKind(t *testing.T) {
	r := newRig(t)
	in := r.putBytes([]byte("input\n"))
	root := &repb.Directory{Files: []*repb.FileNode{{Name: "in.txt", Digest: in.Proto()}}}
	cmd := &repb.Command{
		Arguments: sh(`cat in.txt > a/b/file.txt && mkdir -p dir/sub && echo nested > dir/sub/n.txt && ln -s sub dir/link &&
			ln -s a/b/file.txt link.txt && echo out && echo err >&2 && stat -c %h in.txt > links.txt`),
		OutputPaths: []string{"a/b/file.txt", "dir", "link.txt", "links.txt"},
	}
	resp, err := r.execute(r.action(cmd, root, 0))
	if err != nil {
		t.Fatal(err)
	}
	res := resp.Result
	if resp.Status.GetCode() != 0 || res.ExitCode != 0 {
		t.Fatalf("action failed: %v, stderr %q", resp.Status, r.get(res.StderrDigest))
	}
	if r.get(res.StdoutDigest) != "out\n" || r.get(res.StderrDigest) != "err\n" {
		t.Fatalf("stdout %q stderr %q", r.get(res.StdoutDigest), r.get(res.StderrDigest))
	}
	files := map[string]string{}
	for _, f := range res.OutputFiles {
		files[f.Path] = r.get(f.Digest)
	}
	if files["a/b/file.txt"] != "input\n" {
		t.Fatalf("output files %v", files)
	}
	// The input was hard-linked from the worker's cache, not copied.
	if n, _ := strconv.Atoi(strings.TrimSpace(files["links.txt"])); n < 2 {
		t.Fatalf("input link count %q, want at least 2", files["links.txt"])
	}
	if len(res.OutputSymlinks) != 1 || res.OutputSymlinks[0].Target != "a/b/file.txt" {
		t.Fatalf("output symlinks %v", res.OutputSymlinks)
	}
	if len(res.OutputDirectories) != 1 {
		t.Fatalf("output directories %v", res.OutputDirectories)
	}
	tree := &repb.Tree{}
	if err := proto.Unmarshal([]byte(r.get(res.OutputDirectories[0].TreeDigest)), tree); err != nil {
		t.Fatal(err)
	}
	if len(tree.Root.Directories) != 1 || len(tree.Root.Symlinks) != 1 || len(tree.Children) != 1 || r.get(tree.Children[0].Files[0].Digest) != "nested\n" {
		t.Fatalf("tree %v", tree)
	}
}

func TestREAPI20OutputFields(t *testing.T) {
	r := newRig(t)
	cmd := &repb.Command{
		Arguments:         sh("echo f > deep/er/f.txt && mkdir -p d/x && echo y > d/x/y"),
		OutputFiles:       []string{"deep/er/f.txt"},
		OutputDirectories: []string{"d"},
		WorkingDirectory:  "wd",
	}
	resp, err := r.execute(r.action(cmd, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Result.ExitCode != 0 || len(resp.Result.OutputFiles) != 1 || len(resp.Result.OutputDirectories) != 1 {
		t.Fatalf("result %v, stderr %q", resp.Result, r.get(resp.Result.StderrDigest))
	}
}

// TestTimeoutKeepsPartialOutput checks that an action is stopped at its
// timeout and keeps what it wrote; were it not stopped, it would go on to
// print "not stopped".
func TestTimeoutKeepsPartialOutput(t *testing.T) {
	r := newRig(t)
	resp, err := r.execute(r.action(&repb.Command{Arguments: sh("echo partial; sleep 30; echo not stopped")}, nil, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if codes.Code(resp.Status.GetCode()) != codes.DeadlineExceeded {
		t.Fatalf("status %v, want DEADLINE_EXCEEDED", resp.Status)
	}
	if got := r.get(resp.Result.StdoutDigest); got != "partial\n" {
		t.Fatalf("partial stdout %q", got)
	}
}

func TestFailingCommandReportsExitCode(t *testing.T) {
	r := newRig(t)
	resp, err := r.execute(r.action(&repb.Command{Arguments: sh("echo boom >&2; exit 7")}, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Result.ExitCode != 7 || r.get(resp.Result.StderrDigest) != "boom\n" {
		t.Fatalf("exit %d stderr %q", resp.Result.ExitCode, r.get(resp.Result.StderrDigest))
	}
}

func TestEscapingPathsAreRejected(t *testing.T) {
	r := newRig(t)
	file := r.putBytes([]byte("x"))
	marker := filepath.Join(t.TempDir(), "must-not-exist")
	touch := &repb.Command{Arguments: sh("touch " + marker)}
	links := func(targets ...string) []*repb.SymlinkNode {
		var out []*repb.SymlinkNode
		for i := 0; i < len(targets); i += 2 {
			out = append(out, &repb.SymlinkNode{Name: targets[i], Target: targets[i+1]})
		}
		return out
	}
	var chain []string // l1 -> l2 -> … -> l41 -> f
	for i := 1; i <= 41; i++ {
		next := "l" + strconv.Itoa(i+1)
		if i == 41 {
			next = "f"
		}
		chain = append(chain, "l"+strconv.Itoa(i), next)
	}
	tests := []struct {
		name string
		cmd  *repb.Command
		root *repb.Directory
		want string // in the status message
	}{
		{"output with ..", &repb.Command{Arguments: sh("touch " + marker), OutputFiles: []string{"../../escape"}}, nil, "escape"},
		{"absolute output", &repb.Command{Arguments: sh("touch " + marker), OutputPaths: []string{"/etc/passwd"}}, nil, "/etc/passwd"},
		{"working directory with ..", &repb.Command{Arguments: sh("touch " + marker), WorkingDirectory: "../.."}, nil, "../.."},
		{"input named ..", touch, &repb.Directory{Files: []*repb.FileNode{{Name: "..", Digest: file.Proto()}}}, `".."`},
		{"input name with a slash", touch, &repb.Directory{Files: []*repb.FileNode{{Name: "a/../../b", Digest: file.Proto()}}}, "a/../../b"},
		{"absolute symlink", touch, &repb.Directory{Symlinks: links("l", "/etc")}, `"l" -> "/etc"`},
		{"symlink out of the tree", touch, &repb.Directory{Symlinks: links("l", "../../..")}, `"l" -> "../../.." escapes`},
		// Each link alone stays inside; e resolves through d/l to the
		// root's parent.
		{"symlinks chaining out of the tree", touch, &repb.Directory{
			Directories: []*repb.DirectoryNode{{Name: "d", Digest: r.put(&repb.Directory{Symlinks: links("l", "..")}).Proto()}},
			Symlinks:    links("e", "d/l/.."),
		}, `"e" -> "d/l/.." escapes the input root`},
		{"symlink loop", touch, &repb.Directory{Symlinks: links("a", "b", "b", "a")}, `"a" -> "b" goes through more than 40 symlinks`},
		{"chain of 41 symlinks", touch, &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: file.Proto()}}, Symlinks: links(chain...)},
			`"l1" -> "l2" goes through more than 40 symlinks`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := r.execute(r.action(tt.cmd, tt.root, 0))
			if err != nil {
				t.Fatal(err)
			}
			if codes.Code(resp.Status.GetCode()) != codes.InvalidArgument || !strings.Contains(resp.Status.GetMessage(), tt.want) {
				t.Fatalf("status %v, want INVALID_ARGUMENT naming %s", resp.Status, tt.want)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the command ran")
			}
		})
	}
}

func TestSymlinksInsideTheTree(t *testing.T) {
	r := newRig(t)
	in := r.putBytes([]byte("in\n"))
	data := r.put(&repb.Directory{Files: []*repb.FileNode{{Name: "in.txt", Digest: in.Proto()}}})
	dir := r.put(&repb.Directory{Symlinks: []*repb.SymlinkNode{{Name: "x", Target: "../data"}, {Name: "up", Target: ".."}}})
	root := &repb.Directory{
		Directories: []*repb.DirectoryNode{{Name: "data", Digest: data.Proto()}, {Name: "dir", Digest: dir.Proto()}},
		Symlinks:    []*repb.SymlinkNode{{Name: "a", Target: "data/in.txt"}, {Name: "b", Target: "dir/up/dir/x/in.txt"}},
	}
	cmd := &repb.Command{Arguments: sh("cat a dir/x/in.txt b > out.txt"), OutputPaths: []string{"out.txt"}}
	resp, err := r.execute(r.action(cmd, root, 0))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status.GetCode() != 0 || resp.Result.ExitCode != 0 || len(resp.Result.OutputFiles) != 1 {
		t.Fatalf("status %v, result %v", resp.Status, resp.Result)
	}
	if got := r.get(resp.Result.OutputFiles[0].Digest); got != "in\nin\nin\n" {
		t.Fatalf("out.txt = %q", got)
	}
}

// Inputs are hard links into the worker's cache: an action that writes to
// one is aborted, and the next action that uses the same blob still gets
// its content.
func TestInputWrittenInPlace(t *testing.T) {
	r := newRig(t)
	in := r.putBytes([]byte("original\n"))
	root := &repb.Directory{Files: []*repb.FileNode{{Name: "in.txt", Digest: in.Proto()}}}
	write := &repb.Command{Arguments: sh("chmod u+w in.txt && echo more >> in.txt && cat in.txt > out.txt"), OutputPaths: []string{"out.txt"}}
	resp, err := r.execute(r.action(write, root, 0))
	if err != nil {
		t.Fatal(err)
	}
	if codes.Code(resp.Status.GetCode()) != codes.Aborted || !strings.Contains(resp.Status.GetMessage(), "input in.txt was written to") {
		t.Fatalf("status %v, want ABORTED naming in.txt", resp.Status)
	}
	read := &repb.Command{Arguments: sh("cat in.txt; stat -c %a in.txt")}
	resp, err = r.execute(r.action(read, root, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.get(resp.Result.GetStdoutDigest()); resp.Status.GetCode() != 0 || got != "original\n444\n" {
		t.Fatalf("the next action read %q (status %v), want the original content, read-only", got, resp.Status)
	}
}

func TestPlatformMismatchFailsFast(t *testing.T) {
	r := newRig(t)
	cmd := &repb.Command{Arguments: sh("true"), Platform: &repb.Platform{Properties: []*repb.Platform_Property{{Name: "gpu", Value: "h100"}}}}
	_, err := r.execute(r.action(cmd, nil, 0))
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "gpu=h100") {
		t.Fatalf("Execute = %v, want FAILED_PRECONDITION naming gpu=h100", err)
	}
}

// waitForFile is a command that waits until the file exists, then prints
// what.
func waitForFile(path, what string) []string {
	return []string{"/bin/sh", "-c", `while [ ! -e "$1" ]; do sleep 0.01; done; echo "$2"`, "sh", path, what}
}

func TestWaitExecutionAfterDisconnect(t *testing.T) {
	r := newRig(t)
	release := filepath.Join(t.TempDir(), "release")
	d := r.action(&repb.Command{Arguments: waitForFile(release, "waited")}, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	execCtx, execCancel := context.WithCancel(ctx)
	stream, err := r.exec.Execute(execCtx, &repb.ExecuteRequest{ActionDigest: d.Proto()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	execCancel() // the client goes away

	wait, err := r.exec.WaitExecution(ctx, &repb.WaitExecutionRequest{Name: first.Name})
	if err != nil {
		t.Fatal(err)
	}
	var last *longrunningpb.Operation
	for {
		op, err := wait.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if op.Name != first.Name {
			t.Fatalf("WaitExecution streamed operation %s, want %s", op.Name, first.Name)
		}
		if last == nil {
			// The action waits for the release: the operation is still
			// running when WaitExecution takes it up.
			if op.Done {
				t.Fatalf("WaitExecution's first operation is done before the action was released: %v", op)
			}
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		last = op
	}
	if resp := response(t, last); r.get(resp.Result.StdoutDigest) != "waited\n" {
		t.Fatalf("result %v", resp.Result)
	}
}

// TestIdenticalActionsRunOnce sends an action three times at once; it runs
// only after all three Executes have been taken up (each has had its first
// operation), so they all find it in flight.
func TestIdenticalActionsRunOnce(t *testing.T) {
	r := newRig(t)
	release := filepath.Join(t.TempDir(), "release")
	d := r.action(&repb.Command{Arguments: waitForFile(release, "once")}, nil, 0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	accepted := make(chan struct{}, 3)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			stream, err := r.exec.Execute(ctx, &repb.ExecuteRequest{ActionDigest: d.Proto(), SkipCacheLookup: true})
			if err == nil {
				_, err = stream.Recv()
			}
			accepted <- struct{}{}
			for err == nil {
				_, err = stream.Recv()
			}
			if err == io.EOF {
				err = nil
			}
			errs <- err
		}()
	}
	for range 3 {
		<-accepted
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := r.sched.Status().Actions.Completed; n != 1 {
		t.Fatalf("%d executions for three identical concurrent actions, want 1", n)
	}
}

// TestOrphansAreReaped checks that a process the payload orphans (setsid
// and a parent that exits) is adopted by the worker, a subreaper, and
// reaped by it once it has exited, rather than left a zombie.
func TestOrphansAreReaped(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(t.TempDir(), "orphan.pid")
	script := `setsid sh -c 'echo $$ >"$1"; exec sleep 1000' sh "$1" </dev/null >/dev/null 2>&1 &
while [ ! -s "$1" ]; do sleep 0.01; done`
	resp, err := r.execute(r.action(&repb.Command{Arguments: []string{"/bin/sh", "-c", script, "sh", pidFile}}, nil, 0))
	if err != nil || resp.Result.ExitCode != 0 {
		t.Fatalf("%v %v", resp, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// Its parent has exited, so it is ours now; being our child, its pid
	// cannot be reused until we reap it.
	st, ok := procStat(pid)
	if !ok || st.ppid != os.Getpid() {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("orphan %d: %+v (present %v), want a child of the worker's process %d", pid, st, ok, os.Getpid())
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		now, ok := procStat(pid)
		if !ok || now.start != st.start {
			return // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d was killed but is still there: %+v", pid, now)
		}
	}
}

// stat is what TestOrphansAreReaped reads of /proc/PID/stat.
type stat struct {
	state string
	ppid  int
	start string // start time since boot, in clock ticks
}

func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
	// majflt cmajflt utime stime cutime cstime priority nice threads
	// itrealvalue starttime ...
	s := string(b)
	f := strings.Fields(s[strings.LastIndex(s, ")")+1:])
	if len(f) < 20 {
		return stat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return stat{state: f[0], ppid: ppid, start: f[19]}, true
}
