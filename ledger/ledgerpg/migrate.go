package ledgerpg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncely/oncely/ledger"
)

// ErrSchemaVersion is returned by Migrate when the table was migrated by a
// newer version of this package.
var ErrSchemaVersion = errors.New("ledgerpg: unknown schema version")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations are the embedded migration scripts in order; the script at
// index i brings the table to version i+1.
var migrations = func() []string {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	slices.Sort(names)
	out := make([]string, len(names))
	for i, name := range names {
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			panic(err)
		}
		if want := fmt.Sprintf("%03d_", i+1); !strings.HasPrefix(path.Base(name), want) {
			panic("ledgerpg: migration " + name + " out of sequence, want prefix " + want)
		}
		out[i] = string(b)
	}
	return out
}()

// Beginner starts transactions: *pgxpool.Pool, *pgx.Conn and pgx.Tx (a
// savepoint) satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var placeholderRE = regexp.MustCompile(`\{\{(table|channel|q?index:[a-z_]+|func:[a-z_]+)\}\}`)

// Migrate creates or upgrades the ledger table that cfg names (nil: the
// defaults) to the version this package needs, in one transaction. The
// versions applied are recorded in a table of the same name with the
// suffix _migrations. It is safe to run from several processes at once:
// they queue on a transaction-scoped advisory lock, which also works
// through PgBouncer in transaction pooling mode. A table migrated by a
// newer version of this package is left alone with ErrSchemaVersion.
//
// With Config.RunIndex it also creates the index on run_id when it does
// not exist, which locks the table's writes while it is built.
func Migrate(ctx context.Context, db Beginner, cfg *Config) error {
	return migrate(ctx, db, cfg, len(migrations))
}

// migrate brings the table to version upto (tests compare versions).
func migrate(ctx context.Context, db Beginner, cfg *Config, upto int) (err error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return unavailable("migrate", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	h := fnv.New64a()
	h.Write([]byte("oncely/ledgerpg:" + c.Schema + "." + c.Table))
	exec := func(sql string, args ...any) error {
		_, err := tx.Exec(ctx, sql, append([]any{c.ExecMode}, args...)...)
		return err
	}
	if err := exec("SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return unavailable("migrate: lock", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)", c.ExecMode, c.Schema).Scan(&exists); err != nil {
		return unavailable("migrate", err)
	}
	if !exists {
		if err := exec("CREATE SCHEMA " + pgx.Identifier{c.Schema}.Sanitize()); err != nil {
			return unavailable("migrate: create schema", err)
		}
	}
	versions := pgx.Identifier{c.Schema, c.Table + "_migrations"}.Sanitize()
	if err := exec("CREATE TABLE IF NOT EXISTS " + versions +
		" (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"); err != nil {
		return unavailable("migrate: create "+versions, err)
	}
	var version int
	if err := tx.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM "+versions, c.ExecMode).Scan(&version); err != nil {
		return unavailable("migrate", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("%w %d of %s.%s (this package knows %d)", ErrSchemaVersion, version, c.Schema, c.Table, len(migrations))
	}
	for v := version + 1; v <= upto; v++ {
		script := placeholderRE.ReplaceAllStringFunc(migrations[v-1], func(m string) string {
			kind, name, _ := strings.Cut(strings.Trim(m, "{}"), ":")
			switch kind {
			case "table":
				return pgx.Identifier{c.Schema, c.Table}.Sanitize()
			case "channel": // a string literal: "oncely_" and hex digits
				return "'" + settledChannel(c.Schema, c.Table) + "'"
			case "index":
				return pgx.Identifier{c.Table + "_" + name}.Sanitize()
			}
			return pgx.Identifier{c.Schema, c.Table + "_" + name}.Sanitize()
		})
		// The simple protocol: a script holds several statements.
		if _, err := tx.Exec(ctx, script, pgx.QueryExecModeSimpleProtocol); err != nil {
			return unavailable(fmt.Sprintf("migrate to version %d", v), err)
		}
		if err := exec("INSERT INTO "+versions+" (version) VALUES ($1)", v); err != nil {
			return unavailable("migrate", err)
		}
	}
	if c.RunIndex && upto == len(migrations) {
		if err := exec("CREATE INDEX IF NOT EXISTS " + pgx.Identifier{c.Table + "_run"}.Sanitize() + " ON " +
			pgx.Identifier{c.Schema, c.Table}.Sanitize() + " (run_id)"); err != nil {
			return unavailable("migrate: create the run_id index", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return unavailable("migrate: commit", err)
	}
	return nil
}

// unavailable wraps an error from PostgreSQL or the connection (whether a
// write took effect is unknown) in ledger.ErrUnavailable, keeping it in
// the chain. Text PostgreSQL cannot store (invalid UTF-8, a NUL byte:
// SQLSTATE 22021 and 22P05) is the caller's bad input, refused before
// anything was written: ledger.ErrInvalid, with a plain message.
func unavailable(op string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "22021" || pe.Code == "22P05") {
		return fmt.Errorf("ledgerpg: %s: %w: a value is not valid UTF-8 text or contains a NUL byte", op, ledger.ErrInvalid)
	}
	return fmt.Errorf("ledgerpg: %s: %w: %w", op, ledger.ErrUnavailable, err)
}
