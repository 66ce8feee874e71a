package ledgerpg_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerpg"
	"github.com/idemkit/idemkit/ledger/ledgerpg/pgtest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// The suite in the default mode (the extended protocol with unnamed
// statements), with prepared statements, and with the simple protocol.
func TestConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T, clock ledger.Clock) ledger.Store {
				return newStore(t, pool, &ledgerpg.Config{Clock: clock, ExecMode: mode})
			})
		})
	}
}
