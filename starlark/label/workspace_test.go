package label

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// mkTree creates the files (paths ending in "/" are directories) under root.
func mkTree(t *testing.T, root string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		full := filepath.Join(root, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatalf("making a symlink: %v", err)
	}
}

func TestFindWorkspace(t *testing.T) {
	root := t.TempDir()
	mkTree(t, root,
		"module/MODULE.bazel",
		"module/a/b/c/",
		"module/nested/WORKSPACE.rbs",
		"module/nested/x/",
		"ws/WORKSPACE",
		"ws/sub/",
		"wsb/WORKSPACE.bazel",
		"wsb/sub/",
		"dirmarker/MODULE.bazel/", // a directory, not a marker
		"dirmarker/in/",
	)
	tests := []struct {
		dir, want string
	}{
		{"module", "module"},
		{"module/a", "module"},
		{"module/a/b/c", "module"},
		{"module/a/b/../b/c", "module"},
		{"module/nested", "module/nested"},
		{"module/nested/x", "module/nested"},
		{"ws/sub", "ws"},
		{"wsb/sub", "wsb"},
	}
	for _, tt := range tests {
		got, err := FindWorkspace(filepath.Join(root, tt.dir))
		if err != nil {
			t.Errorf("FindWorkspace(%q): %v", tt.dir, err)
			continue
		}
		if want := filepath.Join(root, tt.want); got != want {
			t.Errorf("FindWorkspace(%q) = %q, want %q", tt.dir, got, want)
		}
	}

	// Relative directories give absolute results.
	t.Chdir(filepath.Join(root, "module/a"))
	got, err := FindWorkspace("b")
	if err != nil || got != filepath.Join(root, "module") {
		t.Errorf("FindWorkspace(\"b\") = %q, %v; want %q", got, err, filepath.Join(root, "module"))
	}

	// No marker anywhere: the error names the directory.
	dir := filepath.Join(root, "dirmarker/in")
	for d := root; ; d = filepath.Dir(d) {
		for _, f := range workspaceFiles {
			if isFile(filepath.Join(d, f)) {
				t.Fatalf("the temporary directory is inside a workspace (%s): the test needs one outside any", d)
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	_, err = FindWorkspace(dir)
	wantQuoted(t, err, dir)
}

func TestBuildFile(t *testing.T) {
	root := t.TempDir()
	mkTree(t, root,
		"all/BUILD.rbs", "all/BUILD.bazel", "all/BUILD",
		"bazel/BUILD.bazel", "bazel/BUILD",
		"plain/BUILD",
		"none/file.txt",
		"dirbuild/BUILD/",
		"dirbuild2/BUILD.rbs/", "dirbuild2/BUILD",
		"linked/",
	)
	symlink(t, filepath.Join(root, "plain/BUILD"), filepath.Join(root, "linked/BUILD.bazel"))
	tests := []struct{ dir, want string }{
		{"all", "all/BUILD.rbs"},
		{"bazel", "bazel/BUILD.bazel"},
		{"plain", "plain/BUILD"},
		{"none", ""},
		{"dirbuild", ""},
		{"dirbuild2", "dirbuild2/BUILD"},
		{"linked", "linked/BUILD.bazel"},
		{"missing", ""},
	}
	for _, tt := range tests {
		want := ""
		if tt.want != "" {
			want = filepath.Join(root, tt.want)
		}
		if got := BuildFile(filepath.Join(root, tt.dir)); got != want {
			t.Errorf("BuildFile(%q) = %q, want %q", tt.dir, got, want)
		}
	}
}

func TestPackages(t *testing.T) {
	root := t.TempDir()
	mkTree(t, root,
		"MODULE.bazel",
		"BUILD.rbs",
		"a/BUILD",
		"a/b/BUILD.bazel",
		"a/b/c/BUILD.rbs",
		"a/nobuild/file.txt",
		"a/nobuild/deeper/BUILD",
		"ab/BUILD",
		"rbs-out/x/BUILD",
		"bazel-out/BUILD",
		"bazel-main/y/BUILD",
		".git/BUILD",
		".hidden/z/BUILD",
		"node_modules/m/BUILD",
		"sub/node_modules/BUILD",
		"sub/rbs-out/BUILD",
		"back\\slash/BUILD",
		"files/BUILD/", // a directory named BUILD does not make a package
		"target/BUILD",
	)
	symlink(t, filepath.Join(root, "target"), filepath.Join(root, "link"))

	tests := []struct {
		prefix string
		want   []string
	}{
		{"", []string{"", "a", "a/b", "a/b/c", "a/nobuild/deeper", "ab", "target"}},
		{"a", []string{"a", "a/b", "a/b/c", "a/nobuild/deeper"}},
		{"a/b", []string{"a/b", "a/b/c"}},
		{"a/nobuild", []string{"a/nobuild/deeper"}},
		{"sub", nil},
		{"rbs-out", []string{"rbs-out/x"}}, // an explicit prefix is walked
	}
	for _, tt := range tests {
		got, err := Packages(root, tt.prefix)
		if err != nil {
			t.Errorf("Packages(%q): %v", tt.prefix, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Packages(%q) = %q, want %q", tt.prefix, got, tt.want)
		}
	}

	for _, prefix := range []string{"missing", "a/BUILD", "/a", "a/", "a/../b", "a\\b"} {
		_, err := Packages(root, prefix)
		wantQuoted(t, err, prefix)
	}
}

// TestHasBuildFile: telling a package from its directory's entries agrees
// with BuildFile, links and directories named BUILD included.
func TestHasBuildFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(dir string) error
	}{
		{"a BUILD file", func(d string) error { return os.WriteFile(filepath.Join(d, "BUILD"), nil, 0o644) }},
		{"a BUILD.rbs file", func(d string) error { return os.WriteFile(filepath.Join(d, "BUILD.rbs"), nil, 0o644) }},
		{"no BUILD file", func(d string) error { return os.WriteFile(filepath.Join(d, "other"), nil, 0o644) }},
		{"a directory named BUILD", func(d string) error { return os.Mkdir(filepath.Join(d, "BUILD"), 0o755) }},
		{"a link to a file", func(d string) error {
			if err := os.WriteFile(filepath.Join(d, "real"), nil, 0o644); err != nil {
				return err
			}
			return os.Symlink("real", filepath.Join(d, "BUILD.bazel"))
		}},
		{"a link to a directory", func(d string) error {
			if err := os.Mkdir(filepath.Join(d, "sub"), 0o755); err != nil {
				return err
			}
			return os.Symlink("sub", filepath.Join(d, "BUILD"))
		}},
		{"a dangling link", func(d string) error { return os.Symlink("nowhere", filepath.Join(d, "BUILD")) }},
	} {
		dir := t.TempDir()
		if err := tc.setup(dir); err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hasBuildFile(dir, entries), BuildFile(dir) != ""; got != want {
			t.Errorf("%s: hasBuildFile = %v, BuildFile says %v", tc.name, got, want)
		}
	}
}
