package session

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/rbs-build/rbs/rules"
	"github.com/rbs-build/rbs/starlark/label"
	"go.starlark.net/starlark"
)

// Query evaluates a query expression over the target graph as BUILD files
// declare it (no analysis), in Bazel's query language: target patterns
// (several, and "-pattern", side by side), the functions deps(x[, depth]),
// rdeps(universe, x[, depth]), kind(regex, x), tests(x) and
// attr(name, regex, x), the operators + (union), - (except) and ^
// (intersect), and parentheses. It returns labels, sorted.
// somepath(from, to) is the targets of one path of dependencies from a
// target of from to one of to, allpaths(from, to) those of every such
// path. Without implicit, deps leave out what private attributes (_name)
// depend on, as Bazel's --noimplicit_deps does.
func (s *Session) Query(expr string, implicit bool) ([]label.Label, error) {
	p := &queryParser{s: s, text: expr, toks: lexQuery(expr), implicit: implicit}
	ls, err := p.expr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEnd {
		return nil, p.errorAt(t, "unexpected %q", t.text)
	}
	ls = slices.Clone(ls)
	slices.SortFunc(ls, func(a, b label.Label) int { return strings.Compare(a.String(), b.String()) })
	return ls, nil
}

type tokKind int

const (
	tokEnd tokKind = iota
	tokWord
	tokString // a quoted word
	tokPunct  // ( ) ,
	tokBad    // an unclosed quote
)

type queryTok struct {
	kind tokKind
	text string
	col  int // 1-based column of its first character
}

// lexQuery splits a query into words, quoted strings and ( ) ,.
func lexQuery(s string) []queryTok {
	var toks []queryTok
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case unicode.IsSpace(rune(c)):
			i++
		case c == '(' || c == ')' || c == ',':
			toks = append(toks, queryTok{tokPunct, s[i : i+1], i + 1})
			i++
		case c == '"' || c == '\'':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return append(toks, queryTok{tokBad, s[i:], i + 1})
			}
			toks = append(toks, queryTok{tokString, s[i+1 : i+1+j], i + 1})
			i += j + 2
		default:
			j := i
			for j < len(s) && !unicode.IsSpace(rune(s[j])) && !strings.ContainsRune("(),\"'", rune(s[j])) {
				j++
			}
			toks = append(toks, queryTok{tokWord, s[i:j], i + 1})
			i = j
		}
	}
	return append(toks, queryTok{tokEnd, "", len(s) + 1})
}

type queryParser struct {
	s        *Session
	text     string
	toks     []queryTok
	pos      int
	implicit bool // deps through private attributes too
}

func (p *queryParser) peek() queryTok { return p.toks[p.pos] }

func (p *queryParser) next() queryTok {
	t := p.toks[p.pos]
	if t.kind != tokEnd {
		p.pos++
	}
	return t
}

// errorAt is a syntax error at t's column, shown under the query.
func (p *queryParser) errorAt(t queryTok, format string, args ...any) error {
	if t.kind == tokEnd {
		format = "unexpected end of query: " + format
	}
	return fmt.Errorf("invalid query at column %d: %s\n  %s\n  %s^", t.col, fmt.Sprintf(format, args...), p.text, strings.Repeat(" ", t.col-1))
}

// queryOps are the binary operators, all of one precedence and left
// associative, as in Bazel.
var queryOps = map[string]string{"+": "union", "union": "union", "-": "except", "except": "except", "^": "intersect", "intersect": "intersect"}

func (p *queryParser) expr() ([]label.Label, error) {
	ls, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		op, ok := queryOps[t.text]
		if t.kind != tokWord || !ok {
			return ls, nil
		}
		p.next()
		rhs, err := p.term()
		if err != nil {
			return nil, err
		}
		in := map[string]bool{}
		for _, l := range rhs {
			in[l.String()] = true
		}
		switch op {
		case "union":
			ls = union(ls, rhs)
		case "except":
			ls = slices.DeleteFunc(slices.Clone(ls), func(l label.Label) bool { return in[l.String()] })
		case "intersect":
			ls = slices.DeleteFunc(slices.Clone(ls), func(l label.Label) bool { return !in[l.String()] })
		}
	}
}

// queryFuncs are the functions and their arguments: e an expression, w a
// word, n an optional depth.
var queryFuncs = map[string]string{"deps": "en", "rdeps": "een", "kind": "we", "tests": "e", "attr": "wwe", "somepath": "ee", "allpaths": "ee"}

func (p *queryParser) term() ([]label.Label, error) {
	t := p.peek()
	switch {
	case t.kind == tokBad:
		return nil, p.errorAt(t, "unclosed quote")
	case t.text == "(" && t.kind == tokPunct:
		p.next()
		ls, err := p.expr()
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.text != ")" || c.kind != tokPunct {
			return nil, p.errorAt(c, "want ) to close the ( at column %d", t.col)
		}
		return ls, nil
	case t.kind == tokWord && p.toks[p.pos+1].text == "(" && p.toks[p.pos+1].kind == tokPunct:
		return p.call()
	case t.kind == tokWord && queryOps[t.text] == "" || t.kind == tokString:
		// Patterns side by side, "-pattern" taking targets out.
		var patterns []string
		for t := p.peek(); t.kind == tokString || t.kind == tokWord && queryOps[t.text] == "" && p.toks[p.pos+1].text != "("; t = p.peek() {
			patterns = append(patterns, p.next().text)
		}
		ls, err := p.s.ws.Expand(patterns, p.s.cwd)
		if err != nil {
			return nil, p.errorAt(t, "%v", err)
		}
		return ls, nil
	}
	return nil, p.errorAt(t, "want a target pattern, a function such as deps(...), or (")
}

// call parses and evaluates a function call.
func (p *queryParser) call() ([]label.Label, error) {
	name := p.next()
	sig, ok := queryFuncs[name.text]
	if !ok {
		return nil, p.errorAt(name, "unknown function %s (rbs query has %s)", name.text, strings.Join(sortedNames(queryFuncs), ", "))
	}
	p.next() // (
	var sets [][]label.Label
	var words []string
	depth := -1
	for i, a := range sig {
		if i > 0 {
			c := p.peek()
			if a == 'n' && c.text == ")" {
				break
			}
			if c.text != "," || c.kind != tokPunct {
				if a == 'n' {
					return nil, p.errorAt(c, "want ) to close %s(, or , then a depth", name.text)
				}
				return nil, p.errorAt(c, "want , then the next argument of %s", name.text)
			}
			p.next()
		}
		switch a {
		case 'e':
			ls, err := p.expr()
			if err != nil {
				return nil, err
			}
			sets = append(sets, ls)
		case 'w':
			w := p.next()
			if w.kind != tokWord && w.kind != tokString {
				return nil, p.errorAt(w, "want a word or a quoted string as an argument of %s", name.text)
			}
			words = append(words, w.text)
		case 'n':
			d := p.next()
			n, err := strconv.Atoi(d.text)
			if err != nil || n < 0 {
				return nil, p.errorAt(d, "want a depth, a whole number, as the last argument of %s", name.text)
			}
			depth = n
		}
	}
	if c := p.next(); c.text != ")" || c.kind != tokPunct {
		return nil, p.errorAt(c, "want ) to close %s(", name.text)
	}
	regex := func(i int) (*regexp.Regexp, error) {
		re, err := regexp.Compile(words[i])
		if err != nil {
			return nil, p.errorAt(name, "%s: invalid regular expression %q: %v", name.text, words[i], err)
		}
		return re, nil
	}
	g := &depGraph{s: p.s, implicit: p.implicit}
	switch name.text {
	case "deps":
		return g.deps(sets[0], depth)
	case "rdeps":
		return g.rdeps(sets[0], sets[1], depth)
	case "somepath":
		return g.somepath(sets[0], sets[1])
	case "allpaths":
		return g.allpaths(sets[0], sets[1])
	case "kind":
		re, err := regex(0)
		if err != nil {
			return nil, err
		}
		return p.s.filter(sets[0], func(l label.Label, t *rules.TargetDef) bool {
			k, err := p.s.Kind(l)
			return err == nil && re.MatchString(k)
		}), nil
	case "tests":
		return p.s.filter(sets[0], func(l label.Label, t *rules.TargetDef) bool { return t != nil && t.IsTest() }), nil
	default: // attr
		re, err := regex(1)
		if err != nil {
			return nil, err
		}
		return p.s.filter(sets[0], func(l label.Label, t *rules.TargetDef) bool {
			v, ok := attrValue(t, words[0])
			return ok && re.MatchString(v)
		}), nil
	}
}

// attrValue is the value of a target's attribute as attr() matches it:
// a string as it is, a list as [a, b], anything else as Starlark prints it.
func attrValue(t *rules.TargetDef, name string) (string, bool) {
	if t == nil {
		return "", false
	}
	if name == "tags" {
		return "[" + strings.Join(t.Tags, ", ") + "]", true
	}
	v, ok := t.Attrs[name]
	if !ok {
		return "", false
	}
	switch v := v.(type) {
	case starlark.String:
		return string(v), true
	case *starlark.List:
		items := make([]string, v.Len())
		for i := range items {
			if s, ok := v.Index(i).(starlark.String); ok {
				items[i] = string(s)
			} else {
				items[i] = v.Index(i).String()
			}
		}
		return "[" + strings.Join(items, ", ") + "]", true
	}
	return v.String(), true
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func union(a, b []label.Label) []label.Label {
	seen := map[string]bool{}
	var out []label.Label
	for _, l := range append(slices.Clone(a), b...) {
		if !seen[l.String()] {
			seen[l.String()] = true
			out = append(out, l)
		}
	}
	return out
}

// Target is the rule target l names, nil for a file.
func (s *Session) Target(l label.Label) (*rules.TargetDef, error) {
	pkg, err := s.ws.Package(l.Pkg)
	if err != nil {
		return nil, err
	}
	return pkg.Targets[l.Name], nil
}

// filter keeps the labels for which keep holds.
func (s *Session) filter(ls []label.Label, keep func(label.Label, *rules.TargetDef) bool) []label.Label {
	var out []label.Label
	for _, l := range ls {
		if t, err := s.Target(l); err == nil && keep(l, t) {
			out = append(out, l)
		}
	}
	return out
}

// Kind is what kind() matches: "genrule rule", "source file" or
// "generated file".
func (s *Session) Kind(l label.Label) (string, error) {
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

// depGraph is the target graph as BUILD files declare it, read as a
// query walks it.
type depGraph struct {
	s        *Session
	implicit bool // through private attributes too
}

// directDeps are what l depends on directly: a rule's label attributes,
// a generated file's rule.
func (g *depGraph) directDeps(l label.Label) ([]label.Label, error) {
	pkg, err := g.s.ws.Package(l.Pkg)
	if err != nil {
		return nil, err
	}
	if t, ok := pkg.Targets[l.Name]; ok {
		return rules.DepLabels(t, g.implicit), nil
	}
	if owner, ok := pkg.Outputs[l.Name]; ok {
		return []label.Label{{Pkg: l.Pkg, Name: owner}}, nil
	}
	return nil, nil
}

// deps returns the labels and everything they depend on, up to depth
// edges away (-1: any).
func (g *depGraph) deps(roots []label.Label, depth int) ([]label.Label, error) {
	seen := map[string]bool{}
	var out []label.Label
	frontier := roots
	for d := 0; len(frontier) > 0 && (depth < 0 || d <= depth); d++ {
		var next []label.Label
		for _, l := range frontier {
			if seen[l.String()] {
				continue
			}
			seen[l.String()] = true
			out = append(out, l)
			ds, err := g.directDeps(l)
			if err != nil {
				return nil, err
			}
			next = append(next, ds...)
		}
		frontier = next
	}
	return out, nil
}

// users maps each target of deps(universe) to those of it that depend on
// it directly; all is deps(universe).
func (g *depGraph) users(universe []label.Label) (all []label.Label, users map[string][]label.Label, err error) {
	if all, err = g.deps(universe, -1); err != nil {
		return nil, nil, err
	}
	users = map[string][]label.Label{}
	for _, l := range all {
		ds, err := g.directDeps(l)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range ds {
			users[d.String()] = append(users[d.String()], l)
		}
	}
	return all, users, nil
}

// rdeps returns the targets of deps(universe) that depend on one of
// targets, those included, up to depth edges away (-1: any).
func (g *depGraph) rdeps(universe, targets []label.Label, depth int) ([]label.Label, error) {
	all, users, err := g.users(universe)
	if err != nil {
		return nil, err
	}
	inUniverse := map[string]bool{}
	for _, l := range all {
		inUniverse[l.String()] = true
	}
	seen := map[string]bool{}
	var out []label.Label
	frontier := targets
	for d := 0; len(frontier) > 0 && (depth < 0 || d <= depth); d++ {
		var next []label.Label
		for _, l := range frontier {
			if seen[l.String()] || !inUniverse[l.String()] {
				continue
			}
			seen[l.String()] = true
			out = append(out, l)
			next = append(next, users[l.String()]...)
		}
		frontier = next
	}
	return out, nil
}

// allpaths returns the targets on every path of dependencies from one of
// from to one of to: those of deps(from) that depend on one of to.
func (g *depGraph) allpaths(from, to []label.Label) ([]label.Label, error) {
	return g.rdeps(from, to, -1)
}

// somepath returns the targets of one shortest path of dependencies
// from one of from to one of to; none when there is none.
func (g *depGraph) somepath(from, to []label.Label) ([]label.Label, error) {
	goal := map[string]bool{}
	for _, l := range to {
		goal[l.String()] = true
	}
	prev := map[string]label.Label{}
	seen := map[string]bool{}
	frontier := from
	for _, l := range from {
		seen[l.String()] = true
	}
	for len(frontier) > 0 {
		var next []label.Label
		for _, l := range frontier {
			if goal[l.String()] {
				path := []label.Label{l}
				for p, ok := prev[l.String()]; ok; p, ok = prev[p.String()] {
					path = append(path, p)
				}
				slices.Reverse(path)
				return path, nil
			}
			ds, err := g.directDeps(l)
			if err != nil {
				return nil, err
			}
			for _, d := range ds {
				if !seen[d.String()] {
					seen[d.String()] = true
					prev[d.String()] = l
					next = append(next, d)
				}
			}
		}
		frontier = next
	}
	return nil, nil
}
