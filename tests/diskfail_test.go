package tests

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// failingDisk is a directory served by FUSE from another, in which every
// change fails with EIO while the disk is broken, as on a dying disk whose
// writes fail: writes, syncs, new files, removals, renames, truncations.
// Reads go on.
type failingDisk struct {
	Dir    string
	broken atomic.Bool
}

// mountFailingDisk mounts a failingDisk for the test's life. It needs
// /dev/fuse and root; without them the test skips, or fails under
// RBS_TEST_REQUIRE_ALL=1.
func mountFailingDisk(t *testing.T) *failingDisk {
	t.Helper()
	d := &failingDisk{Dir: t.TempDir()}
	backing := t.TempDir()
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		t.Fatal(err)
	}
	root := &fs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &failingNode{LoopbackNode: fs.LoopbackNode{RootData: r}, disk: d}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	server, err := fs.Mount(d.Dir, root.RootNode, &fs.Options{MountOptions: fuse.MountOptions{FsName: "rbs-failing-disk", DirectMount: true}})
	if err != nil {
		unavailable(t, "mount a FUSE file system", err, nil)
	}
	t.Cleanup(func() {
		d.broken.Store(false)
		if err := server.Unmount(); err != nil {
			exec.Command("umount", "-l", d.Dir).Run()
		}
	})
	return d
}

// Break makes every change fail with EIO; Mend makes them work again.
func (d *failingDisk) Break() { d.broken.Store(true) }
func (d *failingDisk) Mend()  { d.broken.Store(false) }

func (d *failingDisk) fail() syscall.Errno {
	if d.broken.Load() {
		return syscall.EIO
	}
	return 0
}

type failingNode struct {
	fs.LoopbackNode
	disk *failingDisk
}

// loopbackHandle is what go-fuse's loopback files do; a failingFile
// passes it all on but for changes (and the kernel's passthrough, which
// would bypass it).
type loopbackHandle interface {
	fs.FileReader
	fs.FileWriter
	fs.FileReleaser
	fs.FileFlusher
	fs.FileFsyncer
	fs.FileGetlker
	fs.FileSetlker
	fs.FileSetlkwer
	fs.FileSetattrer
	fs.FileGetattrer
	fs.FileLseeker
	fs.FileAllocater
}

type failingFile struct {
	loopbackHandle
	disk *failingDisk
}

func (f *failingFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if e := f.disk.fail(); e != 0 {
		return 0, e
	}
	return f.loopbackHandle.Write(ctx, data, off)
}

func (f *failingFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	if e := f.disk.fail(); e != 0 {
		return e
	}
	return f.loopbackHandle.Fsync(ctx, flags)
}

func (f *failingFile) Allocate(ctx context.Context, off, size uint64, mode uint32) syscall.Errno {
	if e := f.disk.fail(); e != 0 {
		return e
	}
	return f.loopbackHandle.Allocate(ctx, off, size, mode)
}

func (f *failingFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := f.disk.fail(); e != 0 {
		return e
	}
	return f.loopbackHandle.Setattr(ctx, in, out)
}

func (n *failingNode) wrap(fh fs.FileHandle) fs.FileHandle {
	return &failingFile{loopbackHandle: fh.(loopbackHandle), disk: n.disk}
}

func (n *failingNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, e := n.LoopbackNode.Open(ctx, flags)
	if e != 0 {
		return nil, 0, e
	}
	return n.wrap(fh), fl, 0
}

func (n *failingNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.disk.fail(); e != 0 {
		return nil, nil, 0, e
	}
	in, fh, fl, e := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	return in, n.wrap(fh), fl, 0
}

func (n *failingNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.disk.fail(); e != 0 {
		return e
	}
	if ff, ok := f.(*failingFile); ok {
		f = ff.loopbackHandle
	}
	return n.LoopbackNode.Setattr(ctx, f, in, out)
}

func (n *failingNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.disk.fail(); e != 0 {
		return nil, e
	}
	return n.LoopbackNode.Mkdir(ctx, name, mode, out)
}

func (n *failingNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := n.disk.fail(); e != 0 {
		return e
	}
	return n.LoopbackNode.Unlink(ctx, name)
}

func (n *failingNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := n.disk.fail(); e != 0 {
		return e
	}
	return n.LoopbackNode.Rmdir(ctx, name)
}

func (n *failingNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.disk.fail(); e != 0 {
		return e
	}
	if p, ok := newParent.(*failingNode); ok {
		newParent = &p.LoopbackNode
	}
	return n.LoopbackNode.Rename(ctx, name, newParent, newName, flags)
}

// The server's data directory is on a disk whose writes start failing
// with EIO while a job runs. Submissions fail loudly, naming the I/O
// error, and none is acknowledged (none is listed later); reads (job
// lists, logs) go on. Once the disk works again the server goes on by
// itself: the job that ended meanwhile is recorded COMPLETED and new
// submissions are taken.
func TestStateDiskFailing(t *testing.T) {
	disk := mountFailingDisk(t)
	srv := startServerIn(t, disk.Dir)
	w := startWorker(t, srv, "w1", "--cpus", "2", "--job-slots", "2")
	before := submit(t, srv, "--", "echo", "before")
	rbs(t, srv, "job", "wait", before)
	release := filepath.Join(t.TempDir(), "release")
	long := submit(t, srv, "--", "sh", "-c", `echo started; while [ ! -e "$1" ]; do sleep 0.05; done; echo done`, "sh", release)
	waitFor(t, srv, long, "RUNNING", inState("RUNNING"))

	disk.Break()
	refused := func(i int) {
		t.Helper()
		cmd := exec.Command(rbsBin, "job", "submit", "--parsable", "--", "echo", "refused")
		cmd.Env = append(os.Environ(), "RBS_REMOTE="+srv.Addr)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("submission %d on the failing disk was acknowledged: %s", i, out)
		}
		if !strings.Contains(string(out), "I/O error") || !strings.Contains(string(out), "nothing of this request was recorded") {
			t.Fatalf("submission %d failed without naming the I/O error: %s", i, out)
		}
	}
	for i := range 5 {
		refused(i)
	}
	if got := rbs(t, srv, "job", "logs", before); got != "before\n" {
		t.Fatalf("job %s's output, read while the disk fails: %q", before, got)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the running job to end on the worker", func() bool { return strings.Contains(w.log.String(), `msg="job ended" job=`+long+" ") }, w.log.String)
	refused(5)

	disk.Mend()
	rbs(t, srv, "job", "wait", long)
	if j := show(t, srv, long); j.State != "COMPLETED" {
		t.Fatalf("the job that ended while the disk failed: %+v", j)
	}
	if got := rbs(t, srv, "job", "logs", long); got != "started\ndone\n" {
		t.Fatalf("its output %q", got)
	}
	after := submit(t, srv, "--", "echo", "after")
	rbs(t, srv, "job", "wait", after)
	var listed []jobView
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "list", "--history", "--json")), &listed); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range listed {
		ids = append(ids, j.ID)
		if j.State != "COMPLETED" {
			t.Errorf("job %s: %+v", j.ID, j)
		}
	}
	if got, want := strings.Join(ids, ","), strings.Join([]string{before, long, after}, ","); got != want {
		t.Fatalf("jobs listed %s, want %s: only the acknowledged ones", got, want)
	}
}
