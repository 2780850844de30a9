package tests

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
	"github.com/rbs-build/rbs/cli"
)

// TestEveryCommandsHelp runs --help of every command and subcommand of the
// command tree, walked from the CLI's kong model: each exits 0 and prints
// its usage, with placeholders people read rather than Go types.
func TestEveryCommandsHelp(t *testing.T) {
	var root cli.CLI
	k, err := kong.New(&root, cli.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	raw := regexp.MustCompile(`=(INT|UINT|FLOAT)-\d+|=-\d`)
	var walk func(n *kong.Node)
	n := 0
	walk = func(node *kong.Node) {
		for _, c := range node.Children {
			if c.Type != kong.CommandNode || c.Hidden {
				continue
			}
			n++
			path := strings.Fields(c.FullPath())[1:]
			cmd := exec.Command(rbsBin, append(path, "--help")...)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Errorf("rbs %s --help: %v\n%s", strings.Join(path, " "), err, stderr.String())
			} else if want := "Usage: rbs " + strings.Join(path, " "); !strings.Contains(string(out), want) {
				t.Errorf("rbs %s --help does not print %q:\n%s", strings.Join(path, " "), want, out)
			}
			if m := raw.FindString(string(out)); m != "" {
				t.Errorf("rbs %s --help shows the placeholder %q: give the flag a placeholder", strings.Join(path, " "), m)
			}
			walk(c)
		}
	}
	walk(k.Model.Node)
	if n < 20 {
		t.Fatalf("walked %d commands; the command tree has more", n)
	}
}

// readmeExample is a fenced ```sh block of the README: the commands a user
// types, each with the output it must print when the block is a transcript
// (its commands written "$ cmd", the output below them).
type readmeExample struct {
	line     int // of the fence
	commands []string
	outputs  []string // per command, for a transcript
	script   bool     // not a transcript: its lines are commands
}

// readmeSkips are the README's ```sh examples that need what the test does
// not have, by a part of their text, and why.
var readmeSkips = map[string]string{
	"torchrun --nnodes": "needs torchrun and PyTorch, covered by TestTorchrunGang",
}

// readmeExamples reads the ```sh blocks of the README.
func readmeExamples(t *testing.T) []readmeExample {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readmeExample
	var cur *readmeExample
	indent, pending := "", ""
	sc := bufio.NewScanner(f)
	for i := 1; sc.Scan(); i++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case cur == nil && trimmed == "```sh":
			indent = line[:len(line)-len(trimmed)]
			cur = &readmeExample{line: i, script: true}
		case cur == nil:
		case trimmed == "```":
			out = append(out, *cur)
			cur = nil
		default:
			line = strings.TrimPrefix(line, indent)
			if c, ok := strings.CutPrefix(line, "$ "); ok {
				cur.script = false
				cur.commands = append(cur.commands, c)
				cur.outputs = append(cur.outputs, "")
				continue
			}
			if !cur.script {
				cur.outputs[len(cur.outputs)-1] += line + "\n"
				continue
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			if c, ok := strings.CutSuffix(line, `\`); ok {
				pending += c
				continue
			}
			cur.commands = append(cur.commands, pending+line)
			pending = ""
		}
	}
	return out
}

// TestReadmeExamples runs every ```sh example of the README against a
// cluster of its own (rbs remote serve --workers 2), in a copy of
// examples/, with rbs on PATH and HOST:8980 standing for the server: each
// command must succeed, and a transcript's commands must print what it
// shows, with alice standing for the user who runs the test and the
// columns of a table compared by their words. Those that need what the test lacks are in readmeSkips, by name.
func TestReadmeExamples(t *testing.T) {
	examples := readmeExamples(t)
	if len(examples) < 5 {
		t.Fatalf("found %d ```sh examples in the README", len(examples))
	}
	used := map[string]bool{}
	for _, ex := range examples {
		text := strings.Join(ex.commands, "\n")
		skip := ""
		for part, why := range readmeSkips {
			if strings.Contains(text, part) {
				skip, used[part] = why, true
			}
		}
		t.Run("README.md:"+strings.TrimSpace(strings.Fields(text + " x")[0])+"@"+strconv.Itoa(ex.line), func(t *testing.T) {
			if skip != "" {
				t.Skipf("README.md:%d: %s", ex.line, skip)
			}
			srv := startServer(t, "--workers", "2")
			srv.waitRegistered(t, 2)
			dir := filepath.Join(t.TempDir(), "examples")
			copyTree(t, "../examples", dir)
			path := filepath.Dir(rbsBin) + string(os.PathListSeparator) + os.Getenv("PATH")
			for i, c := range ex.commands {
				c = strings.ReplaceAll(c, "HOST:8980", srv.Addr)
				cmd := exec.Command("sh", "-c", c)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "PATH="+path, "RBS_REMOTE="+srv.Addr, "RBS_REMOTE_TOKEN=")
				var stderr strings.Builder
				cmd.Stderr = &stderr
				got, err := cmd.Output()
				var ee *exec.ExitError
				if err != nil && !errors.As(err, &ee) {
					t.Fatal(err)
				}
				if err != nil {
					t.Fatalf("README.md:%d: %s: %v\n%s%s", ex.line, c, err, got, stderr.String())
				}
				if !ex.script && readmeWords(string(got)) != readmeWords(ex.outputs[i]) {
					t.Errorf("README.md:%d: %s printed\n%s\nwhere the README shows\n%s", ex.line, c, got, ex.outputs[i])
				}
			}
		})
	}
	for part := range readmeSkips {
		if !used[part] {
			t.Errorf("readmeSkips names %q, which no README example holds any more", part)
		}
	}
}

// trimLines drops the spaces at the ends of lines.
// readmeWords is output as a README transcript shows it: alice for the
// user running the test, and each line's words, its spacing aside (the
// width of a table's columns depends on the user's name).
func readmeWords(s string) string {
	if u, err := user.Current(); err == nil {
		s = regexp.MustCompile(`\b`+regexp.QuoteMeta(u.Username)+`\b`).ReplaceAllString(s, "alice")
	}
	lines := strings.Split(trimLines(s), "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func trimLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}
