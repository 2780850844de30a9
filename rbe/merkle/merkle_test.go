package merkle

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"google.golang.org/protobuf/proto"
)

func mem(p, content string, exec bool) File {
	return File{Path: p, Digest: digest.FromBytes([]byte(content)), Executable: exec, Data: []byte(content)}
}

func mustBuild(t *testing.T, files ...File) *Tree {
	t.Helper()
	tr, err := Build(files)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func dirOf(t *testing.T, tr *Tree, d digest.Digest) *repb.Directory {
	t.Helper()
	b, ok := tr.Directories[d]
	if !ok {
		t.Fatalf("directory %s not in the tree", d)
	}
	msg := &repb.Directory{}
	if err := proto.Unmarshal(b, msg); err != nil {
		t.Fatal(err)
	}
	return msg
}

func TestRootDigests(t *testing.T) {
	a, b, c := mem("a.txt", "a", false), mem("pkg/b.txt", "b", false), mem("pkg/sub/c.sh", "c", true)
	for _, tc := range []struct {
		name string
		x, y []File
		same bool
	}{
		{"order does not matter", []File{a, b, c}, []File{c, a, b}, true},
		{"duplicates collapse", []File{a, b, c}, []File{a, b, c, b, a}, true},
		{"executable bit counts", []File{mem("x", "x", false)}, []File{mem("x", "x", true)}, false},
		{"content counts", []File{mem("x", "x", false)}, []File{mem("x", "y", false)}, false},
		{"name counts", []File{mem("x", "x", false)}, []File{mem("y", "x", false)}, false},
		{"directory counts", []File{mem("d/x", "x", false)}, []File{mem("e/x", "x", false)}, false},
		{"nesting counts", []File{mem("d/x", "x", false)}, []File{mem("d/d/x", "x", false)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := mustBuild(t, tc.x...), mustBuild(t, tc.y...)
			if (x.Root == y.Root) != tc.same {
				t.Fatalf("roots %s and %s: same = %v, want %v", x.Root, y.Root, x.Root == y.Root, tc.same)
			}
		})
	}
}

func TestEmptyRoot(t *testing.T) {
	tr := mustBuild(t)
	if tr.Root != digest.Empty {
		t.Fatalf("empty root %s, want %s", tr.Root, digest.Empty)
	}
	if blobs := tr.Blobs(); len(blobs) != 1 || blobs[0].Digest != digest.Empty {
		t.Fatalf("blobs of the empty root: %v", blobs)
	}
}

func TestNestedDirectories(t *testing.T) {
	tr := mustBuild(t,
		mem("z.txt", "z", false),
		mem("pkg/sub/c.sh", "c", true),
		mem("pkg/b.txt", "b", false),
		mem("pkg/a.txt", "a", false),
		mem("lib/x", "same", false),
		mem("pkg/y", "same", false),
	)
	root := dirOf(t, tr, tr.Root)
	if len(root.Files) != 1 || root.Files[0].Name != "z.txt" {
		t.Fatalf("root files %v", root.Files)
	}
	if len(root.Directories) != 2 || root.Directories[0].Name != "lib" || root.Directories[1].Name != "pkg" {
		t.Fatalf("root directories %v", root.Directories)
	}
	pd, _ := digest.FromProto(root.Directories[1].Digest)
	pkg := dirOf(t, tr, pd)
	var names []string
	for _, f := range pkg.Files {
		names = append(names, f.Name)
	}
	if strings.Join(names, ",") != "a.txt,b.txt,y" || len(pkg.Directories) != 1 || pkg.Directories[0].Name != "sub" {
		t.Fatalf("pkg %v", pkg)
	}
	sd, _ := digest.FromProto(pkg.Directories[0].Digest)
	sub := dirOf(t, tr, sd)
	if len(sub.Files) != 1 || !sub.Files[0].IsExecutable || sub.Files[0].Name != "c.sh" {
		t.Fatalf("sub %v", sub)
	}
	// 4 directories, 5 distinct file contents ("same" once).
	if len(tr.Directories) != 4 {
		t.Fatalf("%d directories, want 4", len(tr.Directories))
	}
	blobs := tr.Blobs()
	if len(blobs) != 4+5 {
		t.Fatalf("%d blobs, want 9", len(blobs))
	}
	for _, b := range blobs {
		if b.Open != nil {
			t.Fatalf("in-memory blob %s has Open", b.Digest)
		}
		if digest.FromBytes(b.Data) != b.Digest {
			t.Fatalf("blob %s holds other bytes", b.Digest)
		}
	}
	if len(tr.Files) != 6 || tr.Files[0].Path != "lib/x" || tr.Files[5].Path != "z.txt" {
		t.Fatalf("files %v", tr.Files)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []File
		want  string
	}{
		{"absolute", []File{mem("/etc/passwd", "x", false)}, `"/etc/passwd"`},
		{"dotdot", []File{mem("../x", "x", false)}, `"../x"`},
		{"inner dotdot", []File{mem("a/../../x", "x", false)}, `"a/../../x"`},
		{"unclean", []File{mem("a//b", "x", false)}, `"a//b"`},
		{"trailing slash", []File{mem("a/", "x", false)}, `"a/"`},
		{"dot", []File{mem("./a", "x", false)}, `"./a"`},
		{"empty", []File{mem("", "x", false)}, `""`},
		{"no digest", []File{{Path: "a"}}, `"a"`},
		{"data of another digest", []File{{Path: "a", Digest: digest.FromBytes([]byte("x")), Data: []byte("y")}}, `"a"`},
		{"different duplicates", []File{mem("a", "x", false), mem("a", "y", false)}, `"a"`},
		{"different modes", []File{mem("a", "x", false), mem("a", "x", true)}, `"a"`},
		{"file then directory", []File{mem("a", "x", false), mem("a/b", "y", false)}, `"a/b"`},
		{"directory then file", []File{mem("a/b/c", "x", false), mem("a/b", "y", false)}, `"a/b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want an error quoting %s", err, tc.want)
			}
		})
	}
}

func TestFileFromDisk(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(abs, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := FileFromDisk("pkg/f.txt", abs, true)
	if err != nil {
		t.Fatal(err)
	}
	if f.Digest != digest.FromBytes([]byte("hello")) || f.Source != abs || !f.Executable || f.Path != "pkg/f.txt" {
		t.Fatalf("file %+v", f)
	}
	blobs := mustBuild(t, f).Blobs()
	var found bool
	for _, b := range blobs {
		if b.Digest == f.Digest {
			found = true
			rc, err := b.Open()
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(rc)
			rc.Close()
			if string(got) != "hello" {
				t.Fatalf("blob content %q", got)
			}
		}
	}
	if !found {
		t.Fatal("file blob missing")
	}
	if _, err := FileFromDisk("d", dir, false); err == nil {
		t.Fatal("a directory was accepted")
	}
	if _, err := FileFromDisk("gone", filepath.Join(dir, "gone"), false); err == nil || !strings.Contains(err.Error(), `"gone"`) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestDigestsCarryOver(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	if err := os.WriteFile(file, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	d1, err := HashFile(file)
	if err != nil || d1 != digest.FromBytes([]byte("one")) {
		t.Fatalf("HashFile = %v, %v", d1, err)
	}
	saved := filepath.Join(dir, "digests")
	if err := SaveDigests(saved); err != nil {
		t.Fatal(err)
	}
	hashes.Clear()
	LoadDigests(saved)
	if v, ok := hashes.Load(file); !ok || v.(hashed).d != d1 {
		t.Fatal("the digest was not loaded back")
	}
	// A changed file is hashed again: its identity no longer matches.
	if err := os.WriteFile(file+".new", []byte("two!"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	d2, err := HashFile(file)
	if err != nil || d2 != digest.FromBytes([]byte("two!")) {
		t.Fatalf("after a change HashFile = %v, %v", d2, err)
	}
	LoadDigests(filepath.Join(dir, "missing"))
}

// listing renders every entry of tr, sorted: "p" for a file, "p/" for a
// directory, "p -> target" for a symlink.
func listing(t *testing.T, tr *Tree) []string {
	t.Helper()
	var out []string
	var walk func(d digest.Digest, prefix string)
	walk = func(d digest.Digest, prefix string) {
		msg := dirOf(t, tr, d)
		for _, f := range msg.Files {
			out = append(out, prefix+f.Name)
		}
		for _, l := range msg.Symlinks {
			out = append(out, prefix+l.Name+" -> "+l.Target)
		}
		for _, sub := range msg.Directories {
			out = append(out, prefix+sub.Name+"/")
			sd, err := digest.FromProto(sub.Digest)
			if err != nil {
				t.Fatal(err)
			}
			walk(sd, prefix+sub.Name+"/")
		}
	}
	walk(tr.Root, "")
	slices.Sort(out)
	return out
}

// TestBuildAll checks that symlinks are kept as symlinks and directories
// even when empty, in any order, and that the same tree always has the
// same digest.
func TestBuildAll(t *testing.T) {
	f := mem("a/f", "x", false)
	for _, tc := range []struct {
		name  string
		files []File
		links []Symlink
		dirs  []string
		want  []string
	}{
		{"symlinks and empty directories",
			[]File{f},
			[]Symlink{{"a/l", "../f"}, {"top", "/etc/passwd"}},
			[]string{"e", "a/g/h", "a"},
			[]string{"a/", "a/f", "a/g/", "a/g/h/", "a/l -> ../f", "e/", "top -> /etc/passwd"}},
		{"a symlink to a directory is not entered",
			nil,
			[]Symlink{{"d/link", "/etc"}},
			nil,
			[]string{"d/", "d/link -> /etc"}},
		{"duplicates collapse",
			[]File{f, f},
			[]Symlink{{"l", "t"}, {"l", "t"}},
			[]string{"a", "a", "e", "e"},
			[]string{"a/", "a/f", "e/", "l -> t"}},
		{"only an empty directory", nil, nil, []string{"e"}, []string{"e/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := BuildAll(tc.files, tc.links, tc.dirs)
			if err != nil {
				t.Fatal(err)
			}
			if got := listing(t, tr); !slices.Equal(got, tc.want) {
				t.Fatalf("tree %q, want %q", got, tc.want)
			}
			rev, err := BuildAll(reversed(tc.files), reversed(tc.links), reversed(tc.dirs))
			if err != nil {
				t.Fatal(err)
			}
			if rev.Root != tr.Root {
				t.Fatalf("root %s given in reverse order, %s in order", rev.Root, tr.Root)
			}
			if tr.Root == digest.Empty {
				t.Fatal("a tree with entries has the empty root")
			}
		})
	}
}

func reversed[T any](s []T) []T {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

func TestBuildAllErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []File
		links []Symlink
		dirs  []string
		want  string
	}{
		{"symlink and file", []File{mem("a", "x", false)}, []Symlink{{"a", "t"}}, nil, `"a" is both a file and a symlink`},
		{"symlink as a directory of a file", []File{mem("a/b", "x", false)}, []Symlink{{"a", "t"}}, nil, `"a" is both a symlink and the directory of input "a/b"`},
		{"symlink under a file", []File{mem("a", "x", false)}, []Symlink{{"a/b", "t"}}, nil, `"a" is both a file and the directory of input "a/b"`},
		{"directory on a file", []File{mem("a", "x", false)}, nil, []string{"a"}, `"a" is both a file and a directory`},
		{"directory on a symlink", nil, []Symlink{{"a", "t"}}, []string{"a"}, `"a" is both a symlink and a directory`},
		{"directory under a symlink", nil, []Symlink{{"a", "t"}}, []string{"a/b"}, `"a" is both a symlink and the directory of input "a/b"`},
		{"different targets", nil, []Symlink{{"a", "t"}, {"a", "u"}}, nil, `"a" is given twice with different targets`},
		{"empty target", nil, []Symlink{{"a", ""}}, nil, `"a" has an empty target`},
		{"symlink path escapes", nil, []Symlink{{"../a", "t"}}, nil, `"../a" contains ".."`},
		{"absolute directory", nil, nil, []string{"/etc"}, `"/etc" is absolute`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := BuildAll(tc.files, tc.links, tc.dirs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BuildAll: %v, want an error with %s", err, tc.want)
			}
		})
	}
}

// TestRemember: a file whose digest is told as it is written is not hashed
// again (HashFile answers what it was told), until it changes; a digest of
// another size is not taken.
func TestRemember(t *testing.T) {
	file := filepath.Join(t.TempDir(), "out.txt")
	if err := os.WriteFile(file, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	told := digest.FromBytes([]byte("xyz")) // the same size: only the cache can answer it
	Remember(file, told)
	if d, err := HashFile(file); err != nil || d != told {
		t.Errorf("HashFile = %v, %v; want the digest told, %v", d, err, told)
	}
	Remember(file, digest.FromBytes([]byte("four")))
	if d, err := HashFile(file); err != nil || d != told {
		t.Errorf("after a digest of another size, HashFile = %v, %v; want %v still", d, err, told)
	}
	if err := os.WriteFile(file+".new", []byte("def"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	if d, err := HashFile(file); err != nil || d != digest.FromBytes([]byte("def")) {
		t.Errorf("after a change HashFile = %v, %v", d, err)
	}
}
