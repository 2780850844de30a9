package label

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestGlob(t *testing.T) {
	dir := t.TempDir()
	mkTree(t, dir,
		"BUILD.rbs",
		"a.go", "b.go", "a_test.go", "c.txt", "README",
		".hidden.go",
		"star*.go",
		"[x].go",
		"sub/d.go", "sub/e.txt",
		"sub/deep/f.go", "sub/deep/g.txt",
		"sub/deep/er/h.go",
		"other/i.go",
		"subpkg/BUILD", "subpkg/j.go", "subpkg/inner/k.go",
		"subpkg2/BUILD.bazel", "subpkg2/l.go",
		"emptydir/",
		"rbs-out/out.go",
		"bazel-bin/bin.go",
		".git/config.go",
		"node_modules/nm.go",
		"dirlike.go/m.txt",
	)
	symlink(t, filepath.Join(dir, "a.go"), filepath.Join(dir, "link.go"))
	symlink(t, filepath.Join(dir, "sub"), filepath.Join(dir, "linkdir"))
	symlink(t, filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling.go"))

	tests := []struct {
		include, exclude []string
		want             []string
	}{
		{[]string{"*.go"}, nil, []string{".hidden.go", "[x].go", "a.go", "a_test.go", "b.go", "link.go", "star*.go"}},
		{[]string{"*.go"}, []string{"*_test.go", ".*", "link.go"}, []string{"[x].go", "a.go", "b.go", "star*.go"}},
		{[]string{"?.go"}, nil, []string{"a.go", "b.go"}},
		{[]string{"[x].go"}, nil, []string{"[x].go"}},
		{[]string{"star*.go"}, nil, []string{"star*.go"}},
		{[]string{"a.go", "c.txt", "missing"}, nil, []string{"a.go", "c.txt"}},
		{[]string{"sub/*"}, nil, []string{"sub/d.go", "sub/e.txt"}},
		{[]string{"sub/*.go"}, nil, []string{"sub/d.go"}},
		{[]string{"sub/**"}, nil, []string{"sub/d.go", "sub/deep/er/h.go", "sub/deep/f.go", "sub/deep/g.txt", "sub/e.txt"}},
		{[]string{"sub/**/*.go"}, nil, []string{"sub/d.go", "sub/deep/er/h.go", "sub/deep/f.go"}},
		{[]string{"**/*.txt"}, nil, []string{"c.txt", "dirlike.go/m.txt", "sub/deep/g.txt", "sub/e.txt"}},
		{[]string{"**/deep/**/*.go"}, nil, []string{"sub/deep/er/h.go", "sub/deep/f.go"}},
		{[]string{"**/**/d.go"}, nil, []string{"sub/d.go"}},
		{[]string{"*/d.go", "*/*/f.go"}, nil, []string{"sub/d.go", "sub/deep/f.go"}},
		{[]string{"**"}, []string{"**/*.go", "README", "BUILD.rbs"}, []string{"c.txt", "dirlike.go/m.txt", "sub/deep/g.txt", "sub/e.txt"}},
		{[]string{"**/*.go"}, []string{"sub/**", "*"}, []string{"other/i.go"}},
		{[]string{"subpkg/*", "subpkg2/*", "subpkg/**"}, nil, nil},
		{[]string{"rbs-out/*", "bazel-bin/*", ".git/*", "node_modules/*", "linkdir/*"}, nil, nil},
		{[]string{"sub", "emptydir", "dirlike.go"}, nil, nil},
		{[]string{"dangling.go"}, nil, nil},
		{nil, nil, nil},
	}
	for _, tt := range tests {
		got, err := Glob(dir, tt.include, tt.exclude)
		if err != nil {
			t.Errorf("Glob(%q, %q): %v", tt.include, tt.exclude, err)
			continue
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("Glob(%q, %q) = %q, want %q", tt.include, tt.exclude, got, tt.want)
		}
	}

	// A subpackage's own glob sees its files.
	got, err := Glob(filepath.Join(dir, "subpkg"), []string{"**/*.go"}, nil)
	if want := []string{"inner/k.go", "j.go"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Glob(subpkg) = %q, %v; want %q", got, err, want)
	}
}

func TestGlobErrors(t *testing.T) {
	dir := t.TempDir()
	mkTree(t, dir, "BUILD", "a.go")
	for _, pattern := range []string{
		"",
		"/abs/*.go",
		"../*.go",
		"a/../b",
		"./a.go",
		"a/./b",
		"a//b",
		"dir/",
		"a\\b",
		"a**",
		"**b/c",
		"a/x**y",
		"a\x00",
		"a\nb",
	} {
		if _, err := Glob(dir, []string{"*.go", pattern}, nil); err == nil {
			t.Errorf("Glob include %q: no error", pattern)
		} else {
			wantQuoted(t, err, pattern)
		}
		if _, err := Glob(dir, []string{"*.go"}, []string{pattern}); err == nil {
			t.Errorf("Glob exclude %q: no error", pattern)
		} else {
			wantQuoted(t, err, pattern)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := Glob(missing, []string{"*"}, nil); err == nil {
		t.Errorf("Glob(%q): no error", missing)
	}
	if _, err := Glob(filepath.Join(dir, "a.go"), []string{"*"}, nil); err == nil {
		t.Errorf("Glob on a file: no error")
	}
}

func TestMatchSeg(t *testing.T) {
	tests := []struct {
		pat, name string
		want      bool
	}{
		{"*", "", true},
		{"*", "abc", true},
		{"a*", "abc", true},
		{"*c", "abc", true},
		{"a*c", "ac", true},
		{"a*c", "abbc", true},
		{"a*c", "abcd", false},
		{"*.go", "x.go", true},
		{"*.go", "x.go.txt", false},
		{"*a*b*", "xaybz", true},
		{"*a*b*", "xbya", false},
		{"?", "a", true},
		{"?", "é", true},
		{"?", "", false},
		{"??", "a", false},
		{"a?c", "abc", true},
		{"[ab]", "a", false},
		{"[ab]", "[ab]", true},
		{"abc", "abc", true},
		{"abc", "abd", false},
		{"", "", true},
		{"", "a", false},
	}
	for _, tt := range tests {
		if got := matchSeg(tt.pat, tt.name); got != tt.want {
			t.Errorf("matchSeg(%q, %q) = %v, want %v", tt.pat, tt.name, got, tt.want)
		}
	}
}
