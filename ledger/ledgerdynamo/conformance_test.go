package ledgerdynamo_test

import (
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// The suite on the default layout with 8 index shards instead of 64:
// the code is the same, and a List queries every shard of the states it
// lists, so the suite's walks one record a page would send dynalite (one
// Node.js process) 256 Queries a page. TestListReadsBounded counts a
// List on the default 64; TestConformanceLayouts runs the suite on the
// unsharded index and other layouts.
func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	layout := ledgerdynamo.Layout{Shards: 8}
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		table := dynalitetest.NewTableWith(t, client, &ledgerdynamo.TableOptions{Layout: layout})
		return ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clock, Layout: layout})
	})
}
