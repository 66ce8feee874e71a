package ledgersqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// One sweep's listing with 10^3 stuck records among 10^3 and among 10^6
// records (the rest done), paired; see ledgerbench.SweepListing.
func BenchmarkSweepListing(b *testing.B) {
	sizes := [2]int{ledgerbench.Stuck, 1_000_000}
	at := time.Now().Add(-time.Hour)
	var stores [2]ledger.Store
	for i, n := range sizes {
		path := filepath.Join(b.TempDir(), "sweep.db")
		open(b, path, nil).Close() // the store's schema
		insertDone(b, path, 0, n-ledgerbench.Stuck, at.Add(-time.Hour))
		s := open(b, path, &ledgersqlite.Config{Synchronous: ledgersqlite.SyncNormal})
		defer s.Close()
		ledgerbench.AddStuck(b, s, at)
		stores[i] = s
	}
	ledgerbench.SweepListing(b, sizes, stores)
}
