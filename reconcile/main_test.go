package reconcile_test

import (
	"os"
	"testing"

	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// TestMain runs the tests with a PostgreSQL server (pgtest), a Redis
// server (redistest) and a DynamoDB-compatible one (dynalite), for the
// tests that run a sweeper on every ledger.
func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(func() int {
		return redistest.Main(func() int { return dynalitetest.Main(m) })
	}))
}
