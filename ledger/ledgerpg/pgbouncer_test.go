package ledgerpg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// The suite, migrations included, through PgBouncer in transaction
// pooling mode, which keeps no prepared statement or other session state
// for a client between transactions.
func TestPgBouncer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := pgtest.Pool(t)
	bouncer, err := pgxpool.New(ctx, pgtest.PgBouncerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bouncer.Close)
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
				cfg := &ledgerpg.Config{Clock: clock, Schema: pgtest.Schema(t, direct), ExecMode: mode}
				if err := ledgerpg.Migrate(ctx, bouncer, cfg); err != nil {
					t.Fatal(err)
				}
				s, err := ledgerpg.New(bouncer, cfg)
				if err != nil {
					t.Fatal(err)
				}
				return s
			})
		})
	}
}

// Behind PgBouncer in transaction pooling mode a Store settles through
// the pooler and its notifications reach a Store that listens on a direct
// connection; a Store on the pooler with NoListen set does not watch
// (LISTEN would not work there), and its callers poll.
func TestPgBouncerWatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := pgtest.Pool(t)
	bouncer, err := pgxpool.New(ctx, pgtest.PgBouncerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bouncer.Close)
	ledgertest.RunWatch(t, func(t *testing.T, clock clock.Clock) (ledger.Store, ledger.Store) {
		cfg := &ledgerpg.Config{Clock: clock, Schema: pgtest.Schema(t, direct)}
		watcher := newStore(t, direct, cfg)
		cfg.NoListen = true
		s, err := ledgerpg.New(bouncer, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Watch(ctx, "k"); !errors.Is(err, ledger.ErrNoWatch) {
			t.Fatalf("Watch with NoListen = %v, want ledger.ErrNoWatch", err)
		}
		return watcher, s
	})
}
