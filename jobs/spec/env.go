package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Export is a parsed --export value: which of the submitter's environment
// variables a job starts with, as with Slurm's sbatch --export.
type Export struct {
	// All exports the whole environment except the Withheld variables.
	All bool
	// Names are exported by name, withheld or not.
	Names []string
	// Set holds variables given a value in the --export value itself.
	Set map[string]string
}

// Withheld reports whether ALL leaves out the variable named k: the token
// that authenticates the submitter, the variables rbs sets for each job
// (RBS_JOB_ID and the like; RBS_REMOTE passes, so that a job can submit
// more jobs), and those that describe the submitter's machine, session or
// user rather than the job, which the worker gives instead.
func Withheld(k string) bool {
	if strings.HasPrefix(k, "RBS_") {
		return k != "RBS_REMOTE"
	}
	for _, p := range machinePrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return slices.Contains(machineVars, k)
}

var (
	machineVars = []string{
		"HOME", "USER", "LOGNAME", "SHELL", "HOSTNAME", "PWD", "OLDPWD", "SHLVL", "TMPDIR", "_",
		"CUDA_VISIBLE_DEVICES", "DISPLAY", "DBUS_SESSION_BUS_ADDRESS",
	}
	machinePrefixes = []string{"SSH_", "XDG_"}
)

// ParseExport reads an --export value: "ALL", "NONE", or comma-separated
// items each "NAME" (exported from the submitter's environment) or
// "NAME=VALUE", optionally led by "ALL" as in "ALL,DEBUG=1". A value cannot
// hold a comma here; --env takes such values.
func ParseExport(s string) (Export, error) {
	e, err := parseExport(strings.TrimSpace(s))
	if err != nil {
		return Export{}, fmt.Errorf("invalid --export %q: %v", s, err)
	}
	return e, nil
}

func parseExport(t string) (Export, error) {
	switch t {
	case "":
		return Export{}, errors.New("empty; want ALL, NONE or variable names")
	case "ALL":
		return Export{All: true}, nil
	case "NONE":
		return Export{}, nil
	}
	e := Export{Set: map[string]string{}}
	for i, item := range strings.Split(t, ",") {
		if item == "ALL" && i == 0 {
			e.All = true
			continue
		}
		if item == "ALL" || item == "NONE" {
			return Export{}, fmt.Errorf("%s cannot be combined with other items except as ALL,NAME...", item)
		}
		k, v, hasValue := strings.Cut(item, "=")
		if err := checkEnvName(k); err != nil {
			return Export{}, err
		}
		if hasValue {
			e.Set[k] = v
		} else {
			e.Names = append(e.Names, k)
		}
	}
	return e, nil
}

// Env gives the variables a job gets from environ, the submitter's
// environment as "KEY=VALUE" strings.
func (e Export) Env(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			continue
		}
		if (e.All && !Withheld(k)) || slices.Contains(e.Names, k) {
			out[k] = v
		}
	}
	for k, v := range e.Set {
		out[k] = v
	}
	return out
}

// ParseEnvVar reads one --env value, "KEY=VALUE"; the value may hold
// anything, commas and "=" included.
func ParseEnvVar(s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return "", "", fmt.Errorf("invalid --env %q: want KEY=VALUE", s)
	}
	if err := checkEnvName(k); err != nil {
		return "", "", fmt.Errorf("invalid --env %q: %v", s, err)
	}
	return k, v, nil
}

// checkEnvName accepts the names a process environment can carry and a
// shell can set: letters, digits and underscores, not starting with a digit.
func checkEnvName(k string) error {
	if k == "" {
		return errors.New("empty variable name")
	}
	for i, r := range k {
		if r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return fmt.Errorf("variable name %q: want letters, digits and _, not starting with a digit", k)
	}
	return nil
}
