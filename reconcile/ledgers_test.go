package reconcile_test

import (
	"context"
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgercache"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// ledgers are the six ledgers, each opened fresh and empty for t (in a
// schema, key prefix or table of its own on the shared servers).
var ledgers = []struct {
	name string
	open func(t *testing.T, clock clock.Clock) ledger.Store
}{
	{"memory", func(t *testing.T, clock clock.Clock) ledger.Store { return memStore(clock) }},
	{"sqlite", func(t *testing.T, clock clock.Clock) ledger.Store {
		open, _ := sqliteFile(t)
		return open(clock)
	}},
	{"postgres", func(t *testing.T, clock clock.Clock) ledger.Store {
		pool := pgtest.Pool(t)
		cfg := &ledgerpg.Config{Clock: clock, Schema: pgtest.Schema(t, pool)}
		if err := ledgerpg.Migrate(context.Background(), pool, cfg); err != nil {
			t.Fatal(err)
		}
		s, err := ledgerpg.New(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() }) // its listening connection, if it watched
		return s
	}},
	{"redis", func(t *testing.T, clock clock.Clock) ledger.Store {
		url := redistest.URL(t)
		return ledgerredis.New(redistest.NewClient(t, url), &ledgerredis.Config{Clock: clock, Prefix: redistest.Prefix(t, url)})
	}},
	{"dynamo", func(t *testing.T, clock clock.Clock) ledger.Store {
		client := dynalitetest.NewClient(dynalitetest.Endpoint(t))
		return ledgerdynamo.New(client, dynalitetest.NewTable(t, client), &ledgerdynamo.Config{Clock: clock})
	}},
	{"cache", func(t *testing.T, clock clock.Clock) ledger.Store {
		open, _ := sqliteFile(t)
		return ledgercache.New(open(clock), &ledgercache.Config{Clock: clock})
	}},
}
