package session

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/rbs-build/rbs/rules"
	"github.com/rbs-build/rbs/starlark/label"
)

// Query evaluates a query expression over the target graph as BUILD files
// declare it (no analysis): a target pattern, deps(EXPR), or
// kind(REGEX, EXPR), nested freely. It returns labels, sorted.
func (s *Session) Query(expr string) ([]string, error) {
	ls, err := s.query(strings.TrimSpace(expr))
	if err != nil {
		return nil, err
	}
	return sortedLabels(ls), nil
}

func (s *Session) query(expr string) ([]label.Label, error) {
	switch {
	case strings.HasPrefix(expr, "deps(") && strings.HasSuffix(expr, ")"):
		inner, err := s.query(strings.TrimSpace(expr[len("deps(") : len(expr)-1]))
		if err != nil {
			return nil, err
		}
		return s.deps(inner)
	case strings.HasPrefix(expr, "kind(") && strings.HasSuffix(expr, ")"):
		args := expr[len("kind(") : len(expr)-1]
		i := strings.Index(args, ",")
		if i < 0 {
			return nil, fmt.Errorf("invalid query %q: kind takes a pattern and an expression", expr)
		}
		re, err := regexp.Compile(strings.Trim(strings.TrimSpace(args[:i]), `"'`))
		if err != nil {
			return nil, fmt.Errorf("invalid query %q: %v", expr, err)
		}
		inner, err := s.query(strings.TrimSpace(args[i+1:]))
		if err != nil {
			return nil, err
		}
		var out []label.Label
		for _, l := range inner {
			if k, err := s.kind(l); err == nil && re.MatchString(k) {
				out = append(out, l)
			}
		}
		return out, nil
	case strings.ContainsAny(expr, "()"):
		return nil, fmt.Errorf("invalid query %q: rbs query knows patterns, deps(...) and kind(...)", expr)
	}
	return s.ws.Expand(strings.Fields(expr), s.cwd)
}

// kind is what kind() matches: "genrule rule", "source file" or
// "generated file".
func (s *Session) kind(l label.Label) (string, error) {
	pkg, err := s.ws.Package(l.Pkg)
	if err != nil {
		return "", err
	}
	if t, ok := pkg.Targets[l.Name]; ok {
		return t.Kind(), nil
	}
	if _, ok := pkg.Outputs[l.Name]; ok {
		return "generated file", nil
	}
	return "source file", nil
}

// deps returns the labels and everything they depend on through label
// attributes.
func (s *Session) deps(roots []label.Label) ([]label.Label, error) {
	seen := map[string]bool{}
	var out []label.Label
	var visit func(l label.Label) error
	visit = func(l label.Label) error {
		if seen[l.String()] {
			return nil
		}
		seen[l.String()] = true
		out = append(out, l)
		pkg, err := s.ws.Package(l.Pkg)
		if err != nil {
			return err
		}
		t, ok := pkg.Targets[l.Name]
		if !ok {
			if owner, ok := pkg.Outputs[l.Name]; ok {
				return visit(label.Label{Pkg: l.Pkg, Name: owner})
			}
			return nil
		}
		for _, dep := range rules.DepLabels(t) {
			if err := visit(dep); err != nil {
				return err
			}
		}
		return nil
	}
	for _, r := range roots {
		if err := visit(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}
