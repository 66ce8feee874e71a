package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m.Run)) }

// The binary's server answers, and a test's schema is its own and is
// dropped at the end.
func TestSchema(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	var name string
	t.Run("inner", func(t *testing.T) {
		name = pgtest.Schema(t, pool)
		if _, err := pool.Exec(context.Background(), "CREATE TABLE "+pgx.Identifier{name, "t"}.Sanitize()+" (x int)"); err != nil {
			t.Fatal(err)
		}
	})
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", name).Scan(&n); err != nil || n != 0 {
		t.Errorf("schema %s after its test: count %d, %v; want dropped", name, n, err)
	}
}

// Start makes a server of its own whatever else answers, and Stop removes
// it: the path a machine without a server takes.
func TestStart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := pgtest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	conn.Close(ctx)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, srv.URL); err == nil {
		t.Error("the server still answers after Stop")
	}
}
