package execroot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCheckRelPath(t *testing.T) {
	for p, ok := range map[string]bool{"": true, "out": true, "a/b/c": true, "a/../b": true, "./x": true,
		"/etc/passwd": false, "..": false, "../x": false, "a/../../x": false, "a\x00": false} {
		if err := CheckRelPath(p); (err == nil) != ok {
			t.Errorf("CheckRelPath(%q) = %v, want ok=%v", p, err, ok)
		}
	}
}

// lookupFixture is a directory holding a file f, a directory d/sub and
// symlinks: in -> d (inside), up -> .. (out of it), fl -> f.
func lookupFixture(t *testing.T) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "d", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("f"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"in": "d", "up": "..", "fl": "f"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLookup(t *testing.T) {
	dir := lookupFixture(t)
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	const (
		found   = "found"
		missing = "missing"
		invalid = "invalid"
		viaLink = "through a symlink"
		viaFile = "through a file"
	)
	for _, tc := range []struct {
		links Links
		p     string
		want  string
		at    string // where it is found, relative to the root; or the BlockedError's At
		link  bool   // whether what is found is a symlink
	}{
		{NoLinks, "f", found, "f", false},
		{NoLinks, "d/sub", found, "d/sub", false},
		{NoLinks, "in", found, "in", true},
		{NoLinks, "in/sub", viaLink, "in", false},
		{NoLinks, "up/x", viaLink, "up", false},
		{NoLinks, "f/x", viaFile, "f", false},
		{NoLinks, "nope", missing, "", false},
		{NoLinks, "d/nope/x", missing, "", false},
		{NoLinks, "../x", invalid, "", false},
		{NoLinks, "/etc", invalid, "", false},
		{LinksInside, "f", found, "f", false},
		{LinksInside, "in/sub", found, "d/sub", false},
		{LinksInside, "fl", found, "fl", true},
		{LinksInside, "in", found, "in", true},
		{LinksInside, "d/../f", found, "f", false},
		{LinksInside, "up/x", invalid, "", false},
		{LinksInside, ".", invalid, "", false},
		{LinksInside, "f/x", missing, "", false},
		{LinksInside, "nope/x/y", missing, "", false},
		{LinksInside, "a/../../x", invalid, "", false},
	} {
		r, err := NewRoot(dir, tc.links)
		if err != nil {
			t.Fatal(err)
		}
		abs, info, err := r.Lookup(tc.p)
		var blocked *BlockedError
		got := found
		switch {
		case errors.As(err, &blocked) && blocked.Link:
			got = viaLink
		case errors.As(err, &blocked):
			got = viaFile
		case errors.Is(err, fs.ErrNotExist):
			got = missing
		case status.Code(err) == codes.InvalidArgument:
			got = invalid
		case err != nil:
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("links %d, Lookup(%q): %s (%v), want %s", tc.links, tc.p, got, err, tc.want)
			continue
		}
		switch got {
		case found:
			if want := filepath.Join(real, filepath.FromSlash(tc.at)); abs != want || (info.Mode()&fs.ModeSymlink != 0) != tc.link {
				t.Errorf("links %d, Lookup(%q) = %s (%v), want %s (symlink %v)", tc.links, tc.p, abs, info.Mode(), want, tc.link)
			}
		case viaLink, viaFile:
			if blocked.At != tc.at {
				t.Errorf("links %d, Lookup(%q): blocked at %q, want %q", tc.links, tc.p, blocked.At, tc.at)
			}
		}
	}
}
