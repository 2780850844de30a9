package label

import (
	"strconv"
	"strings"
	"testing"
)

// wantQuoted fails the test unless err is non-nil and quotes value.
func wantQuoted(t *testing.T, err error, value string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%q: got no error", value)
	}
	if !strings.Contains(err.Error(), strconv.Quote(value)) {
		t.Errorf("%q: error %q does not quote the value", value, err)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Label
		str  string
	}{
		{"//pkg:name", Label{Pkg: "pkg", Name: "name"}, "//pkg:name"},
		{"//a/b/c:d", Label{Pkg: "a/b/c", Name: "d"}, "//a/b/c:d"},
		{"//pkg", Label{Pkg: "pkg", Name: "pkg"}, "//pkg:pkg"},
		{"//a/b/c", Label{Pkg: "a/b/c", Name: "c"}, "//a/b/c:c"},
		{"//:name", Label{Name: "name"}, "//:name"},
		{"//:sub/file.txt", Label{Name: "sub/file.txt"}, "//:sub/file.txt"},
		{"@rbs//python:rules.rbs", Label{Repo: "rbs", Pkg: "python", Name: "rules.rbs"}, "@rbs//python:rules.rbs"},
		{"@rbs//job", Label{Repo: "rbs", Pkg: "job", Name: "job"}, "@rbs//job:job"},
		{"@rbs//:x", Label{Repo: "rbs", Name: "x"}, "@rbs//:x"},
		{"@my_repo-1.2//a:b", Label{Repo: "my_repo-1.2", Pkg: "a", Name: "b"}, "@my_repo-1.2//a:b"},
		{"//tools/rules.rbs", Label{Pkg: "tools/rules.rbs", Name: "rules.rbs"}, "//tools/rules.rbs:rules.rbs"},
		{"//pkg:name with space", Label{Pkg: "pkg", Name: "name with space"}, "//pkg:name with space"},
		{"//pkg:...x", Label{Pkg: "pkg", Name: "...x"}, "//pkg:...x"},
		{"//.github:x", Label{Pkg: ".github", Name: "x"}, "//.github:x"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.str {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
		// The canonical form parses back to the same label.
		if again, err := Parse(got.String()); err != nil || again != got {
			t.Errorf("Parse(%q) = %#v, %v; want %#v", got.String(), again, err, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{
		"",
		":",
		":name",
		"name",
		"pkg:name",
		"/pkg:name",
		"//",
		"//pkg:",
		"///x",
		"///x:y",
		"//a/../b:c",
		"//a/./b:c",
		"//..:c",
		"//a:b:c",
		"//a//b:c",
		"//a/:c",
		"//a\\b:c",
		"//a:/b",
		"//a:b/",
		"//a:b//c",
		"//a:../b",
		"//a:b/../c",
		"//a:b/./c",
		"//a:.",
		"//a:b\x00",
		"//a:b\nc",
		"//a\nb:c",
		"@",
		"@rbs",
		"@rbs:x",
		"@r bs//a:b",
		"@@@rbs//a:b",
		"@r/s//a:b",
		"@..//a:b",
		"@rbs//",
		"@rbs//a:",
		"@rbs/a:b",
	} {
		l, err := Parse(in)
		if err == nil {
			t.Errorf("Parse(%q) = %#v, want error", in, l)
			continue
		}
		wantQuoted(t, err, in)
	}
}

func TestParseRelative(t *testing.T) {
	tests := []struct {
		in, pkg string
		want    Label
	}{
		{":name", "pkg", Label{Pkg: "pkg", Name: "name"}},
		{"name", "pkg", Label{Pkg: "pkg", Name: "name"}},
		{"sub/file.txt", "a/b", Label{Pkg: "a/b", Name: "sub/file.txt"}},
		{":sub/file.txt", "a/b", Label{Pkg: "a/b", Name: "sub/file.txt"}},
		{":name", "", Label{Name: "name"}},
		{"file.txt", "", Label{Name: "file.txt"}},
		{"//other:x", "pkg", Label{Pkg: "other", Name: "x"}},
		{"//other", "pkg", Label{Pkg: "other", Name: "other"}},
		{"//:x", "pkg", Label{Name: "x"}},
		{"@rbs//python:rules.rbs", "pkg", Label{Repo: "rbs", Pkg: "python", Name: "rules.rbs"}},
		// In another repository's package, //x names that repository's.
		{"//other:x", "external/foo/lib", Label{Pkg: "external/foo/other", Name: "x"}},
		{"//:x", "external/foo", Label{Pkg: "external/foo", Name: "x"}},
		{":x", "external/foo/lib", Label{Pkg: "external/foo/lib", Name: "x"}},
		{"@bar//y:z", "external/foo/lib", Label{Repo: "bar", Pkg: "y", Name: "z"}},
		// @// and @@// name the main repository, even from another's.
		{"@//y:z", "external/foo/lib", Label{Pkg: "y", Name: "z"}},
		{"@@//y:z", "pkg", Label{Pkg: "y", Name: "z"}},
		{"@@bar//y:z", "pkg", Label{Repo: "bar", Pkg: "y", Name: "z"}},
		{"//externals:x", "externals/a", Label{Pkg: "externals", Name: "x"}},
	}
	for _, tt := range tests {
		got, err := ParseRelative(tt.in, tt.pkg)
		if err != nil {
			t.Errorf("ParseRelative(%q, %q): %v", tt.in, tt.pkg, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseRelative(%q, %q) = %#v, want %#v", tt.in, tt.pkg, got, tt.want)
		}
	}
}

func TestParseRelativeErrors(t *testing.T) {
	for _, in := range []string{
		"",
		":",
		"pkg:name",
		":a:b",
		"/abs",
		"../x",
		"a/../x",
		"./x",
		"a//b",
		"dir/",
		"a\x00b",
		"a\nb",
		"//a:b:c",
		"//pkg:",
		"///x",
		"@rbs",
	} {
		l, err := ParseRelative(in, "pkg")
		if err == nil {
			t.Errorf("ParseRelative(%q, \"pkg\") = %#v, want error", in, l)
			continue
		}
		wantQuoted(t, err, in)
	}
	// A bad package is reported too, quoting the package.
	for _, pkg := range []string{"/pkg", "pkg/", "a/../b", "a\\b", "a//b"} {
		_, err := ParseRelative(":x", pkg)
		wantQuoted(t, err, pkg)
	}
}

func TestLabelString(t *testing.T) {
	tests := []struct {
		l    Label
		want string
	}{
		{Label{Pkg: "pkg", Name: "name"}, "//pkg:name"},
		{Label{Pkg: "pkg", Name: "pkg"}, "//pkg:pkg"},
		{Label{Name: "x"}, "//:x"},
		{Label{Repo: "rbs", Pkg: "python", Name: "rules.rbs"}, "@rbs//python:rules.rbs"},
		{Label{Repo: "rbs", Name: "x"}, "@rbs//:x"},
	}
	for _, tt := range tests {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.l, got, tt.want)
		}
	}
}
