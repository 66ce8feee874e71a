package ledgerpg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerpg"
	"github.com/idemkit/idemkit/ledger/ledgerpg/pgtest"
)

// Eight sessions migrate the same new table at once: all succeed, the
// table and its indexes exist once, version 1 is recorded once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool) + "_new", Table: "ledger"}
	t.Cleanup(func() {
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{cfg.Schema}.Sanitize()+" CASCADE")
	})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			errs[i] = ledgerpg.Migrate(ctx, pool, cfg)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rows, _ := pool.Query(ctx, "SELECT version FROM "+pgx.Identifier{cfg.Schema, "ledger_migrations"}.Sanitize())
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil || len(versions) != ledgerpg.Versions || versions[len(versions)-1] != int32(ledgerpg.Versions) {
		t.Errorf("versions = %v, %v; want 1 to %d, once each", versions, err, ledgerpg.Versions)
	}
	rows, _ = pool.Query(ctx, "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename = 'ledger' ORDER BY indexname", cfg.Schema)
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	joined := strings.Join(defs, "\n")
	for _, want := range []string{"(key)", "(state, lease_until, key)", "(expires_at)", "(run_id)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no index on %s among:\n%s", want, joined)
		}
	}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		t.Errorf("Migrate again: %v", err)
	}
}

// A table migrated by a newer version is left alone.
func TestMigrateNewerVersion(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool)}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{cfg.Schema, ledgerpg.DefaultTable + "_migrations"}.Sanitize()+" (version) VALUES (99)"); err != nil {
		t.Fatal(err)
	}
	if err := ledgerpg.Migrate(ctx, pool, cfg); !errors.Is(err, ledgerpg.ErrSchemaVersion) {
		t.Errorf("Migrate of a newer table: %v, want ErrSchemaVersion", err)
	}
}

// Names that are not plain identifiers are refused before anything is sent.
func TestInvalidNames(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, cfg := range []ledgerpg.Config{
		{Table: `records"; DROP TABLE x; --`},
		{Schema: "my-schema"},
		{Table: strings.Repeat("t", 49)},
		{Table: "1records"},
	} {
		if err := ledgerpg.Migrate(context.Background(), pool, &cfg); !errors.Is(err, ledger.ErrConfig) {
			t.Errorf("Migrate(%+v): %v, want ledger.ErrConfig", cfg, err)
		}
		if _, err := ledgerpg.New(pool, &cfg); !errors.Is(err, ledger.ErrConfig) {
			t.Errorf("New(%+v): %v, want ledger.ErrConfig", cfg, err)
		}
	}
}

// OpenURL takes schema and table from the URL, migrates, and refuses
// other schemes.
func TestOpenURL(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	u := pgtest.URL(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	s, err := ledgerpg.OpenURL(ctx, u+sep+"schema="+schema+"&table=ledger&pool_max_conns=2", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Claim(ctx, params("k-url", "owner-a", time.Now())); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "ledger"}.Sanitize()).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows in %s.ledger: %d, %v; want 1", schema, n, err)
	}
	for _, bad := range []string{"mysql://localhost/x", "postgres://localhost/x?table=a-b", "::"} {
		if _, err := ledgerpg.OpenURL(ctx, bad, nil); !errors.Is(err, ledger.ErrConfig) {
			t.Errorf("OpenURL(%q): %v, want ledger.ErrConfig", bad, err)
		}
	}
}
