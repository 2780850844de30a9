package execroot

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// outputFixture is a directory as a command may leave it.
func outputFixture(t *testing.T) *Root {
	t.Helper()
	dir := t.TempDir()
	for p, content := range map[string]string{"file.txt": "hello", "bin/run.sh": "#!/bin/sh\n", "d/x": "12345", "d/sub/y": "12345", "twins/a/e/.keep": "", "twins/b/e/.keep": ""} {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(abs, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "d", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link": "/etc", "d/l": "x"} {
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"pipe", "withpipe/p"} {
		abs := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(abs, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewRoot(dir, NoLinks)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCollect(t *testing.T) {
	r := outputFixture(t)
	for _, tc := range []struct {
		p    string
		want string // the output, rendered; or what its error holds
	}{
		{"file.txt", "file 5"},
		{"bin/run.sh", "file* 10"},
		{"link", "symlink -> /etc"},
		{"d", "directory 10: empty/, l -> x, sub/, sub/y, x"},
		{"withpipe", "directory 0: skipped withpipe/p is neither a file, a directory nor a symlink (p---------)"},
		{"pipe", "neither a file, a directory nor a symlink"},
		{"nope", "not found"},
		{"link/passwd", "link is a symlink, which outputs are not recorded through"},
	} {
		o, err := r.Collect(tc.p)
		got := ""
		switch {
		case err != nil:
			got = status.Convert(err).Message()
		case o.Kind == File && o.Executable:
			got = "file* " + strconv.FormatInt(o.Size, 10)
		case o.Kind == Symlink:
			got = "symlink -> " + o.Target
		default:
			got = o.Kind.String() + " " + strconv.FormatInt(o.Size, 10)
		}
		if o != nil && o.Kind == Dir {
			var parts []string
			for _, l := range o.Contents.Links {
				parts = append(parts, l.Path+" -> "+l.Target)
			}
			for _, d := range o.Contents.Dirs {
				parts = append(parts, d+"/")
			}
			for _, f := range o.Contents.Files {
				parts = append(parts, f.Path)
			}
			slices.Sort(parts)
			for _, s := range o.Contents.Skipped {
				parts = append(parts, "skipped "+s)
			}
			got += ": " + strings.Join(parts, ", ")
		}
		if err == nil && got != tc.want || err != nil && !strings.Contains(got, tc.want) {
			t.Errorf("Collect(%q) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

func TestResult(t *testing.T) {
	r := outputFixture(t)
	res := NewResult(&repb.ActionResult{})
	for _, d := range []Declared{
		{"file.txt", File}, {"bin/run.sh", Any}, {"d", Dir}, {"twins", Any},
		{"link", File}, {"link", Dir}, {"link", Any},
	} {
		o, err := r.Collect(d.Path)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.Add(d, o); err != nil {
			t.Fatalf("Add(%v): %v", d, err)
		}
	}
	ar := res.ActionResult
	if len(ar.OutputFiles) != 2 || ar.OutputFiles[0].Path != "file.txt" || ar.OutputFiles[0].IsExecutable || !ar.OutputFiles[1].IsExecutable {
		t.Errorf("output files %v", ar.OutputFiles)
	}
	if len(ar.OutputFileSymlinks) != 1 || len(ar.OutputDirectorySymlinks) != 1 || len(ar.OutputSymlinks) != 1 || ar.OutputSymlinks[0].Target != "/etc" {
		t.Errorf("symlinks %v %v %v, want one in each field", ar.OutputFileSymlinks, ar.OutputDirectorySymlinks, ar.OutputSymlinks)
	}
	if len(ar.OutputDirectories) != 2 {
		t.Fatalf("output directories %v", ar.OutputDirectories)
	}
	for _, od := range ar.OutputDirectories {
		td, err := digest.FromProto(od.TreeDigest)
		if err != nil {
			t.Fatal(err)
		}
		b, ok := res.Trees[td]
		if !ok || digest.FromBytes(b) != td {
			t.Fatalf("%s: tree %s not among the trees", od.Path, td)
		}
		tree := &repb.Tree{}
		if err := proto.Unmarshal(b, tree); err != nil {
			t.Fatal(err)
		}
		// d: sub and empty; twins: a and b are the same Directory, as
		// are their e: each is listed once.
		want := map[string]int{"d": 2, "twins": 2}[od.Path]
		if len(tree.Children) != want {
			t.Errorf("%s: %d children, want %d: %v", od.Path, len(tree.Children), want, tree.Children)
		}
		if od.Path == "d" && (len(tree.Root.Files) != 1 || len(tree.Root.Symlinks) != 1 || len(tree.Root.Directories) != 2) {
			t.Errorf("d: root %v", tree.Root)
		}
	}
	// Blobs: the two trees, and hello, the script, 12345 and the empty
	// file, once each.
	blobs := res.Blobs()
	seen := map[digest.Digest]bool{}
	for _, b := range blobs {
		if seen[b.Digest] {
			t.Errorf("blob %s listed twice", b.Digest)
		}
		seen[b.Digest] = true
	}
	if len(blobs) != 6 {
		t.Errorf("%d blobs, want 6", len(blobs))
	}

	// A directory with an entry that is neither a file, a directory nor
	// a symlink has no Tree.
	o, err := r.Collect("withpipe")
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Add(Declared{"withpipe", Dir}, o); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "withpipe/p is neither") {
		t.Fatalf("Add(withpipe) = %v, want INVALID_ARGUMENT naming withpipe/p", err)
	}
}
