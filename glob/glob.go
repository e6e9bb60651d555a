// Package glob matches names against shell-like patterns where '*' matches
// any run of characters, '/' included, and '?' one character. path.Match is
// not used because its '*' stops at '/', and identities such as SPIFFE IDs
// and URLs are full of them.
package glob

import "unicode/utf8"

// Match reports whether s matches pattern, anchored at both ends and
// case-sensitively. It runs in O(len(pattern)·len(s)) at worst: hostile
// patterns cannot make it backtrack exponentially.
func Match(pattern, s string) bool {
	// The classic greedy algorithm: remember the last '*' and the position
	// in s it was tried at; on a mismatch, let that '*' swallow one more
	// character.
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				star, mark = p, i
				p++
				continue
			case '?':
				_, n := utf8.DecodeRuneInString(s[i:])
				p++
				i += n
				continue
			default:
				if c == s[i] {
					p++
					i++
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		_, n := utf8.DecodeRuneInString(s[mark:])
		mark += n
		p, i = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Valid reports whether pattern is usable: not empty and valid UTF-8.
func Valid(pattern string) bool { return pattern != "" && utf8.ValidString(pattern) }
