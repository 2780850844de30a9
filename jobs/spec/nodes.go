package spec

import (
	"fmt"
	"strings"
)

// maxNodeCount bounds a node count as typed; the manifest's own bound is
// checked with the rest of the job.
const maxNodeCount = 1 << 20

// ParseNodes reads a node count as sbatch's -N takes it: "4" for four
// nodes, or "2-4" for at least two and at most four (an elastic job).
func ParseNodes(s string) (lo, hi int, err error) {
	t := strings.TrimSpace(s)
	a, b, ranged := strings.Cut(t, "-")
	lo64, err := parseNat(a, maxNodeCount)
	if err == nil {
		hi64 := lo64
		if ranged {
			hi64, err = parseNat(b, maxNodeCount)
		}
		lo, hi = int(lo64), int(hi64)
	}
	switch {
	case err != nil:
		return 0, 0, fmt.Errorf("node count %q: %v; want N or MIN-MAX, such as 4 or 2-4", s, err)
	case lo < 1:
		return 0, 0, fmt.Errorf("node count %q: want at least 1", s)
	case hi < lo:
		return 0, 0, fmt.Errorf("node count %q: the minimum is above the maximum", s)
	}
	return lo, hi, nil
}
