package ledgerpg_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// OpenURL with NoCreate creates nothing: a schema or table that does not
// exist is a *TableError, and so is one migrated by nobody; a migrated
// table opens.
func TestOpenURLNoCreate(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	u := pgtest.URL(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	noCreate := &ledgerpg.Config{NoCreate: true}
	missing := "oncely_never_" + strings.ReplaceAll(t.Name(), "/", "_")
	_, err := ledgerpg.OpenURL(ctx, u+sep+"schema="+missing, noCreate)
	var te *ledgerpg.TableError
	if !errors.As(err, &te) || !errors.Is(err, ledger.ErrConfig) || te.Version != 0 || te.Schema != missing ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Errorf("OpenURL of a missing schema with NoCreate: %v, want a *TableError matching ErrConfig", err)
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", missing).Scan(&exists); err != nil || exists {
		t.Errorf("schema %s exists after a NoCreate open: %v %v", missing, exists, err)
	}

	schema := pgtest.Schema(t, pool)
	withTable := u + sep + "schema=" + schema + "&table=ledger"
	if _, err := ledgerpg.OpenURL(ctx, withTable, noCreate); !errors.As(err, &te) || te.Table != "ledger" {
		t.Errorf("OpenURL of a missing table with NoCreate: %v, want a *TableError", err)
	}
	var tables int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("%d tables in %s after a NoCreate open (%v), want 0", tables, schema, err)
	}
	if err := ledgerpg.Migrate(ctx, pool, &ledgerpg.Config{Schema: schema, Table: "ledger"}); err != nil {
		t.Fatal(err)
	}
	s, err := ledgerpg.OpenURL(ctx, withTable, noCreate)
	if err != nil {
		t.Fatalf("OpenURL of a migrated table with NoCreate: %v", err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get on the opened table: %v, want ErrNotFound", err)
	}
	// A table migrated by a newer version is refused as by Migrate.
	if _, err := pool.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "ledger_migrations"}.Sanitize()+" (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	if _, err := ledgerpg.OpenURL(ctx, withTable, noCreate); !errors.Is(err, ledgerpg.ErrSchemaVersion) {
		t.Errorf("OpenURL of a newer table with NoCreate: %v, want ErrSchemaVersion", err)
	}
}

// A URL parameter the server does not know (a typo of schema or table),
// or a database that does not exist, is a configuration error that says
// the server's reason once.
func TestOpenURLRefusedParameter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	for _, nc := range []bool{false, true} {
		_, err := ledgerpg.OpenURL(ctx, u+sep+"tabel=x", &ledgerpg.Config{NoCreate: nc})
		if !errors.Is(err, ledger.ErrConfig) || errors.Is(err, ledger.ErrUnavailable) || strings.Count(err.Error(), `"tabel"`) != 1 {
			t.Errorf("OpenURL with ?tabel= (NoCreate %v): %v, want ErrConfig naming the parameter once", nc, err)
		}
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Path = "/oncely_no_such_database"
	if _, err := ledgerpg.OpenURL(ctx, pu.String(), nil); !errors.Is(err, ledger.ErrConfig) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("OpenURL of a missing database: %v, want ErrConfig", err)
	}
}
