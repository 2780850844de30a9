package sched

// Topology-aware gangs. Workers carry topology labels as properties
// ("rack=r7", "block=b2"). A gang that asks to be packed by a label
// (--pack rack) is placed in the fewest domains of it, the workers that
// share the label's value: in one when one has room for all its nodes
// (the one with the least room that does, keeping the roomy ones for
// larger gangs), else over the roomiest first. With --pack-required it
// waits for one domain to have room rather than spread. A worker without
// the label is a domain of its own.

import (
	"fmt"
	"sort"
	"time"
)

// label returns the value of w's topology label key, and whether w has
// it.
func (w *worker) label(key string) (string, bool) {
	value, ok := w.labels[key]
	return value, ok
}

// domains groups candidates, tightest first, by the value of label key,
// keeping their order within each; the domains are ordered by their
// first (tightest) candidate.
func domains(ok []scored, key string) [][]scored {
	var out [][]scored
	at := map[string]int{}
	for _, s := range ok {
		value, has := s.w.label(key)
		if !has {
			out = append(out, []scored{s})
			continue
		}
		i, seen := at[value]
		if !seen {
			i = len(out)
			at[value] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], s)
	}
	return out
}

// packed picks the workers of a packed gang from its candidates: all in
// one domain when one has room for all its nodes, else (unless the pack is
// required) from the roomiest domains first; nil when it cannot start.
func packed(j *job, ok []scored) []*worker {
	nodes, least := nodesOf(j.spec), minNodesOf(j.spec)
	ds := domains(ok, j.spec.Pack)
	best := -1
	for i, d := range ds {
		if len(d) >= nodes && (best < 0 || len(d) < len(ds[best])) {
			best = i
		}
	}
	if best >= 0 {
		return pick(j, ds[best])
	}
	sort.SliceStable(ds, func(a, b int) bool { return len(ds[a]) > len(ds[b]) })
	if j.spec.PackRequired {
		if len(ds) > 0 && len(ds[0]) >= least {
			return pick(j, ds[0]) // an elastic gang: as many as one domain holds
		}
		return nil
	}
	var spread []scored
	for _, d := range ds {
		spread = append(spread, d...)
	}
	return pick(j, spread)
}

// packReason says why a gang that must be packed waits while it would fit
// spread: no domain has room for it.
func packReason(j *job, ok []scored) string {
	return fmt.Sprintf("%s: no %s has %d free workers that fit the job (the most: %d)", ReasonTopology, j.spec.Pack, minNodesOf(j.spec), largestDomain(ok, j.spec.Pack))
}

// largestDomain is how many of the candidates the largest domain of label
// key holds.
func largestDomain(ok []scored, key string) int {
	most := 0
	for _, d := range domains(ok, key) {
		most = max(most, len(d))
	}
	return most
}

// packable is placeable's answer for a gang that must be packed: a
// pending reason when no domain has enough workers that could ever run
// it.
func (c *Core) packable(j *job, workers []*worker) string {
	var ok []scored
	for _, w := range workers {
		if c.fits(j, w, ever) {
			ok = append(ok, scored{w: w})
		}
	}
	most := largestDomain(ok, j.spec.Pack)
	if most >= minNodesOf(j.spec) {
		return ""
	}
	return fmt.Sprintf("%s: no %s has %d workers that could run the job (the most: %d)", ReasonTopology, j.spec.Pack, minNodesOf(j.spec), most)
}

// packWait is why the gang j, which must be packed and cannot start, waits
// when it would start were it not packed (packReason); "" when it would
// not start either way.
func (c *Core) packWait(j *job, open []*worker, res *reservation, now time.Time) string {
	ok, _ := c.topCandidates(j, open, res, now, current, len(open))
	if pick(j, ok) == nil {
		return ""
	}
	return packReason(j, ok)
}
