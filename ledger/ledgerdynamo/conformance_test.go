package ledgerdynamo_test

import (
	"testing"

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		return ledgerdynamo.New(client, dynalitetest.NewTable(t, client), &ledgerdynamo.Config{Clock: clock})
	})
}
