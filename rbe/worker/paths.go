package worker

import (
	"fmt"
	"path"
	"strings"
)

// checkName validates one entry name of a REAPI Directory.
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty file name")
	case name == "." || name == "..":
		return fmt.Errorf("file name %q is not allowed", name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("file name %q contains a slash or NUL", name)
	}
	return nil
}

// checkRelPath validates a path from a Command (working directory, output
// path): relative, and staying inside the input root.
func checkRelPath(p string) error {
	switch {
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("path %q is absolute", p)
	case strings.ContainsRune(p, '\x00'):
		return fmt.Errorf("path %q contains NUL", p)
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("path %q escapes the input root", p)
	}
	return nil
}

// checkSymlink validates a symlink at dir (a clean path relative to the
// input root, "" for the root) pointing at target: relative, and resolving
// inside the input root.
func checkSymlink(dir, target string) error {
	if target == "" {
		return fmt.Errorf("symlink with an empty target")
	}
	if strings.HasPrefix(target, "/") {
		return fmt.Errorf("symlink target %q is absolute", target)
	}
	if c := path.Join(dir, target); c == ".." || strings.HasPrefix(c, "../") {
		return fmt.Errorf("symlink target %q escapes the input root", target)
	}
	return nil
}
