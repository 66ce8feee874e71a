package ledgertest_test

import (
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// conformance is a backend's conformance test, as the backend's own test
// file holds it (named TestConformance there): each call of newStore
// returns a new, empty Store that reads the suite's clock, so that the
// suite moves time without sleeping. A backend that implements
// ledger.Watcher runs RunWatch too, with two Stores on one ledger.
// TestExampleConformance runs it.
func conformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, clk clock.Clock) ledger.Store {
		return ledgermem.New(&ledgermem.Config{Clock: clk})
	})
	ledgertest.RunWatch(t, func(t *testing.T, clk clock.Clock) (ledger.Store, ledger.Store) {
		s := ledgermem.New(&ledgermem.Config{Clock: clk})
		return s, s // one process: one Store is both
	})
}

// A backend passes the conformance suite in its tests: the whole of this
// file, with TestConformance in place of conformance.
func Example() {}
