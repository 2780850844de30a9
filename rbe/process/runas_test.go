package process

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestReach checks which work dirs a payload user may reach, by the
// owner, group and other bits of the directory above it.
func TestReach(t *testing.T) {
	owner, group := uint32(os.Getuid()), uint32(os.Getgid())
	const stranger = 4242424
	for _, tc := range []struct {
		name string
		mode os.FileMode // of the work dir's parent
		user User
		ok   bool
	}{
		{"open to others", 0o711, User{Name: "other", UID: stranger, GID: stranger}, true},
		{"closed to others", 0o770, User{Name: "other", UID: stranger, GID: stranger}, false},
		{"the owner's", 0o700, User{Name: "owner", UID: owner, GID: stranger}, true},
		{"closed to its owner", 0o077, User{Name: "owner", UID: owner, GID: group}, false},
		{"open to a supplementary group", 0o710, User{Name: "member", UID: stranger, GID: stranger, Groups: []uint32{group}}, true},
		{"open to the primary group", 0o710, User{Name: "member", UID: stranger, GID: group}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The test's own directory is opened so that only the modes
			// set here decide.
			parent := t.TempDir()
			if err := os.Chmod(filepath.Dir(parent), 0o711); err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(parent, "work")
			if err := os.Mkdir(work, 0o711); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(parent, tc.mode); err != nil {
				t.Fatal(err)
			}
			defer os.Chmod(parent, 0o700)
			err := tc.user.Reach(work)
			if tc.ok && err != nil {
				t.Fatalf("reach: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%s (mode %#o,", parent, tc.mode))) {
				t.Fatalf("reach = %v, want an error naming %s and its mode", err, parent)
			}
		})
	}
}

// TestHandOverAndReclaim checks that a payload user gets the directories
// of an input root and not its files, and that reclaim takes every
// directory back, closed to others' writes, whatever the payload made of
// them.
func TestHandOverAndReclaim(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("RBS_TEST_REQUIRE_ALL") == "1" {
			t.Fatal("handing directories to another user needs root (RBS_TEST_REQUIRE_ALL=1)")
		}
		t.Skip("handing directories to another user needs root; set RBS_TEST_REQUIRE_ALL=1 to make this a failure")
	}
	root := t.TempDir()
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "a/in.txt"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	u := &User{Name: "payload", UID: 4242424, GID: 4242425}
	if err := u.HandOver(root); err != nil {
		t.Fatal(err)
	}
	owners := func() map[string]string {
		got := map[string]string{}
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			st := info.Sys().(*syscall.Stat_t)
			rel, _ := filepath.Rel(root, p)
			got[rel] = info.Mode().String() + " " + itoa(st.Uid) + ":" + itoa(st.Gid)
			return nil
		})
		return got
	}
	me := itoa(uint32(os.Getuid())) + ":" + itoa(uint32(os.Getgid()))
	check := func(want map[string]string) {
		t.Helper()
		got := owners()
		for p, w := range want {
			if got[p] != w {
				t.Errorf("%s: %s, want %s", p, got[p], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("tree %v, want %v", got, want)
		}
	}
	check(map[string]string{
		".": "drwxr-xr-x 4242424:4242425", "a": "drwxr-xr-x 4242424:4242425", "a/b": "drwxr-xr-x 4242424:4242425",
		"c": "drwxr-xr-x 4242424:4242425", "a/in.txt": "-r--r--r-- " + me,
	})
	// What a payload may do with directories it owns.
	if err := os.Chmod(filepath.Join(root, "a/b"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "c"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := u.Reclaim(root); err != nil {
		t.Fatal(err)
	}
	check(map[string]string{
		".": "drwxr-xr-x " + me, "a": "drwxr-xr-x " + me, "a/b": "drwxr-xr-x " + me,
		"c": "d--------- " + me, "a/in.txt": "-r--r--r-- " + me,
	})
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }
