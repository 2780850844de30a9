package execroot

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// memSource is a Source over blobs in memory that counts what it is asked
// for.
type memSource struct {
	mu      sync.Mutex
	blobs   map[digest.Digest][]byte
	fetched int
}

func newMemSource(blobs ...[]byte) *memSource {
	s := &memSource{blobs: map[digest.Digest][]byte{}}
	for _, b := range blobs {
		s.add(b)
	}
	return s
}

func (s *memSource) add(b []byte) digest.Digest {
	d := digest.FromBytes(b)
	s.blobs[d] = b
	return d
}

func (s *memSource) Fetch(_ context.Context, ds []digest.Digest, put func(digest.Digest, io.Reader) error) error {
	for _, d := range ds {
		s.mu.Lock()
		b, ok := s.blobs[d]
		s.fetched++
		s.mu.Unlock()
		if !ok {
			return status.Errorf(codes.NotFound, "blob %s not found", d)
		}
		if err := put(d, bytes.NewReader(b)); err != nil {
			return err
		}
	}
	return nil
}

func memFile(p, content string, exec bool) merkle.File {
	return merkle.File{Path: p, Digest: digest.FromBytes([]byte(content)), Data: []byte(content), Executable: exec}
}

// sampleTree is a tree of files (one executable, one empty, two alike),
// a symlink and an empty directory.
func sampleTree(t *testing.T) (*merkle.Tree, *Tree) {
	t.Helper()
	mt, err := merkle.BuildAll(
		[]merkle.File{memFile("a.txt", "alpha", false), memFile("bin/run.sh", "#!/bin/sh\n", true), memFile("empty", "", false), memFile("d/same.txt", "alpha", false)},
		[]merkle.Symlink{{Path: "d/link", Target: "../a.txt"}},
		[]string{"d/empty"})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := ParseTree(mt.Root, mt.Directories)
	if err != nil {
		t.Fatal(err)
	}
	return mt, tree
}

func openCache(t *testing.T, maxSize int64) *Cache {
	t.Helper()
	c, err := OpenCache(t.TempDir(), maxSize)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func readFile(t *testing.T, p string) (string, os.FileMode, uint64) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), info.Mode().Perm(), info.Sys().(*syscall.Stat_t).Nlink
}

func TestStage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		maxSize int64
		copies  bool
		// the mode of a.txt and bin/run.sh, and whether they are links
		plain, exec os.FileMode
		linked      bool
	}{
		{"hard links", 0, false, 0o444, 0o555, true},
		{"too large for the cache", 2, false, 0o444, 0o555, false},
		{"copies", 0, true, 0o644, 0o755, false},
		{"copies, too large for the cache", 2, true, 0o644, 0o755, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mt, tree := sampleTree(t)
			c := openCache(t, tc.maxSize)
			dir := filepath.Join(t.TempDir(), "root")
			var staged *Staged
			var err error
			if tc.copies {
				err = c.StageCopies(context.Background(), FileSource(mt.Files), tree, dir)
			} else {
				staged, err = c.Stage(context.Background(), FileSource(mt.Files), tree, dir)
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				p, content string
				mode       os.FileMode
			}{{"a.txt", "alpha", tc.plain}, {"d/same.txt", "alpha", tc.plain}, {"bin/run.sh", "#!/bin/sh\n", tc.exec}, {"empty", "", tc.plain}} {
				content, mode, links := readFile(t, filepath.Join(dir, f.p))
				if content != f.content || mode != f.mode || (links > 1) != (tc.linked && f.content != "") {
					t.Errorf("%s: %q, mode %o, %d links; want %q, mode %o, linked %v", f.p, content, mode, links, f.content, f.mode, tc.linked)
				}
			}
			if target, err := os.Readlink(filepath.Join(dir, "d", "link")); err != nil || target != "../a.txt" {
				t.Errorf("d/link -> %q (%v), want ../a.txt", target, err)
			}
			if info, err := os.Stat(filepath.Join(dir, "d", "empty")); err != nil || !info.IsDir() {
				t.Errorf("d/empty: %v, %v; want a directory", info, err)
			}
			if staged == nil {
				return
			}
			if changed, err := staged.Changed(); changed != "" || err != nil {
				t.Fatalf("Changed() = %q, %v before anything was written", changed, err)
			}
			// Through a link, the cache's blob is written to: it is
			// dropped.
			for _, p := range []string{"d/same.txt", "a.txt"} {
				os.Chmod(filepath.Join(dir, p), 0o644)
			}
			if err := os.WriteFile(filepath.Join(dir, "d", "same.txt"), []byte("b"), 0o644); err != nil {
				t.Fatal(err)
			}
			want := ""
			if tc.linked {
				want = "a.txt" // the first path of the blob
			}
			if changed, err := staged.Changed(); changed != want || err != nil {
				t.Fatalf("Changed() = %q, %v; want %q", changed, err, want)
			}
			missing, err := c.Store(false).FindMissing(context.Background(), []digest.Digest{digest.FromBytes([]byte("alpha"))})
			if err != nil || len(missing) != 1 {
				t.Fatalf("the changed blob: missing %v (%v), want it dropped", missing, err)
			}
		})
	}
}

func TestStageErrors(t *testing.T) {
	mt, tree := sampleTree(t)
	changed := filepath.Join(t.TempDir(), "changed.txt")
	if err := os.WriteFile(changed, []byte("omega"), 0o644); err != nil {
		t.Fatal(err)
	}
	var lacking, rewritten []merkle.File // bin/run.sh; a.txt and d/same.txt from changed
	for _, f := range mt.Files {
		if f.Path != "bin/run.sh" {
			lacking = append(lacking, f)
		}
		if f.Digest == digest.FromBytes([]byte("alpha")) {
			f.Source, f.Data = changed, nil
		}
		rewritten = append(rewritten, f)
	}
	escapes := &Tree{Root: digest.FromBytes([]byte("root")), Dirs: map[digest.Digest]*repb.Directory{
		digest.FromBytes([]byte("root")): {Symlinks: []*repb.SymlinkNode{{Name: "up", Target: "../x"}}},
	}}
	for _, tc := range []struct {
		name string
		tree *Tree
		src  Source
		code codes.Code
		want string
	}{
		{"a file the source lacks", tree, FileSource(lacking), codes.FailedPrecondition, "input files missing from the CAS"},
		{"a file changed since it was hashed", tree, FileSource(rewritten), codes.Unknown, `input "a.txt": its content changed since it was hashed`},
		{"a symlink out of the tree", escapes, newMemSource(), codes.InvalidArgument, `"up" -> "../x" escapes the input root`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			_, err := openCache(t, 0).Stage(context.Background(), tc.src, tc.tree, dir)
			if status.Code(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Stage: %v, want %s containing %q", err, tc.code, tc.want)
			}
			if tc.code == codes.InvalidArgument {
				if _, err := os.Lstat(dir); !os.IsNotExist(err) {
					t.Fatalf("a rejected tree was staged: %v", err)
				}
			}
		})
	}
}

func TestLoadTree(t *testing.T) {
	mt, want := sampleTree(t)
	src := newMemSource()
	stored := 0 // the empty Directory is never fetched
	for _, b := range mt.Directories {
		if len(b) > 0 {
			src.add(b)
			stored++
		}
	}
	c := openCache(t, 0)
	for i := 0; i < 2; i++ {
		got, err := c.LoadTree(context.Background(), src, mt.Root)
		if err != nil {
			t.Fatal(err)
		}
		if got.Root != want.Root || len(got.Dirs) != len(want.Dirs) {
			t.Fatalf("load %d: root %s with %d directories, want %s with %d", i, got.Root, len(got.Dirs), want.Root, len(want.Dirs))
		}
		for d, dir := range want.Dirs {
			if !proto.Equal(got.Dirs[d], dir) {
				t.Fatalf("load %d: directory %s = %v, want %v", i, d, got.Dirs[d], dir)
			}
		}
		// The second load finds them all in the cache.
		if fetched := src.fetched; fetched != stored {
			t.Fatalf("load %d: %d blobs fetched, want %d", i, fetched, stored)
		}
	}

	huge, err := digest.New(strings.Repeat("0", 64), maxDirectorySize+1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		root digest.Digest
		code codes.Code
		want string
	}{
		{"a root the CAS lacks", digest.FromBytes([]byte("absent")), codes.FailedPrecondition, "input tree incomplete in the CAS"},
		{"a directory over the bound", huge, codes.InvalidArgument, "over the limit"},
		{"a blob that is not a Directory", src.add([]byte("\xff\xff")), codes.InvalidArgument, "is not a Directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := src.fetched
			_, err := openCache(t, 0).LoadTree(context.Background(), src, tc.root)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadTree: %v, want %s containing %q", err, tc.code, tc.want)
			}
			if tc.code == codes.InvalidArgument && tc.root == huge && src.fetched != before {
				t.Fatal("a directory over the bound was fetched")
			}
		})
	}
}

// TestStageFetchesOnce checks that a blob is fetched once however many
// files have it, in either mode, and not again once the cache has it.
func TestStageFetchesOnce(t *testing.T) {
	src := newMemSource([]byte("same"))
	mt, err := merkle.Build([]merkle.File{memFile("a", "same", false), memFile("b", "same", false), memFile("x", "same", true), memFile("d/y", "same", true)})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := ParseTree(mt.Root, mt.Directories)
	if err != nil {
		t.Fatal(err)
	}
	c := openCache(t, 0)
	for i := 0; i < 2; i++ {
		dir := filepath.Join(t.TempDir(), "root")
		if _, err := c.Stage(context.Background(), src, tree, dir); err != nil {
			t.Fatal(err)
		}
		for p, want := range map[string]os.FileMode{"a": 0o444, "b": 0o444, "x": 0o555, "d/y": 0o555} {
			if content, mode, _ := readFile(t, filepath.Join(dir, p)); content != "same" || mode != want {
				t.Errorf("stage %d: %s: %q, mode %o; want mode %o", i, p, content, mode, want)
			}
		}
		if src.fetched != 1 {
			t.Fatalf("stage %d: %d fetches, want 1", i, src.fetched)
		}
	}
}
