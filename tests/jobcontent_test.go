package tests

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/protobuf/proto"
)

type recordedOutput struct {
	Path      string `json:"path"`
	Kind      string `json:"kind"`
	SizeBytes int64  `json:"size_bytes"`
}

func outputsOf(t *testing.T, srv *server, id string) []recordedOutput {
	t.Helper()
	var j struct {
		Outputs []recordedOutput `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(rbs(t, srv, "job", "show", "--json", id)), &j); err != nil {
		t.Fatal(err)
	}
	return j.Outputs
}

// Jobs carry their code in with --inputs and their results out with
// --outputs, through the CAS, with no shared file system: the worker's
// directory is not the submitter's.
func TestJobInputsAndOutputs(t *testing.T) {
	srv := startServer(t)
	startWorker(t, srv, "w1", "--cpus", "4", "--job-slots", "4")
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "pkg", ".git"), 0o755)
	os.WriteFile(filepath.Join(src, "pkg", "main.sh"), []byte("echo from main\n"), 0o644)
	os.WriteFile(filepath.Join(src, "pkg", ".git", "HEAD"), []byte("ref\n"), 0o644)
	tool := filepath.Join(t.TempDir(), "tool.sh")
	os.WriteFile(tool, []byte("#!/bin/sh\necho tool $1\n"), 0o755)

	// The three forms of --inputs: a directory, a file, DEST=PATH.
	id := submit(t, srv, "--inputs", src, "--inputs", tool, "--inputs", "lib/x="+filepath.Join(src, "pkg"),
		"--outputs", "result.txt", "--outputs", "out", "--outputs", "never-made",
		"--", "sh", "-c", `find . -type f ! -name '.rbs-*' | sort; sh pkg/main.sh; ./tool.sh ok; mkdir -p out/sub; echo r > result.txt; echo deep > out/sub/d.txt; ln -s /etc/passwd out/link`)
	rbs(t, srv, "job", "wait", id)
	want := "./lib/x/main.sh\n./pkg/main.sh\n./tool.sh\nfrom main\ntool ok\n"
	if got := rbs(t, srv, "job", "logs", id); got != want {
		t.Fatalf("the job saw %q, want %q", got, want)
	}
	outs := outputsOf(t, srv, id)
	kinds := map[string]string{}
	for _, o := range outs {
		kinds[o.Path] = fmt.Sprintf("%s %d", o.Kind, o.SizeBytes)
	}
	if kinds["result.txt"] != "file 2" || kinds["out"] != "directory 5" || len(outs) != 2 {
		t.Fatalf("recorded outputs %v", outs)
	}
	if show := rbs(t, srv, "job", "show", id); !strings.Contains(show, "result.txt (file, 2 B)") {
		t.Fatalf("job show does not list the outputs:\n%s", show)
	}
	dest := filepath.Join(t.TempDir(), "got")
	if out := rbs(t, srv, "job", "outputs", id, "--dest", dest); !strings.Contains(out, "Wrote 2 files") {
		t.Fatalf("job outputs printed %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "out", "sub", "d.txt")); string(b) != "deep\n" {
		t.Fatalf("downloaded out/sub/d.txt = %q", b)
	}
	if target, err := os.Readlink(filepath.Join(dest, "out", "link")); err != nil || target != "/etc/passwd" {
		t.Fatalf("the symlink among the outputs came back as %q, %v; want the link itself", target, err)
	}
	if _, _, err := rbsRun(srv, "job", "outputs", id, "--dest", dest); err == nil {
		t.Fatal("job outputs wrote into a directory that exists")
	}

	// Outputs are recorded however the job ends.
	release := filepath.Join(t.TempDir(), "release")
	for _, tc := range []struct {
		name  string
		args  []string
		state string
	}{
		{"failure", []string{"--", "sh", "-c", "echo partial > result.txt; exit 3"}, "FAILED"},
		{"timeout", []string{"--time", "2s", "--", "sh", "-c", "echo partial > result.txt; exec sleep 60"}, "TIMEOUT"},
		{"cancel", []string{"--", "sh", "-c", `echo partial > result.txt; echo written; while [ ! -e "$1" ]; do sleep 0.05; done`, "sh", release}, "CANCELLED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := submit(t, srv, append([]string{"--outputs", "result.txt"}, tc.args...)...)
			if tc.state == "CANCELLED" {
				// Cancelled once it has written its output, not before.
				waitLogs(t, srv, id, "written\n")
				rbs(t, srv, "job", "cancel", id)
			}
			j := waitFor(t, srv, id, tc.state, inState(tc.state))
			if outs := outputsOf(t, srv, id); len(outs) != 1 || outs[0].Path != "result.txt" || outs[0].SizeBytes != 8 {
				t.Fatalf("outputs of a job ended %s: %v (%+v)", tc.state, outs, j)
			}
		})
	}

	// Paths that leave the job's directory are refused at submit.
	for _, bad := range [][]string{
		{"--inputs", "../up=" + src},
		{"--inputs", "/abs=" + src},
		{"--outputs", "../../etc/passwd"},
		{"--outputs", "/etc/passwd"},
	} {
		_, stderr, err := rbsRun(srv, append(append([]string{"job", "submit"}, bad...), "--", "true")...)
		if err == nil || !strings.Contains(stderr, bad[1]) {
			t.Errorf("submit %q: %v %s; want a refusal naming the value", bad, err, stderr)
		}
	}
}

var uploaded = regexp.MustCompile(`rbs: inputs: (\d+) files?, [^:]*: uploaded (\d+) files? \([^)]*\) and (\d+) director(?:y|ies); (\d+) files? \([^)]*\) already on the cluster\n`)

// casBlobs lists the blobs in the server's disk CAS, DATA_DIR/cas/XX/HASH-SIZE.
func casBlobs(t *testing.T, srv *server) map[string]bool {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(srv.DataDir, "cas", "[0-9a-f][0-9a-f]", "*"))
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string]bool{}
	for _, n := range names {
		blobs[filepath.Base(n)] = true
	}
	return blobs
}

// blobName is the name of d's file in the server's disk CAS.
func blobName(d digest.Digest) string { return fmt.Sprintf("%s-%d", d.Hash(), d.Size()) }

// added is what after holds that before does not.
func added(before, after map[string]bool) map[string]bool {
	out := map[string]bool{}
	for n := range after {
		if !before[n] {
			out[n] = true
		}
	}
	return out
}

// A tree staged again with one file changed uploads that file and the
// directories above it, nothing else: counted in the server's CAS, not
// taken from what the client says.
func TestJobInputsUploadWhatChanged(t *testing.T) {
	// No worker: the jobs stay queued, so nothing but the submissions
	// writes to the CAS (a job that ran would add its logs).
	srv := startServer(t)
	src := t.TempDir()
	for i := 0; i < 2000; i++ {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%20), fmt.Sprintf("f%04d.txt", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644)
	}
	// The tree as the job sees it, built here the way the client builds it.
	local := func() *merkle.Tree {
		t.Helper()
		files, _, err := merkle.DirFiles(src, "tree")
		if err != nil {
			t.Fatal(err)
		}
		tree, err := merkle.Build(files)
		if err != nil {
			t.Fatal(err)
		}
		return tree
	}
	// stage submits the tree and returns what the client said (files,
	// files uploaded, directories uploaded, files already there) and the
	// blobs the server's CAS gained.
	stage := func() ([4]string, map[string]bool) {
		t.Helper()
		before := casBlobs(t, srv)
		_, stderr, err := rbsRun(srv, "job", "submit", "--inputs", "tree="+src, "--", "true")
		m := uploaded.FindStringSubmatch(stderr)
		if err != nil || m == nil {
			t.Fatalf("submit: %v %s", err, stderr)
		}
		return [4]string(m[1:]), added(before, casBlobs(t, srv))
	}

	first := local()
	got, gained := stage()
	if got != [4]string{"2000", "2000", "22", "0"} {
		t.Fatalf("first staging: the client said %v (files, uploaded, directories, already there); want 2000 files, all uploaded, 22 directories (20+tree+root), none there", got)
	}
	want := map[string]bool{}
	for _, b := range first.Blobs() {
		want[blobName(b.Digest)] = true
	}
	if len(want) != 2022 || !maps.Equal(gained, want) {
		t.Fatalf("first staging: the server gained %d blobs; want the tree's %d (2000 files, 22 directories)", len(gained), len(want))
	}

	os.WriteFile(filepath.Join(src, "d07", "f0007.txt"), []byte("changed\n"), 0o644)
	second := local()
	// What must arrive: the changed file's content and the directory nodes
	// on its path, root, tree and d07, taken from the tree built here.
	changed := digest.FromBytes([]byte("changed\n"))
	want = map[string]bool{blobName(changed): true}
	at := second.Root
	for _, name := range []string{"tree", "d07", ""} {
		want[blobName(at)] = true
		if name == "" {
			break
		}
		var dir repb.Directory
		if err := proto.Unmarshal(second.Directories[at], &dir); err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(dir.Directories, func(n *repb.DirectoryNode) bool { return n.Name == name })
		if i < 0 {
			t.Fatalf("the tree built here has no %q under %s", name, at)
		}
		next, err := digest.FromProto(dir.Directories[i].Digest)
		if err != nil {
			t.Fatal(err)
		}
		at = next
	}
	got, gained = stage()
	if got != [4]string{"2000", "1", "3", "1999"} {
		t.Fatalf("staging again with one file changed: the client said %v; want 2000 files, 1 uploaded, 3 directories (d07, tree, root), 1999 already there", got)
	}
	if !gained[blobName(changed)] || !maps.Equal(gained, want) {
		t.Fatalf("staging again with one file changed: the server gained %v; want exactly the changed file %s and the directories root, tree and d07: %v", slices.Sorted(maps.Keys(gained)), blobName(changed), slices.Sorted(maps.Keys(want)))
	}
	dirNames := map[string]bool{}
	for d := range second.Directories {
		dirNames[blobName(d)] = true
	}
	fileBlobs := 0
	for n := range gained {
		if !dirNames[n] {
			fileBlobs++
		}
	}
	if fileBlobs != 1 {
		t.Fatalf("staging again with one file changed: the server gained %d file blobs; want 1", fileBlobs)
	}

	got, gained = stage()
	if got != [4]string{"2000", "0", "0", "2000"} || len(gained) != 0 {
		t.Fatalf("staging an unchanged tree: the client said %v and the server gained %v; want nothing uploaded", got, slices.Sorted(maps.Keys(gained)))
	}
}

// A target label among --inputs stages its outputs and runfiles, built
// first, where rbs-bin has them: the py_binary runs on the worker as it
// runs here.
func TestJobInputsFromTarget(t *testing.T) {
	requireTool(t, "python3")
	srv := startServer(t)
	startWorker(t, srv, "w1")
	ws := t.TempDir()
	copyTree(t, "../examples", ws)
	submitIn := func(args ...string) string {
		t.Helper()
		out, err := run(t, ws, []string{"RBS_REMOTE=" + srv.Addr}, rbsBin, append([]string{"job", "submit", "--parsable"}, args...)...)
		if err != nil {
			t.Fatalf("rbs job submit %q: %v\n%s", args, err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		return lines[len(lines)-1]
	}
	id := submitIn("--inputs", "//app:greet", "--inputs", "bin=//app:greet", "--", "sh", "-c", "app/greet from-here && bin/app/greet again")
	rbs(t, srv, "job", "wait", id)
	if got := rbs(t, srv, "job", "logs", id); got != "hello, from-here\nhello, again\n" {
		t.Fatalf("the staged py_binary printed %q", got)
	}
}

// waitLogs polls a job's output until it holds want.
func waitLogs(t *testing.T, srv *server, id, want string) {
	t.Helper()
	waitLogsMatch(t, srv, id, regexp.MustCompile(regexp.QuoteMeta(want)))
}
