package clip_test

import (
	"testing"
	"unicode/utf8"

	"github.com/oncely/oncely/internal/clip"
)

func TestString(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"},  // é is 2 bytes: never cut inside it
		{"a€b", 3, "a"}, // € is 3 bytes
		{"😂x", 3, ""},   // a 4-byte rune cut anywhere is dropped whole
		{"ab😂", 6, "ab😂"},
	} {
		got := clip.String(c.in, c.n)
		if got != c.want || len(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("String(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
