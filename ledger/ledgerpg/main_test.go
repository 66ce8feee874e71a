package ledgerpg_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// TestMain runs the tests, or the body of a child process of
// TestMultiProcess or BenchmarkContentionProcesses when the environment
// asks for one.
func TestMain(m *testing.M) {
	ledgerbench.Child(benchChild)
	if os.Getenv(envChild) != "" {
		os.Exit(childProcess())
	}
	os.Exit(pgtest.Main(func() int {
		defer contention.stop()
		return m.Run()
	}))
}

// newStore returns a store on a migrated table in a schema of its own,
// dropped when tb ends.
func newStore(tb testing.TB, db *pgxpool.Pool, cfg *ledgerpg.Config) *ledgerpg.Store {
	tb.Helper()
	var c ledgerpg.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Schema == "" {
		c.Schema = pgtest.Schema(tb, db)
	}
	if err := ledgerpg.Migrate(context.Background(), db, &c); err != nil {
		tb.Fatal(err)
	}
	s, err := ledgerpg.New(db, &c)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
