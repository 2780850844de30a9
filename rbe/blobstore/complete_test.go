package blobstore

import (
	"bytes"
	"context"
	"testing"

	"github.com/rbs-build/rbs/rbe/digest"
	"github.com/rbs-build/rbs/rbe/merkle"
)

// TestComplete checks that a tree is complete only while every Directory
// and file of it is stored.
func TestComplete(t *testing.T) {
	ctx := context.Background()
	file := func(p, s string) merkle.File {
		return merkle.File{Path: p, Digest: digest.FromBytes([]byte(s)), Data: []byte(s)}
	}
	tree, err := merkle.BuildAll([]merkle.File{file("a.txt", "a"), file("d/b.txt", "b"), file("d/e/c.txt", "c")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	put := func(s Store, d digest.Digest, b []byte) {
		if err := s.Put(ctx, d, bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	full := func(skip digest.Digest) Store {
		s := NewMemory()
		for d, b := range tree.Directories {
			if d != skip {
				put(s, d, b)
			}
		}
		for _, f := range tree.Files {
			if f.Digest != skip {
				put(s, f.Digest, f.Data)
			}
		}
		return s
	}
	if ok, err := Complete(ctx, full(digest.Digest{}), tree.Root); !ok || err != nil {
		t.Fatalf("a whole tree: %v, %v", ok, err)
	}
	missing := []digest.Digest{tree.Root, tree.Files[2].Digest}
	for d := range tree.Directories {
		missing = append(missing, d)
	}
	for _, d := range missing {
		if ok, err := Complete(ctx, full(d), tree.Root); ok || err != nil {
			t.Errorf("a tree without %s: %v, %v", d, ok, err)
		}
	}
}
