package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/proto/workerpb"
	"github.com/rbs-build/rbs/rbe/blobstore"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/execroot"
	"github.com/rbs-build/rbs/rbe/process"
	"github.com/rbs-build/rbs/rbe/server"
	"google.golang.org/protobuf/proto"
)

// jobRig is a CAS server and a runner that runs jobs with Run, without
// a worker or scheduler.
type jobRig struct {
	t      *testing.T
	rn     *Runner
	outbox chan *workerpb.WorkerMessage
	store  blobstore.Store
}

func newJobRig(t *testing.T) *jobRig {
	store := blobstore.ContentAddressed(blobstore.NewMemory())
	srv := server.New(server.Config{CAS: store, AC: blobstore.NewMemory()})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := client.Dial(client.Options{Target: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cas := client.NewCAS(conn, "")
	work := t.TempDir()
	cache, err := execroot.OpenCache(filepath.Join(work, "cache"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(work, "jobs")
	if err := os.Mkdir(jobs, 0o711); err != nil {
		t.Fatal(err)
	}
	outbox := make(chan *workerpb.WorkerMessage, 1024)
	rn := newRunner(Config{
		Root:    jobs,
		Session: "test",
		CAS:     cas,
		Cache:   cache,
		Reaper:  process.NewReaper(),
		Outbox:  outbox,
		Started: func(string, int32) {},
		Log:     slog.New(slog.DiscardHandler),
	}, nil)
	t.Cleanup(func() {
		if err := rn.Close(); err != nil {
			t.Error(err)
		}
	})
	return &jobRig{t: t, rn: rn, outbox: outbox, store: store}
}

func (r *jobRig) put(b []byte) digest.Digest {
	r.t.Helper()
	d := digest.FromBytes(b)
	if err := blobstore.PutBytes(context.Background(), r.store, d, b); err != nil {
		r.t.Fatal(err)
	}
	return d
}

func (r *jobRig) putDir(dir *repb.Directory) digest.Digest {
	r.t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(dir)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.put(b)
}

func (r *jobRig) get(d digest.Digest) []byte {
	r.t.Helper()
	b, err := blobstore.GetBytes(context.Background(), r.store, d)
	if err != nil {
		r.t.Fatalf("blob %s: %v", d, err)
	}
	return b
}

// log returns what the job attempts run so far wrote, as sent.
func (r *jobRig) log() string {
	var b strings.Builder
	for {
		select {
		case m := <-r.outbox:
			b.Write(m.GetJobLog().GetData())
		default:
			return b.String()
		}
	}
}

// listing renders the tree of root in the CAS, sorted: "p=content" for a
// file ("p*=content" when executable), "p/" for a directory, "p -> target"
// for a symlink.
func (r *jobRig) listing(root string) []string {
	r.t.Helper()
	rd, err := digest.Parse(root)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	var walk func(d digest.Digest, prefix string)
	walk = func(d digest.Digest, prefix string) {
		dir := &repb.Directory{}
		if err := proto.Unmarshal(r.get(d), dir); err != nil {
			r.t.Fatal(err)
		}
		for _, f := range dir.Files {
			fd, err := digest.FromProto(f.Digest)
			if err != nil {
				r.t.Fatal(err)
			}
			mark := ""
			if f.IsExecutable {
				mark = "*"
			}
			out = append(out, prefix+f.Name+mark+"="+string(r.get(fd)))
		}
		for _, l := range dir.Symlinks {
			out = append(out, prefix+l.Name+" -> "+l.Target)
		}
		for _, sub := range dir.Directories {
			sd, err := digest.FromProto(sub.Digest)
			if err != nil {
				r.t.Fatal(err)
			}
			out = append(out, prefix+sub.Name+"/")
			walk(sd, prefix+sub.Name+"/")
		}
	}
	walk(rd, "")
	slices.Sort(out)
	return out
}

// TestJobInputs checks that a job sees its input root in its directory,
// and that one whose inputs cannot be staged fails saying why.
func TestJobInputs(t *testing.T) {
	r := newJobRig(t)
	a, b := r.put([]byte("A")), r.put([]byte("B"))
	nested := r.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: "b.sh", Digest: b.Proto(), IsExecutable: true}}})
	sub := r.putDir(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "dir", Digest: nested.Proto()}}})
	good := r.putDir(&repb.Directory{
		Files:       []*repb.FileNode{{Name: "a.txt", Digest: a.Proto()}},
		Directories: []*repb.DirectoryNode{{Name: "sub", Digest: sub.Proto()}},
		Symlinks:    []*repb.SymlinkNode{{Name: "link", Target: "sub/dir/b.sh"}},
	})
	absent := digest.FromBytes([]byte("not in the CAS"))
	lacksFile := r.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: absent.Proto()}}})
	escapes := r.putDir(&repb.Directory{Symlinks: []*repb.SymlinkNode{{Name: "up", Target: "../../etc"}}})
	script := r.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: scriptName, Digest: a.Proto()}}})
	for _, tc := range []struct {
		name, root string
		state      string
		want       string // in the log when COMPLETED, else in the message
	}{
		{"files, nested directories and a symlink", good.String(), "COMPLETED", "ABB|sub/dir/b.sh|executable"},
		{"the root missing from the CAS", absent.String(), "FAILED", "staging the job's inputs: input tree incomplete in the CAS"},
		{"a file missing from the CAS", lacksFile.String(), "FAILED", "staging the job's inputs: input files missing from the CAS"},
		{"a symlink out of the directory", escapes.String(), "FAILED", `"up" -> "../../etc" escapes the input root`},
		{"an input on the script's name", script.String(), "FAILED", `the input root holds ".rbs-script"`},
		{"not a digest", "nonsense", "FAILED", `staging the job's inputs: invalid digest "nonsense"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := r.rn.Run(context.Background(), &workerpb.AssignJob{
				TaskId:    "inputs-" + strings.ReplaceAll(tc.name, " ", "-"),
				Command:   []string{"/bin/sh", "-c", `cat a.txt sub/dir/b.sh link && echo "|$(readlink link)|" && test -x sub/dir/b.sh && echo executable`},
				InputRoot: tc.root,
			})
			log := r.log()
			if end.State != tc.state {
				t.Fatalf("state %s (%q, output %q), want %s", end.State, end.Message, log, tc.state)
			}
			got := end.Message
			if tc.state == "COMPLETED" {
				got = strings.ReplaceAll(log, "\n", "")
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("%q, want %q in it", got, tc.want)
			}
		})
	}
}

// TestJobChangesInputInPlace checks that a job that writes to an input
// file, a hard link into the worker's cache, is told so and that the cache
// drops the blob, so that the next job gets the content of the CAS.
func TestJobChangesInputInPlace(t *testing.T) {
	r := newJobRig(t)
	orig := r.put([]byte("orig"))
	root := r.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: "f.txt", Digest: orig.Proto()}}})
	for _, tc := range []struct {
		name, script string
		note         bool
	}{
		{"writes to its input", "cat f.txt; chmod u+w f.txt; echo changed > f.txt", true},
		{"reads the content of the CAS again", "cat f.txt", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := r.rn.Run(context.Background(), &workerpb.AssignJob{
				TaskId:    "inplace-" + strings.ReplaceAll(tc.name, " ", "-"),
				Command:   []string{"/bin/sh", "-c", tc.script},
				InputRoot: root.String(),
			})
			if log := r.log(); end.State != "COMPLETED" || log != "orig" {
				t.Fatalf("state %s (%q), output %q; want COMPLETED and orig", end.State, end.Message, log)
			}
			noted := strings.Contains(end.Message, "input f.txt was written to in place")
			if noted != tc.note {
				t.Fatalf("message %q; want a note on f.txt: %v", end.Message, tc.note)
			}
			missing, err := r.rn.cfg.Cache.Store(false).FindMissing(context.Background(), []digest.Digest{orig})
			if err != nil {
				t.Fatal(err)
			}
			if dropped := len(missing) == 1; dropped != tc.note {
				t.Fatalf("blob dropped from the cache: %v, want %v", dropped, tc.note)
			}
		})
	}
}

// TestJobOutputs checks that the outputs of an attempt are recorded
// however it ends: files with their executable bit, directories with
// everything in them, empty ones and symlinks included, and symlinks as
// their targets, never followed, on the way to an output or under it.
func TestJobOutputs(t *testing.T) {
	const prepare = `echo hello > out.txt
mkdir -p bin d/sub d/empty
printf '#!/bin/sh\n' > bin/run.sh && chmod +x bin/run.sh
printf 12345 > d/x && printf ab > d/sub/y && ln -s x d/l
ln -s /etc/passwd pw && ln -s /etc link
echo ready
`
	wantTree := []string{
		"bin/", "bin/run.sh*=#!/bin/sh\n", "d/", "d/empty/", "d/l -> x", "d/sub/", "d/sub/y=ab", "d/x=12345",
		"out.txt=hello\n", "pw -> /etc/passwd",
	}
	wantOutputs := []string{"out.txt file 6", "bin/run.sh file 10", "d directory 7", "pw symlink 0"}
	wantNotes := []string{"output link/passwd: link is a symlink", "output nope: not found", `output: path "../up" contains ".."`}
	for _, tc := range []struct {
		name, end string
		limitMs   int64
		cancel    bool
		state     string
	}{
		{"completed", "exit 0", 0, false, "COMPLETED"},
		{"failed", "exit 1", 0, false, "FAILED"},
		{"timed out", "exec sleep 60", 1000, false, "TIMEOUT"},
		{"cancelled", "exec sleep 60", 0, true, "CANCELLED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newJobRig(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ended := make(chan *workerpb.JobEnded, 1)
			go func() {
				ended <- r.rn.Run(ctx, &workerpb.AssignJob{
					TaskId:      "outputs-" + strings.ReplaceAll(tc.name, " ", "-"),
					Script:      prepare + tc.end + "\n",
					TimeLimitMs: tc.limitMs,
					Outputs:     []string{"out.txt", "bin/run.sh", "d", "pw", "link/passwd", "nope", "../up"},
				})
			}()
			if tc.cancel {
				var log string
				for !strings.Contains(log, "ready") {
					log += string((<-r.outbox).GetJobLog().GetData())
				}
				cancel()
			}
			end := <-ended
			if end.State != tc.state {
				t.Fatalf("state %s (%q, output %q), want %s", end.State, end.Message, r.log(), tc.state)
			}
			var outs []string
			for _, o := range end.Outputs {
				outs = append(outs, strings.Join([]string{o.Path, o.Kind, strconv.FormatInt(o.SizeBytes, 10)}, " "))
			}
			if !slices.Equal(outs, wantOutputs) {
				t.Errorf("outputs %q, want %q", outs, wantOutputs)
			}
			for _, n := range wantNotes {
				if !strings.Contains(end.Message, n) {
					t.Errorf("message %q lacks %q", end.Message, n)
				}
			}
			if got := r.listing(end.OutputRoot); !slices.Equal(got, wantTree) {
				t.Errorf("output tree %q, want %q", got, wantTree)
			}
		})
	}
}

// TestJobRunAs checks that a job run as another user finds its inputs
// staged before its directory was handed over to it, so that it can write
// in their directories, and that what it writes there is recorded.
func TestJobRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatal("running a job as another user needs root (RBS_TEST_REQUIRE_ALL=1)")
		}
		t.Skip("running a job as another user needs root; set RBS_TEST_REQUIRE_ALL=1 to make this a failure")
	}
	r := newJobRig(t)
	// The payload user must reach the jobs directory: it and the test's
	// directories above it are opened to it.
	work := filepath.Dir(r.rn.cfg.Root)
	for _, p := range []string{r.rn.cfg.Root, work, filepath.Dir(work)} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	r.rn.cfg.RunAs = &process.User{Name: "payload", UID: 4242424, GID: 4242425}
	in := r.put([]byte("input\n"))
	sub := r.putDir(&repb.Directory{Files: []*repb.FileNode{{Name: "in.txt", Digest: in.Proto()}}})
	root := r.putDir(&repb.Directory{Directories: []*repb.DirectoryNode{{Name: "sub", Digest: sub.Proto()}}})
	end := r.rn.Run(context.Background(), &workerpb.AssignJob{
		TaskId:    "runas",
		Command:   []string{"/bin/sh", "-c", "id -u && cat sub/in.txt > sub/out.txt"},
		InputRoot: root.String(),
		Outputs:   []string{"sub"},
	})
	if log := r.log(); end.State != "COMPLETED" || log != "4242424\n" {
		t.Fatalf("state %s (%q), output %q; want COMPLETED, run as 4242424", end.State, end.Message, log)
	}
	want := []string{"sub/", "sub/in.txt=input\n", "sub/out.txt=input\n"}
	if got := r.listing(end.OutputRoot); !slices.Equal(got, want) {
		t.Fatalf("output tree %q, want %q", got, want)
	}
}

// TestJobCheckpoints checks that an attempt's checkpoint directory is
// recorded however it ends, and restored into the next attempt as files the
// job may rewrite in place, as its own user or as another, without
// changing the worker's cache.
func TestJobCheckpoints(t *testing.T) {
	type step struct {
		name    string
		script  string
		restore int // the step whose checkpoint is restored; -1 for none
		state   string
		log     string
		tree    []string // the checkpoint recorded; nil for none
		message string   // in the message
	}
	steps := []step{
		{"first attempt writes a checkpoint", "mkdir -p ckpt/sub && echo 5 > ckpt/step && echo x > ckpt/sub/data && exit 1", -1, "FAILED", "", []string{"step=5\n", "sub/", "sub/data=x\n"}, ""},
		{"next attempt reads it and rewrites it in place", "cat ckpt/step ckpt/sub/data && echo 6 > ckpt/step", 0, "COMPLETED", "5\nx\n", []string{"step=6\n", "sub/", "sub/data=x\n"}, ""},
		{"the first checkpoint is restored unchanged", "cat ckpt/step && exec sleep 60", 0, "TIMEOUT", "5\n", []string{"step=5\n", "sub/", "sub/data=x\n"}, ""},
		{"no checkpoint written", "true", -1, "COMPLETED", "", nil, ""},
		{"a file where the checkpoint should be", "echo > ckpt", -1, "COMPLETED", "", nil, "checkpoint ckpt: a file, not a directory"},
		{"a symlink on the way to it", "true", 0, "FAILED", "", nil, "restoring the job's checkpoint: link is not a directory among the job's inputs"},
	}
	for _, runAs := range []bool{false, true} {
		t.Run(fmt.Sprintf("run as another user %v", runAs), func(t *testing.T) {
			r := newJobRig(t)
			if runAs {
				if os.Geteuid() != 0 {
					if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
						t.Fatal("running a job as another user needs root (RBS_TEST_REQUIRE_ALL=1)")
					}
					t.Skip("running a job as another user needs root; set RBS_TEST_REQUIRE_ALL=1 to make this a failure")
				}
				work := filepath.Dir(r.rn.cfg.Root)
				for _, p := range []string{r.rn.cfg.Root, work, filepath.Dir(work)} {
					if err := os.Chmod(p, 0o711); err != nil {
						t.Fatal(err)
					}
				}
				r.rn.cfg.RunAs = &process.User{Name: "payload", UID: 4242424, GID: 4242425}
			}
			linkRoot := r.putDir(&repb.Directory{Symlinks: []*repb.SymlinkNode{{Name: "link", Target: "."}}})
			roots := make([]string, len(steps))
			five := digest.FromBytes([]byte("5\n"))
			for i, s := range steps {
				a := &workerpb.AssignJob{
					TaskId:        fmt.Sprintf("ckpt-%d", i),
					Command:       []string{"/bin/sh", "-c", s.script},
					CheckpointDir: "ckpt",
					TimeLimitMs:   500,
				}
				if s.restore >= 0 {
					a.CheckpointRoot = roots[s.restore]
				}
				if strings.Contains(s.name, "symlink") {
					a.InputRoot, a.CheckpointDir = linkRoot.String(), "link/ckpt"
				}
				end := r.rn.Run(context.Background(), a)
				log := r.log()
				if end.State != s.state || log != s.log || !strings.Contains(end.Message, s.message) || s.message == "" && end.Message != "" {
					t.Fatalf("%s: %s (%q), output %q; want %s, %q in the message, output %q", s.name, end.State, end.Message, log, s.state, s.message, s.log)
				}
				roots[i] = end.CheckpointRoot
				// The cache's copy of the first checkpoint's file is as
				// it was stored, whatever the attempts wrote.
				if ok, err := r.rn.cfg.Cache.Store(false).Unchanged(five); !ok || err != nil {
					t.Fatalf("%s: the cached blob of the first checkpoint's file was changed (%v)", s.name, err)
				}
				if s.tree == nil {
					if end.CheckpointRoot != "" {
						t.Fatalf("%s: checkpoint %q recorded, want none", s.name, r.listing(end.CheckpointRoot))
					}
					continue
				}
				if got := r.listing(end.CheckpointRoot); !slices.Equal(got, s.tree) {
					t.Fatalf("%s: checkpoint %q, want %q", s.name, got, s.tree)
				}
			}
		})
	}
}

// TestOutputThatCannotBeKept: when the worker cannot keep a job's output
// (here its file's path is taken by a directory), the output is dropped
// and the job goes on: it is not held up writing to a full pipe.
func TestOutputThatCannotBeKept(t *testing.T) {
	r := newJobRig(t)
	const task = "dropped-output"
	if err := os.Mkdir(r.rn.outputFile(task), 0o700); err != nil {
		t.Fatal(err)
	}
	end := r.rn.Run(context.Background(), &workerpb.AssignJob{
		TaskId: task,
		// Far more than a pipe holds; the time limit only ends a job held
		// up for good.
		Script:      "head -c 4194304 /dev/zero\n",
		TimeLimitMs: 60_000,
	})
	if end.State != "COMPLETED" {
		t.Fatalf("the job ended %s (%s), want COMPLETED", end.State, end.Message)
	}
}
