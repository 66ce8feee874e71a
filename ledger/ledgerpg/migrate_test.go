package ledgerpg_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// Eight sessions migrate the same new table at once: all succeed, the
// table and its indexes exist once (the run_id index of Config.RunIndex
// too), each version is recorded once, and the table has its autovacuum
// settings.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool) + "_new", Table: "ledger", RunIndex: true}
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
	for _, want := range []string{"(key)", "(state, lease_until, key) WHERE (state = ANY (ARRAY['pending'::text, 'uncertain'::text]))",
		"(expires_at) WHERE (state = ANY (ARRAY['done'::text, 'failed'::text]))", "(run_id)",
		"(state, lease_until, key) WHERE (state = ANY (ARRAY['done'::text, 'failed'::text]))",
		"(lease_until, key) WHERE (run_id = 'oncely/counters'::text)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no index on %s among:\n%s", want, joined)
		}
	}
	if len(defs) != 6 {
		t.Errorf("%d indexes, want 6:\n%s", len(defs), joined)
	}
	var opts []string
	if err := pool.QueryRow(ctx, "SELECT reloptions FROM pg_class WHERE oid = $1::regclass",
		pgx.Identifier{cfg.Schema, "ledger"}.Sanitize()).Scan(&opts); err != nil || !slices.Contains(opts, "autovacuum_vacuum_scale_factor=0.02") {
		t.Errorf("reloptions = %v, %v; want autovacuum_vacuum_scale_factor=0.02 among them", opts, err)
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

// A table at version 4 with records of every state is migrated to the
// latest version: every record is still there, unchanged, and the claims
// and the owner's writes work on them.
func TestMigrateFrom4(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool)}
	if err := ledgerpg.MigrateTo(ctx, pool, cfg, 4); err != nil {
		t.Fatal(err)
	}
	s, err := ledgerpg.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	old := ledgerpg.Before5(s)
	now := time.Now()
	for i, settle := range []func(key, owner string) error{
		func(string, string) error { return nil },
		func(k, o string) error { return old.Complete(ctx, k, o, ledger.Completion{Summary: "sent"}) },
		func(k, o string) error {
			return old.Fail(ctx, k, o, ledger.Failure{Definite: true, Reason: "declined"})
		},
		func(k, o string) error { return old.Fail(ctx, k, o, ledger.Failure{Reason: "timeout"}) },
	} {
		p := params("k-"+strconv.Itoa(i), "owner-a", now)
		if res, err := old.Claim(ctx, p); err != nil || !res.Claimed {
			t.Fatal(res, err)
		}
		if err := settle(p.Key, p.Owner); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.List(ctx, ledger.Filter{})
	if err != nil || len(before) != 4 {
		t.Fatal(before, err)
	}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	after, err := s.List(ctx, ledger.Filter{})
	if err != nil || !reflect.DeepEqual(before, after) {
		t.Fatalf("after the migration: %+v, %v\nwant %+v", after, err, before)
	}
	if err := s.Complete(ctx, "k-0", "owner-a", ledger.Completion{Summary: "sent"}); err != nil {
		t.Errorf("Complete of the pending record: %v", err)
	}
	if res, err := s.Claim(ctx, params("k-2", "owner-b", now)); err != nil || !res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateFailed {
		t.Errorf("claim over the failed record = %+v, %v; want a takeover", res, err)
	}
	if res, err := s.Claim(ctx, params("k-1", "owner-b", now)); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
		t.Errorf("claim of the done record = %+v, %v; want refused", res, err)
	}
}
