package label

import (
	"fmt"
	"strings"
)

// Pattern is a target pattern of the main repository.
//
//   - Recursive with Name "": every target in Pkg and the packages below it
//     ("//pkg/..."; "//..." when Pkg is "").
//   - Name "all": every target in package Pkg ("//pkg:all").
//   - Otherwise: the single target Pkg:Name.
type Pattern struct {
	Pkg       string
	Recursive bool
	Name      string
}

// ParsePattern parses a target pattern as written in package pkg of the main
// repository (pkg is "" at the workspace root). Accepted forms:
//
//	//...            every package
//	//pkg/...        pkg and every package below it
//	//pkg/...:all    same as //pkg/...
//	//pkg:all, :all  every target of one package
//	//pkg:name       one target
//	//pkg            //pkg:<last component of pkg>
//	:name, name      one target of pkg ("name" may be a relative file path)
//	sub:name         one target of pkg/sub (sub:all, every target of it)
//	..., sub/...     pkg (or pkg/sub) and every package below it
//
// Patterns naming another repository ("@repo//...") are rejected.
func ParsePattern(s, pkg string) (Pattern, error) {
	if reason := checkPkg(pkg); reason != "" {
		return Pattern{}, fmt.Errorf("invalid package %q for target pattern %q: %s", pkg, s, reason)
	}
	bad := func(reason string) (Pattern, error) {
		return Pattern{}, fmt.Errorf("invalid target pattern %q: %s", s, reason)
	}
	switch {
	case s == "":
		return bad("empty pattern")
	case strings.HasPrefix(s, "@"):
		return bad("patterns in other repositories are not supported")
	}
	absolute := strings.HasPrefix(s, "//")
	body := s
	if absolute {
		body = s[2:]
	}
	if strings.Count(body, ":") > 1 {
		return bad("more than one ':'")
	}
	path, target, hasColon := strings.Cut(body, ":")

	// Recursive patterns: "...", "sub/...", "//...", "//pkg/...", optionally
	// followed by ":all".
	if path == "..." || strings.HasSuffix(path, "/...") {
		if hasColon && target != "all" {
			return bad("a recursive pattern can only be followed by :all")
		}
		p := ""
		if path != "..." {
			p = strings.TrimSuffix(path, "/...")
			if p == "" {
				return bad("package path must not start with '/'")
			}
		}
		if !absolute {
			if reason := checkPkg(p); reason != "" {
				return bad(reason)
			}
			p = joinPkg(pkg, p)
		}
		if reason := checkPkg(p); reason != "" {
			return bad(reason)
		}
		return Pattern{Pkg: p, Recursive: true}, nil
	}

	if absolute {
		p, name, reason := splitAbsolute(body)
		if reason != "" {
			return bad(reason)
		}
		return Pattern{Pkg: p, Name: name}, nil
	}

	// Relative single-package patterns: ":name", ":all", "name", and, as
	// on Bazel's command line, "sub/pkg:name" for a package below pkg.
	name := body
	if hasColon {
		name = target
	}
	if reason := checkName(name); reason != "" {
		return bad(reason)
	}
	if hasColon && path != "" {
		if reason := checkPkg(path); reason != "" {
			return bad(reason)
		}
		pkg = joinPkg(pkg, path)
	}
	return Pattern{Pkg: pkg, Name: name}, nil
}

// joinPkg joins a package path and a relative path, either of which may be "".
func joinPkg(pkg, rel string) string {
	switch {
	case pkg == "":
		return rel
	case rel == "":
		return pkg
	}
	return pkg + "/" + rel
}

// Matches reports whether the pattern covers package pkg: for a recursive
// pattern, pkg is p.Pkg or below it (every package when p.Pkg is ""); for
// the others, pkg is p.Pkg.
func (p Pattern) Matches(pkg string) bool {
	if !p.Recursive {
		return pkg == p.Pkg
	}
	return p.Pkg == "" || pkg == p.Pkg || strings.HasPrefix(pkg, p.Pkg+"/")
}

// String returns the canonical absolute form of p: "//...", "//pkg/...",
// "//pkg:all" or "//pkg:name".
func (p Pattern) String() string {
	if p.Recursive {
		s := "//" + p.Pkg + "/..."
		if p.Pkg == "" {
			s = "//..."
		}
		if p.Name != "" {
			s += ":" + p.Name
		}
		return s
	}
	return "//" + p.Pkg + ":" + p.Name
}
