// Package spell finds what a misspelt name was meant to be, for the "did
// you mean" of errors about unknown rules, attributes and targets.
package spell

import "strings"

// Nearest returns the candidate closest to name in edit distance, ignoring
// case, when it is close enough to be a likely misspelling (at most a
// third of name's letters apart, and at least one); "" when none is.
func Nearest(name string, candidates []string) string {
	best, bestD := "", max(1, len(name)/3)+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		if d := distance(strings.ToLower(name), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean is " (did you mean X?)" for Nearest's X, "" when there is none.
func DidYouMean(name string, candidates []string) string {
	if n := Nearest(name, candidates); n != "" {
		return " (did you mean " + n + "?)"
	}
	return ""
}

// distance is the edit distance between a and b, in bytes, a swap of two
// neighbours counting as one edit (optimal string alignment).
func distance(a, b string) int {
	rows := [3][]int{make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)}
	for j := range rows[1] {
		rows[1][j] = j
	}
	for i := 1; i <= len(a); i++ {
		prev2, prev, cur := rows[0], rows[1], rows[2]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		rows = [3][]int{prev, cur, prev2}
	}
	return rows[1][len(b)]
}
