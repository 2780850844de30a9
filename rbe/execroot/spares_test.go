package execroot

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSpares(t *testing.T) {
	parent := t.TempDir()
	s := NewSpares(parent)
	take := func() string {
		t.Helper()
		dir, err := s.Take()
		if err != nil {
			t.Fatal(err)
		}
		if info, err := os.Lstat(dir); err != nil || !info.IsDir() || info.Mode().Perm() != 0o700 || filepath.Dir(dir) != parent {
			t.Fatalf("Take gave %s: %v, %v; want a directory of mode 0700 in %s", dir, info, err, parent)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("Take gave %s holding %d entries, want none", dir, len(entries))
		}
		return dir
	}
	gone := func(dir string) {
		t.Helper()
		if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v, want it removed", dir, err)
		}
	}

	a, b := take(), take()
	if a == b {
		t.Fatalf("Take gave %s twice", a)
	}
	// What ran in a left files, directories and a mode of its own.
	if err := os.MkdirAll(filepath.Join(a, "sub", "deep"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"out.txt", "sub/deep/x"} {
		if err := os.WriteFile(filepath.Join(a, f), []byte("data"), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(a, 0o777); err != nil {
		t.Fatal(err)
	}
	// And a default ACL giving nobody (65534) its new files.
	acl := []byte{2, 0, 0, 0, 1, 0, 7, 0, 255, 255, 255, 255, 2, 0, 7, 0, 254, 255, 0, 0,
		4, 0, 5, 0, 255, 255, 255, 255, 16, 0, 7, 0, 255, 255, 255, 255, 32, 0, 5, 0, 255, 255, 255, 255}
	err := unix.Setxattr(a, "system.posix_acl_default", acl, 0)
	withACL := err == nil
	if err != nil && !errors.Is(err, unix.EOPNOTSUPP) {
		t.Fatal(err)
	}
	s.Give(a, true)
	if got := take(); got != a {
		t.Fatalf("Take after a kept Give gave %s, want %s again", got, a)
	}
	if withACL {
		if _, err := unix.Getxattr(a, "system.posix_acl_default", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
			t.Fatalf("the kept directory's default ACL: %v, want none", err)
		}
	} else {
		t.Log("this file system takes no ACL")
	}
	s.Give(b, false)
	gone(b)

	// A directory replaced by a symlink is removed, not emptied through.
	target := t.TempDir()
	if err := os.WriteFile(filepath.Join(target, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, a); err != nil {
		t.Fatal(err)
	}
	s.Give(a, true)
	gone(a)
	if _, err := os.Stat(filepath.Join(target, "keep")); err != nil {
		t.Fatalf("the symlink's target lost its file: %v", err)
	}

	// At most MaxSpares are kept.
	var dirs []string
	for range MaxSpares + 1 {
		dirs = append(dirs, take())
	}
	for _, d := range dirs {
		s.Give(d, true)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != MaxSpares {
		t.Fatalf("%d directories kept, want %d", len(entries), MaxSpares)
	}
}
