package ledgerdynamo_test

import (
	"testing"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		return ledgerdynamo.New(client, dynalitetest.NewTable(t, client), &ledgerdynamo.Config{Clock: clock})
	})
}
