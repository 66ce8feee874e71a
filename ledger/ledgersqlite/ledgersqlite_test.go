package ledgersqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/ledger/ledgertest"
)

func open(t testing.TB, path string, cfg *ledgersqlite.Config) *ledgersqlite.Store {
	t.Helper()
	s, err := ledgersqlite.Open(context.Background(), path, cfg)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		return open(t, filepath.Join(t.TempDir(), "ledger.db"), &ledgersqlite.Config{Clock: clock})
	})
}

// Two Stores on one file, as two processes open it: the settles of either
// wake the watches of the first through the signal file.
func TestWatchConformance(t *testing.T) {
	t.Parallel()
	ledgertest.RunWatch(t, func(t *testing.T, clock clock.Clock) (ledger.Store, ledger.Store) {
		path := filepath.Join(t.TempDir(), "ledger.db")
		return open(t, path, &ledgersqlite.Config{Clock: clock}), open(t, path, &ledgersqlite.Config{Clock: clock})
	})
}
