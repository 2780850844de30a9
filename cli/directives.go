package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/google/shlex"
)

// ExpandDirectives gives the arguments of `rbs job submit --script FILE`
// with the flags of FILE's #RBS lines put in front of those typed, so that
// typed flags win, as with sbatch's #SBATCH lines. Directives are the
// "#RBS --flag value ..." lines among the comments and blank lines that
// open the script (after its #! line); the first other line ends them.
// Other command lines come back as they are.
func ExpandDirectives(args []string) ([]string, error) {
	words := 0
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if words == 0 && a != "job" || words == 1 && a != "submit" {
			return args, nil
		}
		if words++; words == 2 {
			path, ok := scriptFlag(args[i+1:])
			if !ok {
				return args, nil
			}
			flags, err := directives(path)
			if err != nil {
				return nil, err
			}
			return append(append(append([]string{}, args[:i+1]...), flags...), args[i+1:]...), nil
		}
	}
	return args, nil
}

// scriptFlag finds --script's value among submit's flags.
func scriptFlag(args []string) (string, bool) {
	for i, a := range args {
		switch {
		case a == "--":
			return "", false
		case a == "--script" && i+1 < len(args):
			return args[i+1], true
		case strings.HasPrefix(a, "--script="):
			return strings.TrimPrefix(a, "--script="), true
		}
	}
	return "", false
}

// directives reads a script's #RBS lines. Each must hold submit flags and
// nothing else; an error names the file and line. A script that cannot be
// read gives none, and --script's own check reports it.
func directives(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	var flags []string
	for n, line := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(line)
		if n == 0 && strings.HasPrefix(t, "#!") || t == "" {
			continue
		}
		if !strings.HasPrefix(t, "#") {
			break
		}
		rest, ok := strings.CutPrefix(t, "#RBS")
		if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			continue
		}
		words, err := shlex.Split(rest)
		if err == nil {
			err = checkDirective(words)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", path, n+1, t, err)
		}
		flags = append(flags, words...)
	}
	return flags, nil
}

// checkDirective parses one line's words as submit flags alone.
func checkDirective(words []string) error {
	for _, w := range words {
		if w == "--script" || strings.HasPrefix(w, "--script=") {
			return errors.New("--script cannot be given in #RBS lines")
		}
	}
	var d JobSubmitCmd
	k, err := kong.New(&d, kong.Exit(func(int) {}))
	if err != nil {
		return err
	}
	if _, err := k.Parse(words); err != nil {
		return err
	}
	if len(d.Command) > 0 {
		return fmt.Errorf("%q is not a submit flag; #RBS lines take flags only", d.Command[0])
	}
	// Check the values as a submission would, so that an error names the line.
	d.Command = []string{"true"}
	m, err := d.manifest()
	if err == nil {
		_, err = m.Job(1)
	}
	return flagError(err)
}
