package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/jobs/manifest"
	"github.com/rbs-build/rbs/proto/jobspb"
	"github.com/rbs-build/rbs/rbe/client"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Paths that would leave their directory, from a client that crafts its
// own requests: an input tree whose entries climb out of the job's
// directory (as tar- and zip-slip archives do), and action results whose
// outputs do. Each is refused with an error naming the path, and nothing
// is written outside. A job's output symlinks that point outside its
// directory come back as symlinks, never followed: downloading them
// writes nothing outside the destination.
func TestHostilePaths(t *testing.T) {
	srv := startServer(t)
	w := startWorker(t, srv, "w1")
	conn, err := client.Dial(client.Options{Target: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cas := client.NewCAS(conn, "")
	upload := func(m proto.Message) digest.Digest {
		t.Helper()
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		d := digest.FromBytes(b)
		if _, _, err := cas.Upload(ctx, []client.Blob{{Digest: d, Data: b}}); err != nil {
			t.Fatal(err)
		}
		return d
	}
	content := []byte("written through a hostile name\n")
	file := digest.FromBytes(content)
	if _, _, err := cas.Upload(ctx, []client.Blob{{Digest: file, Data: content}}); err != nil {
		t.Fatal(err)
	}
	jobs := jobspb.NewJobsClient(conn)
	for _, tc := range []struct {
		name, path string
		root       *repb.Directory
	}{
		{"a file named ../", "../../../slipped", &repb.Directory{Files: []*repb.FileNode{{Name: "../../../slipped", Digest: file.Proto()}}}},
		{"a file named with a slash", "a/../../slipped", &repb.Directory{Files: []*repb.FileNode{{Name: "a/../../slipped", Digest: file.Proto()}}}},
		{"a directory named ..", "..", &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "..", Digest: upload(&repb.Directory{Files: []*repb.FileNode{{Name: "slipped", Digest: file.Proto()}}}).Proto()}}}},
		{"an absolute file name", "/tmp/slipped", &repb.Directory{Files: []*repb.FileNode{{Name: "/tmp/slipped", Digest: file.Proto()}}}},
		{"a symlink out, then a file through it", "up", &repb.Directory{
			Directories: []*repb.DirectoryNode{{Name: "up", Digest: upload(&repb.Directory{Files: []*repb.FileNode{{Name: "slipped", Digest: file.Proto()}}}).Proto()}},
			Symlinks:    []*repb.SymlinkNode{{Name: "up", Target: "../../.."}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := json.Marshal(&manifest.Manifest{Version: manifest.Version, Name: "slip", Command: []string{"true"}, CPUs: 1, Nodes: 1, InputRoot: upload(tc.root).String()})
			if err != nil {
				t.Fatal(err)
			}
			r, err := jobs.Submit(ctx, &jobspb.SubmitRequest{Manifests: [][]byte{m}, User: "tester"})
			if err != nil {
				// Refused at the door is as good, when it names the path.
				if !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("submit refused without naming %q: %v", tc.path, err)
				}
				return
			}
			id := strconv.FormatInt(r.JobId, 10)
			rbsRun(srv, "job", "wait", id)
			var j struct {
				State   string `json:"state"`
				Message string `json:"message"`
			}
			if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil {
				t.Fatal(err)
			}
			if j.State != "FAILED" || !strings.Contains(j.Message, tc.path) {
				t.Fatalf("job %s with the input %q: %s %q; want FAILED naming the path", id, tc.path, j.State, j.Message)
			}
		})
	}
	// Nothing was written outside the jobs' directories.
	err = filepath.Walk(filepath.Dir(w.WorkDir), func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Name() == "slipped" {
			t.Errorf("%s was written", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Action results whose outputs leave the working directory.
	ac := repb.NewActionCacheClient(conn)
	for _, res := range []*repb.ActionResult{
		{OutputFiles: []*repb.OutputFile{{Path: "../escaped", Digest: file.Proto()}}},
		{OutputFiles: []*repb.OutputFile{{Path: "/etc/escaped", Digest: file.Proto()}}},
		{OutputDirectories: []*repb.OutputDirectory{{Path: "out/../../escaped", TreeDigest: upload(&repb.Tree{Root: &repb.Directory{}}).Proto()}}},
		{OutputSymlinks: []*repb.OutputSymlink{{Path: "../escaped", Target: "x"}}},
	} {
		key := digest.FromBytes([]byte(res.String())).Proto()
		_, err := ac.UpdateActionResult(ctx, &repb.UpdateActionResultRequest{ActionDigest: key, ActionResult: res})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "escaped") {
			t.Errorf("UpdateActionResult %v: %v; want INVALID_ARGUMENT naming the path", res, err)
		}
		if _, err := ac.GetActionResult(ctx, &repb.GetActionResultRequest{ActionDigest: key}); status.Code(err) != codes.NotFound {
			t.Errorf("the refused result was stored: %v", err)
		}
	}

	// Output symlinks that point out of the job's directory are kept as
	// symlinks, and downloading them follows none.
	id := submit(t, srv, "--outputs", "out", "--", "sh", "-c", "mkdir out && echo hi > out/file && ln -s /etc/passwd out/passwd && ln -s ../../../.. out/up")
	rbs(t, srv, "job", "wait", id)
	dest := filepath.Join(t.TempDir(), "dest")
	rbs(t, srv, "job", "outputs", id, "--dest", dest)
	for name, target := range map[string]string{"passwd": "/etc/passwd", "up": "../../../.."} {
		got, err := os.Readlink(filepath.Join(dest, "out", name))
		if err != nil || got != target {
			t.Errorf("out/%s downloaded as %q, %v; want the symlink to %s", name, got, err, target)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dest, "out", "file")); err != nil || string(b) != "hi\n" {
		t.Errorf("out/file = %q, %v", b, err)
	}
}
