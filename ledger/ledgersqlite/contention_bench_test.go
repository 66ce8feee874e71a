package ledgersqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/ledgerbench"
)

// 64 callers, each with its own executor on one file, make the same call
// at once; the tool takes 50 ms. See ledgerbench.Contention.
func BenchmarkContention(b *testing.B) {
	s := open(b, filepath.Join(b.TempDir(), "contention.db"), nil)
	defer s.Close()
	ledgerbench.Contention(b, s, 64, 50*time.Millisecond)
}
