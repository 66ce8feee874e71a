package ledgerpg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// The suite in the default mode (the extended protocol with unnamed
// statements), with prepared statements, and with the simple protocol.
func TestConformance(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
				return newStore(t, pool, &ledgerpg.Config{Clock: clock, ExecMode: mode})
			})
		})
	}
}

// The suite on stores bound to a transaction each (InTx), rolled back at
// the end: inside a transaction the store behaves the same.
func TestConformanceInTx(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		s := newStore(t, pool, &ledgerpg.Config{Clock: clock})
		tx, err := pool.Begin(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		return s.InTx(tx)
	})
}

// Two Stores on one table, each on a pool of its own, as two processes
// would share the ledger: the watching Store listens on a connection of
// its own.
func TestWatchConformance(t *testing.T) {
	t.Parallel()
	shared := pgtest.Pool(t)
	other, err := pgxpool.New(context.Background(), pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	ledgertest.RunWatch(t, func(t *testing.T, clock clock.Clock) (ledger.Store, ledger.Store) {
		schema := pgtest.Schema(t, shared)
		a := newStore(t, shared, &ledgerpg.Config{Clock: clock, Schema: schema})
		b, err := ledgerpg.New(other, &ledgerpg.Config{Clock: clock, Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	})
}
