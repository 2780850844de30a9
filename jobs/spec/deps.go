package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// DepKind says which outcome of another job a dependency waits for.
type DepKind string

// The dependency kinds, spelled as in Slurm.
const (
	// AfterOK waits until the other job has succeeded.
	AfterOK DepKind = "afterok"
	// AfterAny waits until the other job has ended, however it ended.
	AfterAny DepKind = "afterany"
	// AfterNotOK waits until the other job has failed.
	AfterNotOK DepKind = "afternotok"
)

var depKinds = []DepKind{AfterOK, AfterAny, AfterNotOK}

// Dep is one dependency: start only after job ID ends in the way Kind asks.
type Dep struct {
	// Kind is the outcome waited for.
	Kind DepKind
	// ID is the job, or array task, waited on.
	ID JobID
}

// String gives the dependency in Slurm's syntax, as in "afterok:12".
func (d Dep) String() string { return string(d.Kind) + ":" + d.ID.String() }

// ParseDeps reads dependencies in Slurm's syntax: comma-separated
// "kind:ID[:ID...]" items, as in "afterok:12,afterany:13:14" or
// "afternotok:15_3", giving one Dep per id in the order written. The same
// kind and id may appear only once. Surrounding spaces are ignored.
func ParseDeps(s string) ([]Dep, error) {
	deps, err := parseDeps(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("invalid dependency %q: %v", s, err)
	}
	return deps, nil
}

func parseDeps(t string) ([]Dep, error) {
	if t == "" {
		return nil, errors.New("empty")
	}
	var deps []Dep
	seen := make(map[Dep]bool)
	for _, item := range strings.Split(t, ",") {
		if item == "" {
			return nil, errors.New("empty item")
		}
		kindText, ids, _ := strings.Cut(item, ":")
		kind := DepKind(kindText)
		if !slices.Contains(depKinds, kind) {
			return nil, fmt.Errorf("unknown kind %q (use afterok, afterany or afternotok)", kindText)
		}
		if ids == "" {
			return nil, fmt.Errorf("%s needs a job id, as in %s:12", kind, kind)
		}
		for _, idText := range strings.Split(ids, ":") {
			id, err := parseJobID(idText)
			if err != nil {
				return nil, fmt.Errorf("job id %q: %v", idText, err)
			}
			d := Dep{Kind: kind, ID: id}
			if seen[d] {
				return nil, fmt.Errorf("%s appears twice", d)
			}
			seen[d] = true
			deps = append(deps, d)
		}
	}
	return deps, nil
}
