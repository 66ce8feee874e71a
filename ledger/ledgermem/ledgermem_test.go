package ledgermem_test

import (
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		return ledgermem.New(&ledgermem.Config{Clock: clock})
	})
}

// The memory ledger is one Store: its watches see the settles written
// through it.
func TestWatchConformance(t *testing.T) {
	t.Parallel()
	ledgertest.RunWatch(t, func(t *testing.T, clock clock.Clock) (ledger.Store, ledger.Store) {
		s := ledgermem.New(&ledgermem.Config{Clock: clock})
		return s, s
	})
}
