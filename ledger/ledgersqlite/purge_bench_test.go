package ledgersqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/ledgerbench"
)

// Fresh actions while Purge deletes 20,000 expired records, 32 a write,
// beside as many with no purge running; see ledgerbench.PurgeBlocking.
// The purge shares the writer with the claims.
func BenchmarkPurgeBlocking(b *testing.B) {
	const expired = 20_000
	path := filepath.Join(b.TempDir(), "purge.db")
	s := open(b, path, nil)
	defer s.Close()
	ledgerbench.PurgeBlocking(b, s, func(round int) int {
		// Settled 25 hours ago, kept for a day: expired an hour ago.
		insertDone(b, path, round*expired, expired, time.Now().Add(-25*time.Hour))
		return expired
	})
}
