package merkle

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
)

// spec describes a tree: path → "" for a file, "/" for an (empty)
// directory, "-> target" for a symlink. Parent directories are implied.
type spec map[string]string

// messages builds the Directory messages of s.
func (s spec) messages(t testing.TB) (digest.Digest, map[digest.Digest]*repb.Directory) {
	t.Helper()
	dirs := map[digest.Digest]*repb.Directory{}
	var build func(dir string) digest.Digest
	build = func(dir string) digest.Digest {
		msg := &repb.Directory{}
		subs := map[string]bool{}
		for _, p := range s.sorted() {
			rel, ok := strings.CutPrefix(p, dir)
			if !ok || rel == "" {
				continue
			}
			name, _, deeper := strings.Cut(rel, "/")
			switch v := s[p]; {
			case deeper || v == "/":
				if !subs[name] {
					subs[name] = true
					msg.Directories = append(msg.Directories, &repb.DirectoryNode{Name: name, Digest: build(dir + name + "/").Proto()})
				}
			case strings.HasPrefix(v, "-> "):
				msg.Symlinks = append(msg.Symlinks, &repb.SymlinkNode{Name: name, Target: strings.TrimPrefix(v, "-> ")})
			default:
				msg.Files = append(msg.Files, &repb.FileNode{Name: name, Digest: digest.FromBytes([]byte(p)).Proto()})
			}
		}
		b, err := proto.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		d := digest.FromBytes(b)
		dirs[d] = msg
		return d
	}
	return build(""), dirs
}

func (s spec) sorted() []string {
	ps := make([]string, 0, len(s))
	for p := range s {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// chain is n symlinks l1 -> l2 -> … -> ln -> f.
func chain(n int) spec {
	s := spec{"f": ""}
	for i := 1; i <= n; i++ {
		next := fmt.Sprintf("l%d", i+1)
		if i == n {
			next = "f"
		}
		s[fmt.Sprintf("l%d", i)] = "-> " + next
	}
	return s
}

func TestCheckTreeSymlinks(t *testing.T) {
	for _, tc := range []struct {
		name string
		tree spec
		want string // "" when the tree is fine, else in the error
	}{
		{"relative link into a subdirectory", spec{"b/c": "", "a": "-> b/c"}, ""},
		{"link to a sibling directory", spec{"d/s/x": "-> ../sibling/f", "d/sibling/f": ""}, ""},
		{"link up to the root", spec{"a/b/up": "-> ../..", "f": ""}, ""},
		{"link to .", spec{"d/self": "-> ."}, ""},
		{"link through a link", spec{"d/l": "-> ../e", "e/f": "", "g": "-> d/l/f"}, ""},
		{"link to a link to a directory, then ..", spec{"sub/l": "-> .", "m": "-> sub/l/../f", "f": ""}, ""},
		{"dangling link", spec{"a": "-> not/there"}, ""},
		{"link into a file", spec{"f": "", "a": "-> f/x/.."}, ""},
		{"40 links in a chain", chain(40), ""},
		{"the same directory twice, with links", spec{"x/l": "-> ../f", "y/l": "-> ../f", "f": ""}, ""},

		{"link to ..", spec{"l": "-> .."}, `"l" -> ".." escapes the input root`},
		{"link out from a subdirectory", spec{"a/b/l": "-> ../../../x"}, `"a/b/l" -> "../../../x" escapes`},
		// Leaving the root is an escape even where the path could come back
		// in: the root's own name is not the tree's to know.
		{"out and back in", spec{"a/l": "-> ../../root/a"}, `"a/l" -> "../../root/a" escapes`},
		{"absolute link", spec{"l": "-> /etc"}, `"l" -> "/etc": the target is absolute`},
		{"empty target", spec{"l": "-> "}, `"l" has an empty target`},
		{"escaping chain", spec{"d/l": "-> ..", "e": "-> d/l/.."}, `"e" -> "d/l/.." escapes the input root`},
		{"escaping chain through a deeper link", spec{"a/b/l": "-> ../..", "m": "-> a/b/l/.."}, `"m" -> "a/b/l/.." escapes`},
		{"escaping chain of links to links", spec{"a/l": "-> ../a/l2", "a/l2": "-> ../..", "f": ""}, `"a/l" -> "../a/l2" escapes`},
		{"escape past a missing name", spec{"l": "-> missing/../.."}, `"l" -> "missing/../.." escapes`},
		{"41 links in a chain", chain(41), `"l1" -> "l2" goes through more than 40 symlinks`},
		{"loop of two", spec{"a": "-> b", "b": "-> a"}, `"a" -> "b" goes through more than 40 symlinks`},
		{"link to itself", spec{"d/a": "-> a"}, `"d/a" -> "a" goes through more than 40 symlinks`},
		{"link into itself", spec{"a": "-> a/x"}, `"a" -> "a/x" goes through more than 40 symlinks`},
		{"loop through a directory", spec{"d/l": "-> ../e", "e": "-> d/l"}, `goes through more than 40 symlinks`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, dirs := tc.tree.messages(t)
			err := CheckTree(root, dirs)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckTree: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckTree = %v, want an error containing %q", err, tc.want)
			}
			if k := kernelVerdict(t, tc.tree); k != "" && (k == "ok") != (tc.want == "") {
				t.Fatalf("the kernel finds the tree %s on disk, CheckTree says %v", k, err)
			}
		})
	}
}

// kernelVerdict stages the tree on disk and lets the kernel resolve every
// symlink: "ok" when each resolves inside the root, "escapes" or "loops"
// when one does, "" when one cannot be resolved at all (dangling), or the
// tree has a link the file system refuses.
func kernelVerdict(t *testing.T, s spec) string {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "r")
	for _, p := range s.sorted() {
		abs := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			t.Fatal(err)
		}
		v := s[p]
		var err error
		switch {
		case v == "/":
			err = os.MkdirAll(abs, 0o755)
		case strings.HasPrefix(v, "-> "):
			target := strings.TrimPrefix(v, "-> ")
			if target == "" || path.IsAbs(target) {
				return ""
			}
			err = os.Symlink(target, abs)
		default:
			err = os.WriteFile(abs, nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	verdict := "ok"
	for _, p := range s.sorted() {
		if !strings.HasPrefix(s[p], "-> ") {
			continue
		}
		fd, err := unix.Open(filepath.Join(root, p), unix.O_PATH, 0)
		switch {
		case errors.Is(err, unix.ELOOP):
			verdict = "loops"
			continue
		case err != nil:
			return ""
		}
		got, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		if got != root && !strings.HasPrefix(got, root+"/") {
			return "escapes"
		}
	}
	return verdict
}

func TestCheckTreeNames(t *testing.T) {
	file := &repb.FileNode{Name: "f", Digest: digest.FromBytes([]byte("f")).Proto()}
	for _, tc := range []struct {
		name string
		root *repb.Directory
		want string
	}{
		{"plain names", &repb.Directory{Files: []*repb.FileNode{file, {Name: "..a", Digest: file.Digest}}}, ""},
		{"empty name", &repb.Directory{Files: []*repb.FileNode{{Name: "", Digest: file.Digest}}}, "empty file name"},
		{"name ..", &repb.Directory{Files: []*repb.FileNode{{Name: "..", Digest: file.Digest}}}, `file name ".." is not allowed`},
		{"name .", &repb.Directory{Symlinks: []*repb.SymlinkNode{{Name: ".", Target: "f"}}}, `file name "." is not allowed`},
		{"name with a slash", &repb.Directory{Files: []*repb.FileNode{{Name: "a/../../b", Digest: file.Digest}}}, "contains a slash"},
		{"name with NUL", &repb.Directory{Files: []*repb.FileNode{{Name: "a\x00", Digest: file.Digest}}}, "contains a slash or NUL"},
		{"a name twice", &repb.Directory{Files: []*repb.FileNode{file}, Symlinks: []*repb.SymlinkNode{{Name: "f", Target: "g"}}}, `"f" appears twice`},
		{"bad file digest", &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: &repb.Digest{Hash: "xyz", SizeBytes: 1}}}}, `input file "f"`},
		{"subdirectory not in the tree", &repb.Directory{Directories: []*repb.DirectoryNode{{Name: "d", Digest: file.Digest}}}, `input directory "d": Directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := proto.Marshal(tc.root)
			if err != nil {
				t.Fatal(err)
			}
			root := digest.FromBytes(b)
			err = CheckTree(root, map[digest.Digest]*repb.Directory{root: tc.root})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckTree = %v, want %q", err, tc.want)
			}
		})
	}
}

// dag is a root with depth levels, each naming the next Directory width
// times; the bottom one holds a symlink.
func dag(depth, width int) (digest.Digest, map[digest.Digest]*repb.Directory) {
	dirs := map[digest.Digest]*repb.Directory{}
	dir := &repb.Directory{Files: []*repb.FileNode{{Name: "f", Digest: digest.Empty.Proto()}}, Symlinks: []*repb.SymlinkNode{{Name: "l", Target: "f"}}}
	for level := 0; ; level++ {
		b, _ := proto.Marshal(dir)
		d := digest.FromBytes(b)
		dirs[d] = dir
		if level == depth {
			return d, dirs
		}
		dir = &repb.Directory{}
		for i := 0; i < width; i++ {
			dir.Directories = append(dir.Directories, &repb.DirectoryNode{Name: fmt.Sprintf("d%d", i), Digest: d.Proto()})
		}
	}
}

// A DAG that names one Directory many times is as large as its paths once
// laid out: past MaxTreeEntries it is refused before its symlinks are
// resolved path by path.
func TestCheckTreeBoundsLaidOutSize(t *testing.T) {
	tests := []struct {
		depth, width int
		ok           bool
	}{
		{3, 2, true},
		{10, 3, true}, // 3^10 = 59049 leaves
		{30, 2, false},
		{40, 64, false},
	}
	for _, tt := range tests {
		root, dirs := dag(tt.depth, tt.width)
		err := CheckTree(root, dirs)
		if tt.ok && err != nil {
			t.Errorf("depth %d width %d: %v", tt.depth, tt.width, err)
		}
		if !tt.ok && (err == nil || !strings.Contains(err.Error(), "entries")) {
			t.Errorf("depth %d width %d: %v, want a refusal for its size", tt.depth, tt.width, err)
		}
	}
}

// FuzzCheckTree feeds CheckTree any Tree message: it must not panic, and
// must answer within the bounds it promises. `go test -fuzz FuzzCheckTree
// ./rbe/merkle` explores further.
func FuzzCheckTree(f *testing.F) {
	for _, s := range []spec{
		{"a/b": "", "l": "-> a/b"},
		{"d/l": "-> ..", "e": "-> d/l/.."},
		{"x": "-> y", "y": "-> x"},
		{"d/s/x": "-> ../sibling/f", "d/sibling/f": ""},
	} {
		root, dirs := s.messages(f)
		tree := &repb.Tree{Root: dirs[root]}
		for d, dir := range dirs {
			if d != root {
				tree.Children = append(tree.Children, dir)
			}
		}
		b, _ := proto.Marshal(tree)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tree := &repb.Tree{}
		if proto.Unmarshal(b, tree) != nil || tree.Root == nil {
			return
		}
		dirs := map[digest.Digest]*repb.Directory{}
		var root digest.Digest
		for i, dir := range append([]*repb.Directory{tree.Root}, tree.Children...) {
			mb, err := proto.Marshal(dir)
			if err != nil {
				return
			}
			d := digest.FromBytes(mb)
			dirs[d] = dir
			if i == 0 {
				root = d
			}
		}
		CheckTree(root, dirs)
	})
}

// CheckLayout takes symlinks wherever they point, and still refuses names
// that would leave the directory.
func TestCheckLayout(t *testing.T) {
	for _, tt := range []struct {
		s  spec
		ok bool
	}{
		{spec{"out/link": "-> /etc/passwd", "out/f": ""}, true},
		{spec{"up": "-> ../../x"}, true},
	} {
		root, dirs := tt.s.messages(t)
		if err := CheckLayout(root, dirs); (err == nil) != tt.ok {
			t.Errorf("%v: %v", tt.s, err)
		}
		if err := CheckTree(root, dirs); err == nil {
			t.Errorf("%v: CheckTree took a link out of the tree", tt.s)
		}
	}
	bad := &repb.Directory{Files: []*repb.FileNode{{Name: "..", Digest: digest.Empty.Proto()}}}
	b, _ := proto.Marshal(bad)
	d := digest.FromBytes(b)
	if err := CheckLayout(d, map[digest.Digest]*repb.Directory{d: bad}); err == nil {
		t.Error("CheckLayout took a file named ..")
	}
}
