package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
	"github.com/google/shlex"
)

// ExpandDirectives gives the arguments of `rbs job submit` with a script,
// --script FILE or, as with sbatch, a local script file given as the
// command (see scriptOf), with the flags of the script's directives put in
// front of those typed, so that typed flags win, as with sbatch. Directives
// are the "#RBS --flag value ..." and "#SBATCH --option=value ..." lines
// among the comments and blank lines that open the script (after its #!
// line); the first other line ends them. What they hold that rbs ignores
// is said to warn. Other command lines come back as they are.
func ExpandDirectives(args []string, warn io.Writer) ([]string, error) {
	words := 0
	for i, a := range args {
		if strings.HasPrefix(a, "-") {
			continue
		}
		if words == 0 && a != "job" || words == 1 && a != "submit" {
			return args, nil
		}
		if words++; words == 2 {
			rest, path := scriptOf(args[i+1:])
			if path == "" {
				return args, nil
			}
			flags, err := directives(path, warn)
			if err != nil {
				return nil, err
			}
			return append(append(append([]string{}, args[:i+1]...), flags...), rest...), nil
		}
	}
	return args, nil
}

// scriptOf finds the script among submit's arguments args: --script's
// value, or a local script file named as the command without -- before it
// (the sbatch habit, `rbs job submit ./run.sh ARGS`), for which it returns
// args as --script FILE -- ARGS. It finds none when args do not parse: the
// command line's own parse then says why.
func scriptOf(args []string) (_ []string, path string) {
	if !slices.ContainsFunc(args, mayBeScript) {
		return args, "" // most submissions: no need to parse them twice
	}
	d, err := parseSubmit(args)
	if err != nil {
		return args, ""
	}
	if d.Script != "" {
		return args, d.Script
	}
	cmd := d.Command
	if len(cmd) == 0 || cmd[0] == "--" || !isScript(cmd[0]) {
		return args, ""
	}
	extra := cmd[1:]
	if len(extra) > 0 && extra[0] == "--" {
		extra = extra[1:]
	}
	flags := args[:len(args)-len(cmd)]
	return append(append(append([]string{}, flags...), "--script", cmd[0], "--"), extra...), cmd[0]
}

// mayBeScript reports whether arg may be how submit's arguments name a
// script: --script, or a script file itself.
func mayBeScript(arg string) bool {
	return arg == "--script" || strings.HasPrefix(arg, "--script=") || isScript(arg)
}

// isScript reports whether path names a local script file: a regular file
// that opens with a #! line, as sbatch asks of the scripts it takes.
func isScript(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return false
	}
	head := make([]byte, 2)
	_, err = io.ReadFull(f, head)
	return err == nil && string(head) == "#!"
}

// parseSubmit parses args as submit's flags and arguments alone, quietly
// (a --help among them prints nothing): a look at them apart from the
// command line's own parse.
func parseSubmit(args []string) (*JobSubmitCmd, error) {
	var d JobSubmitCmd
	k, err := kong.New(&d, kong.Exit(func(int) {}), kong.Writers(io.Discard, io.Discard))
	if err != nil {
		return nil, err
	}
	if _, err := k.Parse(args); err != nil {
		return nil, err
	}
	return &d, nil
}

// directives reads a script's #RBS and #SBATCH lines. An #RBS line must
// hold submit flags and nothing else; an #SBATCH line holds sbatch options,
// those rbs has an equivalent of becoming its flags (sbatchFlags), the
// others ignored with a warning to warn that names the line and the option.
// An error names the file and line. A script that cannot be read gives
// none, and --script's own check reports it.
func directives(path string, warn io.Writer) ([]string, error) {
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
		rbs, isRBS := directive(t, "#RBS")
		sbatch, isSbatch := directive(t, "#SBATCH")
		if !isRBS && !isSbatch {
			continue
		}
		words, err := shlex.Split(rbs + sbatch)
		var ignored []string
		if err == nil && isSbatch {
			words, ignored, err = sbatchFlags(words)
		}
		if err == nil {
			err = checkDirective(words)
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", path, n+1, t, err)
		}
		for _, o := range ignored {
			fmt.Fprintf(warn, "rbs: warning: %s:%d: %s: ignored %s, which rbs has no equivalent of\n", path, n+1, t, o)
		}
		flags = append(flags, words...)
	}
	return flags, nil
}

// directive returns what follows the word prefix, such as #RBS, that opens
// the comment t, and whether it does.
func directive(t, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(t, prefix)
	if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false
	}
	return rest, true
}

// sbatchOptions are the sbatch options rbs has an equivalent of, by their
// long and short names, with the submit flag each becomes ("" for
// --requeue, which is what rbs does anyway).
var sbatchOptions = map[string]string{
	"--job-name": "--name", "-J": "--name",
	"--partition": "--queue", "-p": "--queue",
	"--cpus-per-task": "--cpus", "-c": "--cpus",
	"--time": "--time", "-t": "--time",
	"--dependency": "--deps", "-d": "--deps",
	"--array": "--array", "-a": "--array",
	"--nodes": "--nodes", "-N": "--nodes",
	"--gpus": "--gpus", "-G": "--gpus",
	"--mem":        "--mem",
	"--export":     "--export",
	"--no-requeue": "--no-requeue",
	"--requeue":    "",
}

// sbatchSwitches are the sbatchOptions that take no value.
var sbatchSwitches = map[string]bool{"--no-requeue": true, "--requeue": true}

// sbatchFlags turns the words of an #SBATCH line into submit flags, and
// names the options it ignores: those rbs has no equivalent of (with the
// words after them up to the next option, their values) and words that are
// no option at all.
func sbatchFlags(words []string) (flags, ignored []string, err error) {
	for i := 0; i < len(words); i++ {
		w := words[i]
		name, value, hasValue := w, "", false
		switch {
		case strings.HasPrefix(w, "--"):
			name, value, hasValue = strings.Cut(w, "=")
		case strings.HasPrefix(w, "-") && len(w) > 2:
			name, value, hasValue = w[:2], w[2:], true
		}
		flag, ok := sbatchOptions[name]
		if !ok {
			ignored = append(ignored, name)
			for i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++
			}
			continue
		}
		switch {
		case sbatchSwitches[name]:
			if hasValue {
				return nil, nil, fmt.Errorf("%s takes no value", name)
			}
			if flag != "" {
				flags = append(flags, flag)
			}
			continue
		case !hasValue && i+1 == len(words):
			return nil, nil, fmt.Errorf("%s needs a value", name)
		case !hasValue:
			i++
			value = words[i]
		}
		flags = append(flags, flag+"="+value)
	}
	return flags, ignored, nil
}

// checkDirective parses one line's words as submit flags alone.
func checkDirective(words []string) error {
	for _, w := range words {
		if w == "--script" || strings.HasPrefix(w, "--script=") {
			return errors.New("--script cannot be given in #RBS lines")
		}
	}
	d, err := parseSubmit(words)
	if err != nil {
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
