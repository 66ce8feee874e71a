package console_test

import (
	"os"
	"testing"

	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// TestMain finds or starts the PostgreSQL server of the benchmarks.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m.Run)) }
