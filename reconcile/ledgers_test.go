package reconcile_test

import (
	"context"
	"testing"

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgercache"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
	"github.com/idemkit/idemkit/ledger/ledgerpg"
	"github.com/idemkit/idemkit/ledger/ledgerpg/pgtest"
	"github.com/idemkit/idemkit/ledger/ledgerredis"
	"github.com/idemkit/idemkit/ledger/ledgerredis/redistest"
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
