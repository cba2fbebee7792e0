// Package suggest finds the known name a mistyped one was meant to be,
// for the "did you mean" of commands, flags, settings, skills and shell
// commands. One rule serves them all, so every surface suggests alike.
package suggest

import (
	"strings"

	"github.com/agnivade/levenshtein"
)

// Nearest is the candidate closest to word by edit distance (Levenshtein,
// case-insensitive) when it is close enough to be a slip: a third of
// word's length in edits, at least 2 from four letters up (a swapped pair,
// "pnig") and 1 below (two edits of "xk" is another word), none for one
// letter ("-v" is not a slip of "-h"). It
// returns "" when nothing is that close, or when word is itself a
// candidate. Ties go to the earlier candidate, so callers pass them in a
// stable order.
func Nearest(word string, candidates []string) string {
	if word == "" {
		return ""
	}
	w := strings.ToLower(word)
	limit := max(1, len(w)/3)
	switch {
	case len([]rune(w)) == 1:
		limit = 0 // one edit of one letter is any letter: only a case slip counts
	case len(w) >= 4:
		limit = max(2, limit)
	}
	best, bestD := "", limit+1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == w {
			if c == word {
				return ""
			}
			return c // a case slip: "Ping" for "ping"
		}
		if d := levenshtein.ComputeDistance(w, lc); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Hint is ` (did you mean "X"?)` for the nearest candidate, or "" when
// there is none: ready to append to an error message.
func Hint(word string, candidates []string) string {
	if n := Nearest(word, candidates); n != "" {
		return ` (did you mean "` + n + `"?)`
	}
	return ""
}
