package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/cli/bazelrc"
	"github.com/rbs-build/rbs/starlark/label"
)

// rcCommands are the commands that .bazelrc lines apply to, each with the
// commands whose lines it takes, most general first, as Bazel's inherit.
var rcCommands = map[string][]string{
	"build": {"common", "build"},
	"test":  {"common", "build", "test"},
	"run":   {"common", "build", "run"},
	"clean": {"common", "build", "clean"},
	"query": {"common", "query"},
}

// withRC expands the command line args of a build command (k's grammar)
// with the workspace's .bazelrc and then ~/.bazelrc (see package
// bazelrc). A flag of theirs that the command does not take is one
// warning on stderr, naming its file and line.
//
// Bazel's startup options that choose the rc files may come before the
// command: --nosystem_rc, --noworkspace_rc and --nohome_rc leave out
// /etc/bazel.bazelrc, the workspace's and the home one, and --bazelrc=FILE
// (repeatable) reads FILE after them, as Bazel does; --bazelrc=/dev/null
// ends the list.
func withRC(k *kong.Kong, args []string, stderr io.Writer) ([]string, error) {
	startup, args, err := startupOptions(args)
	if err != nil {
		return nil, err
	}
	if len(args) == 0 {
		return args, nil
	}
	chain, ok := rcCommands[args[0]]
	if !ok {
		return args, nil
	}
	node := child(k.Model.Node, args[0])
	if node == nil {
		return args, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var files []bazelrc.File
	if startup.system {
		files = append(files, bazelrc.File{Path: "/etc/bazel.bazelrc", Optional: true})
	}
	workspace, err := label.FindWorkspace(dir)
	if err == nil && startup.workspace {
		files = append(files, bazelrc.File{Path: filepath.Join(workspace, ".bazelrc"), Optional: true})
	}
	if home, err := os.UserHomeDir(); err == nil && startup.home {
		files = append(files, bazelrc.File{Path: filepath.Join(home, ".bazelrc"), Optional: true})
	}
	for _, f := range startup.bazelrc {
		if f == os.DevNull {
			break
		}
		files = append(files, bazelrc.File{Path: f})
	}
	rc, err := bazelrc.Read(files, workspace, dir)
	if err != nil {
		return nil, err
	}
	rc.HostOS = hostOSConfig[runtime.GOOS]
	rc.Announce = func(line string) { fmt.Fprintln(stderr, line) }
	var others []*kong.Node
	// A common line's flag that another build command takes is not this
	// one's to warn of; the other commands' grammar is built only then.
	takenElsewhere := func(command, name string) bool {
		if command != "common" {
			return false
		}
		if others == nil {
			var all CLI
			full, err := kong.New(&all, Options()...)
			if err != nil {
				return false
			}
			for c := range rcCommands {
				if n := child(full.Model.Node, c); n != nil {
					others = append(others, n)
				}
			}
		}
		for _, n := range others {
			if flagKind(n, name) != bazelrc.Unknown {
				return true
			}
		}
		return false
	}
	rest, err := rc.Expand(chain, args[1:], func(name string) bazelrc.Kind { return flagKind(node, name) }, takenElsewhere,
		func(msg string) { fmt.Fprintln(stderr, "WARNING: "+msg) })
	if err != nil {
		return nil, err
	}
	// Bazel's --noNAME of an on/off flag, on the command line too.
	for i, a := range rest {
		if a == "--" {
			break
		}
		if name, ok := strings.CutPrefix(a, "--no"); ok && !strings.Contains(name, "=") && flagKind(node, name) == bazelrc.Bool && flagKind(node, "no"+name) == bazelrc.Unknown {
			rest[i] = "--" + name + "=false"
		}
	}
	return append([]string{args[0]}, rest...), nil
}

// hostOSConfig names the OS as Bazel's platform-specific configs do.
var hostOSConfig = map[string]string{"linux": "linux", "darwin": "macos", "windows": "windows", "freebsd": "freebsd", "openbsd": "openbsd"}

// startup is what Bazel's startup options before the command say of the
// rc files: which of the standard ones to read, and which others.
type startup struct {
	system, workspace, home bool
	bazelrc                 []string
}

// startupOptions takes the startup options that choose rc files off the
// front of args.
func startupOptions(args []string) (startup, []string, error) {
	st := startup{system: true, workspace: true, home: true}
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--bazelrc":
			if len(args) < 2 {
				return st, nil, fmt.Errorf("--bazelrc: give a file")
			}
			st.bazelrc = append(st.bazelrc, args[1])
			args = args[2:]
			continue
		case strings.HasPrefix(a, "--bazelrc="):
			st.bazelrc = append(st.bazelrc, strings.TrimPrefix(a, "--bazelrc="))
		case a == "--nosystem_rc" || a == "--system_rc":
			st.system = a == "--system_rc"
		case a == "--noworkspace_rc" || a == "--workspace_rc":
			st.workspace = a == "--workspace_rc"
		case a == "--nohome_rc" || a == "--home_rc":
			st.home = a == "--home_rc"
		default:
			return st, args, nil
		}
		args = args[1:]
	}
	return st, args, nil
}

// child is the command of n named name.
func child(n *kong.Node, name string) *kong.Node {
	for _, c := range n.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// flagKind says whether command n, or a command above it, takes the flag
// name (as written after its dashes): build settings (//pkg:flag,
// @repo//pkg:flag) are taken by every build command.
func flagKind(n *kong.Node, name string) bazelrc.Kind {
	if strings.HasPrefix(name, "//") || strings.HasPrefix(name, "@") {
		return bazelrc.Bool
	}
	for ; n != nil; n = n.Parent {
		for _, f := range n.Flags {
			names := append([]string{f.Name}, f.Aliases...)
			if f.Short != 0 {
				names = append(names, string(f.Short))
			}
			if f.Tag.Negatable != "" {
				names = append(names, "no-"+f.Name)
			}
			for _, fn := range names {
				if fn != name {
					continue
				}
				if f.IsBool() || f.IsCounter() {
					return bazelrc.Bool
				}
				return bazelrc.Value
			}
		}
	}
	return bazelrc.Unknown
}
