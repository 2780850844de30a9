// Package label parses what users and BUILD files write to name targets and
// files: labels such as //pkg:name, :name and @rbs//python:rules.rbs, target
// patterns such as //... and //pkg:all, and finds the workspace root. Every
// parser rejects bad input with an error that quotes the value.
package label

import (
	"fmt"
	"path"
	"strings"
)

// Label names a target or file: repository ("" for the main workspace, "rbs"
// for @rbs), package path (no leading/trailing slash, "" for the root
// package), and name.
type Label struct {
	Repo, Pkg, Name string
}

// String returns the canonical form of l: "//pkg:name" or "@repo//pkg:name".
// The name is always written out, even when it equals the last component of
// the package path.
func (l Label) String() string {
	var b strings.Builder
	if l.Repo != "" {
		b.WriteByte('@')
		b.WriteString(l.Repo)
	}
	b.WriteString("//")
	b.WriteString(l.Pkg)
	b.WriteByte(':')
	b.WriteString(l.Name)
	return b.String()
}

// Parse parses an absolute label: "//pkg:name", "//pkg" (whose name is the
// last component of pkg), "//:name" (the root package), "@repo//pkg:name" or
// "@repo//pkg", with "@@repo" the same as "@repo" and "@//" or "@@//" the
// main repository's. "//" alone is an error: the root package needs an explicit
// name. A path-like label such as "//tools/rules.rbs" is not special: it
// names the target "rules.rbs" of the package "tools/rules.rbs".
func Parse(s string) (Label, error) {
	if s == "" {
		return Label{}, fmt.Errorf("invalid label %q: empty label", s)
	}
	repo, rest := "", s
	if strings.HasPrefix(s, "@") {
		i := strings.Index(s, "//")
		if i < 0 {
			return Label{}, fmt.Errorf("invalid label %q: missing // after the repository name", s)
		}
		// @@NAME is a canonical repository name, which is rbs's only
		// name for a repository; @// and @@// name the main repository.
		repo, rest = strings.TrimPrefix(s[1:i], "@"), s[i:]
		if reason := checkRepo(repo); reason != "" && repo != "" {
			return Label{}, fmt.Errorf("invalid label %q: %s", s, reason)
		}
	}
	if !strings.HasPrefix(rest, "//") {
		return Label{}, fmt.Errorf("invalid label %q: an absolute label must start with // or @repo//", s)
	}
	pkg, name, reason := splitAbsolute(rest[2:])
	if reason != "" {
		return Label{}, fmt.Errorf("invalid label %q: %s", s, reason)
	}
	return Label{Repo: repo, Pkg: pkg, Name: name}, nil
}

// ParseRelative parses a label as written in package pkg of the main
// repository: ":name", a bare "name" (which may be a relative file path such
// as "sub/file.txt"), or any absolute form accepted by Parse. A relative label
// naming another package ("pkg:name") is an error: relative labels with a
// colon must start with it.
func ParseRelative(s, pkg string) (Label, error) {
	if reason := checkPkg(pkg); reason != "" {
		return Label{}, fmt.Errorf("invalid package %q for label %q: %s", pkg, s, reason)
	}
	if strings.HasPrefix(s, "//") {
		l, err := Parse(s)
		if repo := RepoDir(pkg); err == nil && repo != "" {
			l.Pkg = path.Join(repo, l.Pkg)
		}
		return l, err
	}
	if strings.HasPrefix(s, "@") {
		return Parse(s)
	}
	name := s
	if strings.HasPrefix(s, ":") {
		name = s[1:]
	}
	if strings.Contains(name, ":") {
		if strings.HasPrefix(s, ":") {
			return Label{}, fmt.Errorf("invalid label %q: more than one ':'", s)
		}
		return Label{}, fmt.Errorf("invalid label %q: a relative label must start with ':' (use //pkg:name for another package)", s)
	}
	if reason := checkName(name); reason != "" {
		return Label{}, fmt.Errorf("invalid label %q: %s", s, reason)
	}
	return Label{Pkg: pkg, Name: name}, nil
}

// ExternalDir is the directory under which rbs lays out the packages of
// other repositories: package PKG of repository REPO is the package
// external/REPO/PKG of the workspace, as Bazel places repositories.
const ExternalDir = "external"

// RepoDir is the directory of the repository that package pkg belongs to
// when it is another repository's (external/REPO), else "". In such a
// package, an absolute label //x:y names that repository's package x, as
// Bazel resolves it.
func RepoDir(pkg string) string {
	rest, ok := strings.CutPrefix(pkg, ExternalDir+"/")
	if !ok {
		return ""
	}
	repo, _, _ := strings.Cut(rest, "/")
	return ExternalDir + "/" + repo
}

// splitAbsolute splits what follows "//" in an absolute label into package
// and name, validating both. It returns a non-empty reason on error.
func splitAbsolute(body string) (pkg, name, reason string) {
	if strings.Count(body, ":") > 1 {
		return "", "", "more than one ':'"
	}
	if i := strings.IndexByte(body, ':'); i >= 0 {
		pkg, name = body[:i], body[i+1:]
		if reason := checkPkg(pkg); reason != "" {
			return "", "", reason
		}
		if reason := checkName(name); reason != "" {
			return "", "", reason
		}
		return pkg, name, ""
	}
	pkg = body
	if pkg == "" {
		return "", "", "the root package needs an explicit name (//:name)"
	}
	if reason := checkPkg(pkg); reason != "" {
		return "", "", reason
	}
	return pkg, pkg[strings.LastIndexByte(pkg, '/')+1:], ""
}

// checkRepo validates a repository name: [A-Za-z0-9_.-]+, not "." or "..".
func checkRepo(repo string) string {
	if repo == "" {
		return "empty repository name"
	}
	if repo == "." || repo == ".." {
		return "repository name must not be '.' or '..'"
	}
	for _, c := range repo {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Sprintf("repository name contains %q (allowed: letters, digits, '_', '.', '-')", c)
		}
	}
	return ""
}

// checkPkg validates a package path; "" (the root package) is valid.
func checkPkg(pkg string) string {
	if pkg == "" {
		return ""
	}
	switch {
	case strings.ContainsAny(pkg, "\x00\n\r"):
		return "package path contains a NUL or newline"
	case strings.Contains(pkg, `\`):
		return `package path contains a backslash (use "/")`
	case strings.Contains(pkg, ":"):
		return "package path contains ':'"
	case strings.HasPrefix(pkg, "/"):
		return "package path must not start with '/'"
	case strings.HasSuffix(pkg, "/"):
		return "package path must not end with '/'"
	case strings.Contains(pkg, "//"):
		return "package path must not contain '//'"
	}
	return dotSegments("package path", pkg)
}

// dotSegments complains about "." and ".." segments of a path.
func dotSegments(what, p string) string {
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "." || seg == ".." {
			return fmt.Sprintf("%s must not contain %q segments", what, seg)
		}
	}
	return ""
}

// checkName validates a target name.
func checkName(name string) string {
	switch {
	case name == "":
		return "empty target name"
	case strings.ContainsAny(name, "\x00\n\r"):
		return "target name contains a NUL or newline"
	case strings.HasPrefix(name, "/"):
		return "target name must not start with '/'"
	case strings.HasSuffix(name, "/"):
		return "target name must not end with '/'"
	case strings.Contains(name, "//"):
		return "target name must not contain '//'"
	}
	return dotSegments("target name", name)
}
