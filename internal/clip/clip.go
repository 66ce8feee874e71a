// Package clip cuts text to a byte budget without splitting a character.
package clip

import "unicode/utf8"

// String returns s cut to at most n bytes, at a rune boundary.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 {
		if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
