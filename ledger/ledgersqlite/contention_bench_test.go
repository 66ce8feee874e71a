package ledgersqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/ledgerbench"
	"github.com/idemkit/idemkit/ledger"
)

// 64 callers, each with its own executor and its own Store on one file
// (as 64 processes would have), make the same call at once; the tool takes
// 50 ms. See ledgerbench.Contention.
func BenchmarkContention(b *testing.B) {
	path := filepath.Join(b.TempDir(), "contention.db")
	ledgerbench.Contention(b, func() ledger.Store {
		s := open(b, path, nil)
		b.Cleanup(func() { s.Close() })
		return s
	}, 64, 50*time.Millisecond)
}
