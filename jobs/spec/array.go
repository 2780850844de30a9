package spec

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

const (
	// MaxArrayIndex is the largest task index an array may use.
	MaxArrayIndex = 999999
	// MaxArrayTasks is the most tasks one array may have.
	MaxArrayTasks = 100000
)

// Array is a parsed job array: the task indices to run and how many of them
// may run at once.
type Array struct {
	// Indices lists the task indices, ascending and without duplicates.
	Indices []int
	// Limit caps how many tasks run at the same time; 0 means no cap.
	Limit int
}

// ParseArray reads an array spec: comma-separated items, each "N", "A-B" or
// "A-B:STEP", optionally followed by "%LIMIT" at the very end, as in "0-99",
// "1,3,7", "0-15:4" or "1-3,7,10-12%2". Indices run from 0 to MaxArrayIndex,
// each may appear once, and there may be at most MaxArrayTasks of them.
// Surrounding spaces are ignored.
func ParseArray(s string) (Array, error) {
	a, err := parseArray(strings.TrimSpace(s))
	if err != nil {
		return Array{}, fmt.Errorf("invalid array %q: %v", s, err)
	}
	return a, nil
}

// span is one item of an array spec: start, start+step, ... up to end.
type span struct{ start, end, step int }

func (sp span) count() int { return (sp.end-sp.start)/sp.step + 1 }

func parseArray(t string) (Array, error) {
	if t == "" {
		return Array{}, errors.New("empty")
	}
	var a Array
	body, limit, hasLimit := strings.Cut(t, "%")
	if hasLimit {
		if strings.Contains(limit, "%") {
			return Array{}, errors.New("more than one %")
		}
		if body == "" {
			return Array{}, errors.New("no indices before %")
		}
		n, err := arrayNumber(limit, "limit", MaxArrayTasks)
		if err != nil {
			return Array{}, err
		}
		if n == 0 {
			return Array{}, errors.New("limit must be at least 1")
		}
		a.Limit = n
	}
	var spans []span
	total := 0
	for _, item := range strings.Split(body, ",") {
		sp, err := parseSpan(item)
		if err != nil {
			return Array{}, err
		}
		spans = append(spans, sp)
		total += sp.count()
	}
	if total > MaxArrayTasks {
		return Array{}, fmt.Errorf("too many tasks (%d, at most %d)", total, MaxArrayTasks)
	}
	a.Indices = make([]int, 0, total)
	for _, sp := range spans {
		for i := sp.start; i <= sp.end; i += sp.step {
			a.Indices = append(a.Indices, i)
		}
	}
	slices.Sort(a.Indices)
	for i := 1; i < len(a.Indices); i++ {
		if a.Indices[i] != a.Indices[i-1] {
			continue
		}
		n := 2
		for i+n-1 < len(a.Indices) && a.Indices[i+n-1] == a.Indices[i] {
			n++
		}
		if n == 2 {
			return Array{}, fmt.Errorf("index %d appears twice", a.Indices[i])
		}
		return Array{}, fmt.Errorf("index %d appears %d times", a.Indices[i], n)
	}
	return a, nil
}

// parseSpan reads one item: "N", "A-B" or "A-B:STEP".
func parseSpan(item string) (span, error) {
	if item == "" {
		return span{}, errors.New("empty item")
	}
	if item[0] == '-' {
		return span{}, fmt.Errorf("item %q: indices must not be negative", item)
	}
	rng, stepText, hasStep := strings.Cut(item, ":")
	first, last, isRange := strings.Cut(rng, "-")
	start, err := arrayNumber(first, "index", MaxArrayIndex)
	if err != nil {
		return span{}, err
	}
	sp := span{start: start, end: start, step: 1}
	if hasStep && !isRange {
		return span{}, fmt.Errorf("item %q: a step needs a range, as in 0-15:4", item)
	}
	if isRange {
		if sp.end, err = arrayNumber(last, "end of range", MaxArrayIndex); err != nil {
			return span{}, err
		}
		if sp.end < sp.start {
			return span{}, fmt.Errorf("range %q starts after it ends", rng)
		}
	}
	if hasStep {
		if sp.step, err = arrayNumber(stepText, "step", MaxArrayIndex); err != nil {
			return span{}, err
		}
		if sp.step == 0 {
			return span{}, errors.New("step must be at least 1")
		}
	}
	return sp, nil
}

// arrayNumber reads the non-negative integer text, named what, up to max.
func arrayNumber(text, what string, max int) (int, error) {
	if text == "" {
		return 0, fmt.Errorf("missing %s", what)
	}
	n, err := parseNat(text, int64(max))
	switch {
	case errors.Is(err, errTooLarge):
		return 0, fmt.Errorf("%s %s is above the maximum %d", what, text, max)
	case err != nil:
		return 0, fmt.Errorf("%s %q is not an integer", what, text)
	}
	return int(n), nil
}

// String gives the array back in a canonical compact spec that ParseArray
// accepts: consecutive indices become "A-B", evenly spaced runs of three or
// more become "A-B:STEP", and a cap is appended as "%LIMIT".
func (a Array) String() string {
	var b strings.Builder
	idx := a.Indices
	for i := 0; i < len(idx); {
		if i > 0 {
			b.WriteByte(',')
		}
		n := runLength(idx[i:])
		switch {
		case n >= 2 && idx[i+1]-idx[i] == 1:
			fmt.Fprintf(&b, "%d-%d", idx[i], idx[i+n-1])
		case n >= 3:
			fmt.Fprintf(&b, "%d-%d:%d", idx[i], idx[i+n-1], idx[i+1]-idx[i])
		default:
			n = 1
			fmt.Fprintf(&b, "%d", idx[i])
		}
		i += n
	}
	if a.Limit > 0 {
		fmt.Fprintf(&b, "%%%d", a.Limit)
	}
	return b.String()
}

// runLength is how many leading elements of x are evenly spaced.
func runLength(x []int) int {
	if len(x) < 2 {
		return len(x)
	}
	n := 2
	for n < len(x) && x[n]-x[n-1] == x[1]-x[0] {
		n++
	}
	return n
}
