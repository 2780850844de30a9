package label

import "testing"

func TestParsePattern(t *testing.T) {
	tests := []struct {
		in, pkg string
		want    Pattern
		str     string
	}{
		{"//...", "", Pattern{Recursive: true}, "//..."},
		{"//...", "some/pkg", Pattern{Recursive: true}, "//..."},
		{"//...:all", "", Pattern{Recursive: true}, "//..."},
		{"//pkg/...", "", Pattern{Pkg: "pkg", Recursive: true}, "//pkg/..."},
		{"//a/b/...", "x", Pattern{Pkg: "a/b", Recursive: true}, "//a/b/..."},
		{"//pkg/...:all", "", Pattern{Pkg: "pkg", Recursive: true}, "//pkg/..."},
		{"//pkg:all", "", Pattern{Pkg: "pkg", Name: "all"}, "//pkg:all"},
		{"//:all", "x", Pattern{Name: "all"}, "//:all"},
		{":all", "a/b", Pattern{Pkg: "a/b", Name: "all"}, "//a/b:all"},
		{"all", "a/b", Pattern{Pkg: "a/b", Name: "all"}, "//a/b:all"},
		{"//pkg:name", "", Pattern{Pkg: "pkg", Name: "name"}, "//pkg:name"},
		{"//:name", "", Pattern{Name: "name"}, "//:name"},
		{":name", "pkg", Pattern{Pkg: "pkg", Name: "name"}, "//pkg:name"},
		{"name", "pkg", Pattern{Pkg: "pkg", Name: "name"}, "//pkg:name"},
		{":name", "", Pattern{Name: "name"}, "//:name"},
		{"sub/file.txt", "pkg", Pattern{Pkg: "pkg", Name: "sub/file.txt"}, "//pkg:sub/file.txt"},
		{"//pkg", "", Pattern{Pkg: "pkg", Name: "pkg"}, "//pkg:pkg"},
		{"//a/b", "", Pattern{Pkg: "a/b", Name: "b"}, "//a/b:b"},
		{"...", "pkg", Pattern{Pkg: "pkg", Recursive: true}, "//pkg/..."},
		{"...", "", Pattern{Recursive: true}, "//..."},
		{"...:all", "pkg", Pattern{Pkg: "pkg", Recursive: true}, "//pkg/..."},
		{"sub/...", "pkg", Pattern{Pkg: "pkg/sub", Recursive: true}, "//pkg/sub/..."},
		{"sub/...", "", Pattern{Pkg: "sub", Recursive: true}, "//sub/..."},
		{"app:train", "", Pattern{Pkg: "app", Name: "train"}, "//app:train"},
		{"a/b:all", "", Pattern{Pkg: "a/b", Name: "all"}, "//a/b:all"},
		{"sub:name", "pkg", Pattern{Pkg: "pkg/sub", Name: "name"}, "//pkg/sub:name"},
	}
	for _, tt := range tests {
		got, err := ParsePattern(tt.in, tt.pkg)
		if err != nil {
			t.Errorf("ParsePattern(%q, %q): %v", tt.in, tt.pkg, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParsePattern(%q, %q) = %#v, want %#v", tt.in, tt.pkg, got, tt.want)
		}
		if s := got.String(); s != tt.str {
			t.Errorf("ParsePattern(%q, %q).String() = %q, want %q", tt.in, tt.pkg, s, tt.str)
		}
		// The canonical form parses back to the same pattern.
		if again, err := ParsePattern(got.String(), "elsewhere"); err != nil || again != got {
			t.Errorf("ParsePattern(%q) = %#v, %v; want %#v", got.String(), again, err, got)
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	for _, in := range []string{
		"",
		":",
		"//",
		"//pkg:",
		"///x",
		"///...",
		"/...",
		"//a/../b:c",
		"//a/../...",
		"../...",
		"./...",
		"a//...",
		"//a:b:c",
		"//a//b:c",
		"//pkg/...:name",
		"//...:name",
		"...:name",
		"//pkg/...:",
		"../pkg:name",
		"a//b:name",
		"pkg:",
		"@rbs//...",
		"@rbs//pkg:all",
		"//a:/b",
		"//a\\b:c",
		"a/../b",
		"x\ny",
	} {
		p, err := ParsePattern(in, "pkg")
		if err == nil {
			t.Errorf("ParsePattern(%q, \"pkg\") = %#v, want error", in, p)
			continue
		}
		wantQuoted(t, err, in)
	}
	for _, pkg := range []string{"/pkg", "pkg/", "a/../b"} {
		_, err := ParsePattern(":all", pkg)
		wantQuoted(t, err, pkg)
	}
}

func TestPatternMatches(t *testing.T) {
	tests := []struct {
		pattern string
		pkg     string
		want    bool
	}{
		{"//...", "", true},
		{"//...", "a", true},
		{"//...", "a/b/c", true},
		{"//a/...", "a", true},
		{"//a/...", "a/b", true},
		{"//a/...", "a/b/c", true},
		{"//a/...", "ab", false},
		{"//a/...", "", false},
		{"//a/...", "b/a", false},
		{"//a/b/...", "a", false},
		{"//a:all", "a", true},
		{"//a:all", "a/b", false},
		{"//a:all", "", false},
		{"//:all", "", true},
		{"//:all", "a", false},
		{"//a:x", "a", true},
		{"//a:x", "b", false},
		{"//a", "a", true},
	}
	for _, tt := range tests {
		p, err := ParsePattern(tt.pattern, "")
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
		}
		if got := p.Matches(tt.pkg); got != tt.want {
			t.Errorf("%s.Matches(%q) = %v, want %v", tt.pattern, tt.pkg, got, tt.want)
		}
	}
}

func TestPatternString(t *testing.T) {
	tests := []struct {
		p    Pattern
		want string
	}{
		{Pattern{Recursive: true}, "//..."},
		{Pattern{Pkg: "a/b", Recursive: true}, "//a/b/..."},
		{Pattern{Pkg: "a", Recursive: true, Name: "all"}, "//a/...:all"},
		{Pattern{Pkg: "a", Name: "all"}, "//a:all"},
		{Pattern{Name: "x"}, "//:x"},
		{Pattern{Pkg: "a", Name: "x"}, "//a:x"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}
