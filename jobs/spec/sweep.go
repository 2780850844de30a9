package spec

import (
	"fmt"
	"strings"
)

// MaxSweepValues bounds the values one sweep parameter takes.
const MaxSweepValues = 10000

// ParseSweep reads a --sweep value, NAME=V1,V2,...: a parameter and the
// values a sweep gives it.
func ParseSweep(s string) (string, []string, error) {
	name, list, ok := strings.Cut(s, "=")
	if !ok {
		return "", nil, fmt.Errorf("invalid sweep %q: want NAME=VALUE,VALUE..., such as lr=0.1,0.01", s)
	}
	if err := CheckSweepName(name); err != nil {
		return "", nil, fmt.Errorf("invalid sweep %q: %v", s, err)
	}
	values := strings.Split(list, ",")
	if err := CheckSweepValues(values); err != nil {
		return "", nil, fmt.Errorf("invalid sweep %q: %v", s, err)
	}
	return name, values, nil
}

// CheckSweepName checks a sweep parameter's name, which becomes part of an
// environment variable's (RBS_SWEEP_NAME) and is written {name} in
// arguments: a letter or underscore, then letters, digits or underscores.
func CheckSweepName(name string) error {
	ok := name != "" && len(name) <= 64
	for i, r := range name {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		ok = ok && (letter || i > 0 && r >= '0' && r <= '9')
	}
	if !ok {
		return fmt.Errorf("parameter name %q: want a letter or _, then letters, digits or _ (at most 64)", name)
	}
	return nil
}

// CheckSweepValues checks the values of a sweep parameter: at least one, at
// most MaxSweepValues, none empty or repeated or holding a NUL.
func CheckSweepValues(values []string) error {
	if len(values) == 0 || len(values) > MaxSweepValues {
		return fmt.Errorf("%d values: want 1 to %d", len(values), MaxSweepValues)
	}
	seen := map[string]bool{}
	for _, v := range values {
		switch {
		case v == "":
			return fmt.Errorf("an empty value: give each value between commas")
		case strings.ContainsRune(v, 0):
			return fmt.Errorf("value %q holds a NUL byte", v)
		case seen[v]:
			return fmt.Errorf("value %q is given twice", v)
		}
		seen[v] = true
	}
	return nil
}
