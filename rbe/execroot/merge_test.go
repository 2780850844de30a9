package execroot

import (
	"errors"
	"testing"

	"github.com/rbs-build/rbs/rbe/merkle"
)

// treeOf builds the tree of files and symlinks.
func treeOf(t *testing.T, files []merkle.File, links []merkle.Symlink) *Tree {
	t.Helper()
	mt, err := merkle.BuildAll(files, links, nil)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := ParseTree(mt.Root, mt.Directories)
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

// TestMerge checks that a merged tree is the tree built of both sides'
// files, and that a path the two hold differently is refused by name.
func TestMerge(t *testing.T) {
	a := []merkle.File{memFile("bin/run.sh", "#!/bin/sh\n", true), memFile("data/x.txt", "x", false), memFile("same", "s", false)}
	b := []merkle.File{memFile("data/y.txt", "y", false), memFile("data/deep/z", "z", false), memFile("same", "s", false)}
	links := []merkle.Symlink{{Path: "data/l", Target: "x.txt"}}
	got, err := Merge(treeOf(t, a, links), treeOf(t, b, links))
	if err != nil {
		t.Fatal(err)
	}
	want := treeOf(t, append(a, b[:2]...), links)
	if got.Root != want.Root {
		t.Fatalf("merged root %s, want %s, the tree of both", got.Root, want.Root)
	}
	if err := merkle.CheckTree(got.Root, got.Dirs); err != nil {
		t.Fatalf("the merged tree: %v", err)
	}
	for _, c := range []struct {
		name string
		b    []merkle.File
		l    []merkle.Symlink
		path string
	}{
		{"file contents", []merkle.File{memFile("data/x.txt", "other", false)}, nil, "data/x.txt"},
		{"file mode", []merkle.File{memFile("bin/run.sh", "#!/bin/sh\n", false)}, nil, "bin/run.sh"},
		{"file over directory", []merkle.File{memFile("data", "d", false)}, nil, "data"},
		{"directory over file", []merkle.File{memFile("same/inner", "i", false)}, nil, "same"},
		{"symlink target", nil, []merkle.Symlink{{Path: "data/l", Target: "y.txt"}}, "data/l"},
		{"symlink over file", nil, []merkle.Symlink{{Path: "same", Target: "x"}}, "same"},
	} {
		_, err := Merge(treeOf(t, a, links), treeOf(t, c.b, c.l))
		var conflict *ConflictError
		if !errors.As(err, &conflict) || conflict.Path != c.path {
			t.Errorf("%s: %v, want a conflict at %s", c.name, err, c.path)
		}
	}
}
