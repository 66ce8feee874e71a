package ledgermem_test

import (
	"testing"

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgermem"
	"github.com/idemkit/idemkit/ledger/ledgertest"
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
