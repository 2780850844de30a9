package label

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Glob returns the files (not directories) of a package, whose absolute
// directory is pkgDir, that match any include pattern and no exclude pattern.
// The results are paths relative to pkgDir with "/" separators, sorted.
//
// Glob does not descend into subpackages (subdirectories that have a BUILD
// file), symlinked directories, or the directories Packages skips ("rbs-out",
// "bazel-*", "node_modules" and hidden directories). Symlinks to files count
// as files.
//
// In patterns, "*" matches any run of characters within a path segment, "?"
// matches one character, and a "**" segment matches any number of segments,
// including zero; every other character matches itself. Patterns must be
// relative, non-empty, and free of "." and ".." segments, empty segments and
// backslashes, and "**" must be a whole segment; otherwise Glob returns an
// error quoting the pattern.
func Glob(pkgDir string, include, exclude []string) ([]string, error) {
	inc, err := compileGlobs(include)
	if err != nil {
		return nil, err
	}
	exc, err := compileGlobs(exclude)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(pkgDir)
	if err != nil {
		return nil, fmt.Errorf("glob in %s: %w", pkgDir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("glob in %s: not a directory", pkgDir)
	}
	if len(inc) == 0 {
		return nil, nil
	}

	var out []string
	var walk func(dir string, rel []string) error
	walk = func(dir string, rel []string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("glob in %s: %w", pkgDir, err)
		}
		for _, e := range entries {
			name := e.Name()
			p := filepath.Join(dir, name)
			segs := append(rel[:len(rel):len(rel)], name)
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				st, err := os.Stat(p)
				if err != nil || st.IsDir() {
					continue // dangling, or a symlinked directory
				}
				typ = st.Mode().Type()
			}
			switch {
			case typ.IsDir():
				if SkipDir(name) || !anyPrefix(inc, segs) || BuildFile(p) != "" {
					continue
				}
				if err := walk(p, segs); err != nil {
					return err
				}
			case typ.IsRegular():
				if anyMatch(inc, segs) && !anyMatch(exc, segs) {
					r := strings.Join(segs, "/")
					if checkName(r) == "" {
						out = append(out, r)
					}
				}
			}
		}
		return nil
	}
	if err := walk(pkgDir, nil); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// compileGlobs validates patterns and splits them into segments.
func compileGlobs(patterns []string) ([][]string, error) {
	var out [][]string
	for _, p := range patterns {
		segs, reason := compileGlob(p)
		if reason != "" {
			return nil, fmt.Errorf("invalid glob pattern %q: %s", p, reason)
		}
		out = append(out, segs)
	}
	return out, nil
}

func compileGlob(p string) ([]string, string) {
	switch {
	case p == "":
		return nil, "empty pattern"
	case strings.ContainsAny(p, "\x00\n\r"):
		return nil, "pattern contains a NUL or newline"
	case strings.Contains(p, `\`):
		return nil, `pattern contains a backslash (use "/")`
	case strings.HasPrefix(p, "/"):
		return nil, "pattern must be relative to the package"
	case strings.HasSuffix(p, "/"):
		return nil, "pattern must not end with '/'"
	case strings.Contains(p, "//"):
		return nil, "pattern must not contain '//'"
	}
	var segs []string
	for seg := range strings.SplitSeq(p, "/") {
		switch {
		case seg == "." || seg == "..":
			return nil, fmt.Sprintf("pattern must not contain %q segments", seg)
		case seg == "**":
			if len(segs) > 0 && segs[len(segs)-1] == "**" {
				continue // "**/**" is the same as "**"
			}
		case strings.Contains(seg, "**"):
			return nil, `"**" must be a whole path segment`
		}
		segs = append(segs, seg)
	}
	return segs, ""
}

func anyMatch(patterns [][]string, path []string) bool {
	for _, p := range patterns {
		if matchSegs(p, path) {
			return true
		}
	}
	return false
}

func anyPrefix(patterns [][]string, dir []string) bool {
	for _, p := range patterns {
		if matchDir(p, dir) {
			return true
		}
	}
	return false
}

// matchSegs reports whether the pattern segments pat match the path segments
// path exactly.
func matchSegs(pat, path []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(path); i++ {
				if matchSegs(pat[1:], path[i:]) {
					return true
				}
			}
			return false
		}
		if len(path) == 0 || !matchSeg(pat[0], path[0]) {
			return false
		}
		pat, path = pat[1:], path[1:]
	}
	return len(path) == 0
}

// matchDir reports whether some file below the directory dir (a proper
// extension of dir) could match pat.
func matchDir(pat, dir []string) bool {
	for len(dir) > 0 {
		if len(pat) == 0 {
			return false
		}
		if pat[0] == "**" {
			return true
		}
		if !matchSeg(pat[0], dir[0]) {
			return false
		}
		pat, dir = pat[1:], dir[1:]
	}
	return len(pat) > 0
}

// matchSeg matches one path segment against a pattern segment in which "*"
// matches any run of characters and "?" matches one character.
func matchSeg(pat, name string) bool {
	p, n := []rune(pat), []rune(name)
	// Iterative wildcard matching with backtracking to the last "*".
	pi, ni, star, mark := 0, 0, -1, 0
	for ni < len(n) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ni
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == n[ni]):
			pi++
			ni++
		case star >= 0:
			pi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
