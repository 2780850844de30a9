package worker

import (
	"fmt"
	"path"
	"strings"
)

// checkRelPath validates a path from a Command (working directory, output
// path): relative, and staying inside the input root. Input trees are
// checked by merkle.CheckTree.
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
