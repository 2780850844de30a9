package cli

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// exited is how a test's kong.Exit stops a parse that printed help.
type exited struct{}

// helpOf is what parsing args with the parser k makes prints, --help
// included, and what parsing them returns.
func helpOf(t *testing.T, k func(...kong.Option) (*kong.Kong, func(), error), args []string) string {
	t.Helper()
	var out bytes.Buffer
	p, done, err := k(kong.Writers(&out, &out), kong.Exit(func(int) { panic(exited{}) }))
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil && r != (exited{}) {
				panic(r)
			}
		}()
		if _, err := p.Parse(args); err != nil {
			out.WriteString("error: " + err.Error())
		} else {
			done()
		}
	}()
	return out.String()
}

// TestGrammarOfOneCommand: a command line that names a command group, or
// one of its commands, is parsed with a grammar of that group or command
// alone, and reads as it would with every command's: each command's help is
// the same, and so are the errors a wrong command line gets and the values
// a right one sets in the CLI.
func TestGrammarOfOneCommand(t *testing.T) {
	var all CLI
	full, err := kong.New(&all, Options()...)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	var walk func(n *kong.Node)
	walk = func(n *kong.Node) {
		for _, c := range n.Children {
			if c.Type == kong.CommandNode {
				lines = append(lines, append(strings.Fields(c.FullPath())[1:], "--help"))
				walk(c)
			}
		}
	}
	walk(full.Model.Node)
	if len(lines) < 20 {
		t.Fatalf("walked %d commands; the tree has more", len(lines))
	}
	lines = append(lines,
		[]string{"job", "submit", "--cpus", "four", "--", "true"},
		[]string{"job", "lst"},
		[]string{"job", "submit", "--bogus"},
		[]string{"remote", "serve", "--listen"},
		[]string{"build", "--bogus"},
		[]string{"remote", "serve", "--help"},
		[]string{"--version"},
	)
	for _, args := range lines {
		var lean, every CLI
		got := helpOf(t, func(o ...kong.Option) (*kong.Kong, func(), error) { return New(&lean, args, o...) }, args)
		want := helpOf(t, func(o ...kong.Option) (*kong.Kong, func(), error) {
			k, err := kong.New(&every, append(Options(), o...)...)
			return k, func() {}, err
		}, args)
		if got != want {
			t.Errorf("rbs %s with one group's grammar printed\n%s\nwith every group's\n%s", strings.Join(args, " "), got, want)
		}
	}

	var lean, every CLI
	args := []string{"job", "submit", "--cpus", "3", "-J", "n", "--array", "0-9%2", "--", "sh", "-c", "exit 3"}
	k, done, err := New(&lean, args)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Parse(args); err != nil {
		t.Fatal(err)
	}
	done()
	if k, err = kong.New(&every, Options()...); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Parse(args); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(lean.Job.Submit, every.Job.Submit) || lean.Job.Submit.CPUs != 3 {
		t.Errorf("one group's grammar set %+v; every group's %+v", lean.Job.Submit, every.Job.Submit)
	}
}
