package label

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// workspaceFiles are the file names that mark a workspace root.
var workspaceFiles = []string{"MODULE.bazel", "WORKSPACE.rbs", "WORKSPACE", "WORKSPACE.bazel"}

// FindWorkspace returns the nearest directory at or above dir containing
// MODULE.bazel, WORKSPACE.rbs, WORKSPACE or WORKSPACE.bazel. The result is an
// absolute, cleaned path.
func FindWorkspace(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("finding workspace for %q: %w", dir, err)
	}
	for d := abs; ; {
		for _, f := range workspaceFiles {
			if isFile(filepath.Join(d, f)) {
				return d, nil
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			break
		}
		d = parent
	}
	return "", fmt.Errorf("no workspace at or above %q: none of %s found", dir, strings.Join(workspaceFiles, ", "))
}

// BuildFileNames lists the file names that make a directory a package, in
// order of preference.
var BuildFileNames = []string{"BUILD.rbs", "BUILD.bazel", "BUILD"}

// BuildFile returns the BUILD file of package dir (absolute), or "" when dir
// is not a package.
func BuildFile(dir string) string {
	for _, name := range BuildFileNames {
		p := filepath.Join(dir, name)
		if isFile(p) {
			return p
		}
	}
	return ""
}

// hasBuildFile reports whether dir, whose entries are entries, is a
// package, as BuildFile would say, statting only a symbolic link.
func hasBuildFile(dir string, entries []os.DirEntry) bool {
	for _, e := range entries {
		if !slices.Contains(BuildFileNames, e.Name()) {
			continue
		}
		if e.Type()&os.ModeSymlink != 0 {
			if isFile(filepath.Join(dir, e.Name())) {
				return true
			}
		} else if !e.IsDir() {
			return true
		}
	}
	return false
}

// isFile reports whether p exists (following symbolic links) and is not a
// directory.
func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// SkipDir reports whether walks (Packages, Glob) ignore a directory named
// name: output trees, VCS metadata, node_modules and hidden directories.
func SkipDir(name string) bool {
	return name == "rbs-out" || name == "node_modules" || strings.HasPrefix(name, "bazel-") || strings.HasPrefix(name, ".")
}

// Packages walks root and returns the package paths (relative,
// slash-separated, "" for the root package) at or under the package prefix
// prefix ("" for all), sorted. It skips directories named "rbs-out",
// "bazel-*" and "node_modules", hidden directories (".git" among them),
// symlinked directories, and directories whose names cannot appear in a
// package path. The prefix directory itself is walked even if its name would
// be skipped; it is an error when it does not exist.
func Packages(root, prefix string) ([]string, error) {
	if reason := checkPkg(prefix); reason != "" {
		return nil, fmt.Errorf("invalid package prefix %q: %s", prefix, reason)
	}
	start := filepath.Join(root, filepath.FromSlash(prefix))
	fi, err := os.Stat(start)
	if err != nil {
		return nil, fmt.Errorf("listing packages under %q: %w", prefix, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("listing packages under %q: %s is not a directory", prefix, start)
	}
	var pkgs []string
	var walk func(dir, rel string) error
	walk = func(dir, rel string) error {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("listing packages under %q: %w", prefix, err)
		}
		if hasBuildFile(dir, entries) {
			pkgs = append(pkgs, rel)
		}
		for _, e := range entries {
			// ReadDir reports symlinks as such, so symlinked directories
			// are not dirs here and are skipped.
			if !e.IsDir() || SkipDir(e.Name()) || checkPkg(e.Name()) != "" {
				continue
			}
			if err := walk(filepath.Join(dir, e.Name()), joinPkg(rel, e.Name())); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(start, prefix); err != nil {
		return nil, err
	}
	sort.Strings(pkgs)
	return pkgs, nil
}
