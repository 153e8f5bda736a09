// Package suggest finds the likely intended word for a typo: "did you
// mean ...?" in spec diagnostics, unknown commands and type names.
package suggest

import (
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate closest to s by edit distance, when it is
// close enough to be a likely typo, or "".
func Closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := 1
	if utf8.RuneCountInString(best) >= 5 {
		limit = 2
	}
	if utf8.RuneCountInString(best) >= 10 {
		limit = 3
	}
	if best == "" || bestD > limit {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 64 || len(rb) > 64 {
		if a == b {
			return 0
		}
		return max(len(ra), len(rb))
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
