package rules

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"go.starlark.net/starlark"
)

// debugMu keeps the lines of print() calls made at once (BUILD files are
// evaluated in parallel) whole.
var debugMu sync.Mutex

// debug is print() in BUILD and .bzl files and in rule implementations. It
// writes the message as Bazel does, "DEBUG: FILE:LINE:COL: MESSAGE", FILE
// the absolute path of one of the workspace's files and the position that
// of the call's parenthesis.
func (w *Workspace) debug(thread *starlark.Thread, msg string) {
	pos := thread.CallFrame(1).Pos
	out := w.cfg.Debug
	if out == nil {
		out = os.Stderr
	}
	debugMu.Lock()
	defer debugMu.Unlock()
	// A message's own last newline ends its line, as in Bazel.
	fmt.Fprintf(out, "DEBUG: %s:%d:%d: %s\n", w.sourcePath(pos.Filename()), pos.Line, pos.Col, strings.TrimSuffix(msg, "\n"))
}

// sourcePath is the path of a Starlark file as print() shows it: a
// workspace file (a BUILD file's path from the root, or a module's name,
// //pkg/file.bzl) as its absolute path; a file of an embedded repository by
// its name.
func (w *Workspace) sourcePath(name string) string {
	repo, p := starlarkFile(name)
	if repo != "" {
		return name
	}
	return filepath.Join(w.Root, filepath.FromSlash(p))
}

// starlarkFile splits the name a Starlark file runs under into its
// repository and its path there: a module's name is //path or
// @repo//path (loader.Module.String), a BUILD file's its path from the
// workspace root.
func starlarkFile(name string) (repo, p string) {
	if rest, ok := strings.CutPrefix(name, "//"); ok {
		return "", rest
	}
	if rest, ok := strings.CutPrefix(name, "@"); ok {
		if r, p, ok := strings.Cut(rest, "//"); ok {
			return r, p
		}
	}
	return "", name
}
