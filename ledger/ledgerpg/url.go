package ledgerpg

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/ledger"
)

// OpenURL opens a ledger by URL, for programs that choose their ledger by
// one: postgres://user:password@host:port/database?schema=s&table=t, or
// postgresql://. schema and table override cfg's; every other parameter
// is pgx's, pool_max_conns included (see pgxpool.ParseConfig), or a
// run-time parameter sent to the server. It makes a pool, runs Migrate
// (or, with cfg.NoCreate, checks that the table exists at the version
// this package needs), and returns the Store, whose Close closes the
// pool. A parameter or database the server does not know is an error
// matching ledger.ErrConfig, as is a malformed URL.
func OpenURL(ctx context.Context, rawurl string, cfg *Config) (*Store, error) {
	u, err := url.Parse(rawurl)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("ledgerpg: %w: want a postgres:// URL, got %q", ledger.ErrConfig, redact(u))
	}
	var c Config
	if cfg != nil {
		c = *cfg
	}
	q := u.Query()
	if v := q.Get("schema"); v != "" {
		c.Schema = v
	}
	if v := q.Get("table"); v != "" {
		c.Table = v
	}
	q.Del("schema")
	q.Del("table")
	u.RawQuery = q.Encode()
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("ledgerpg: %w: %s: %v", ledger.ErrConfig, redact(u), err)
	}
	if c, err = c.withDefaults(); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, unavailable("open", err)
	}
	if c.NoCreate {
		err = checkTable(ctx, pool, c)
	} else {
		err = Migrate(ctx, pool, &c)
	}
	if err != nil {
		pool.Close()
		return nil, refusedConnection(err)
	}
	s, err := New(pool, &c)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.pool = pool
	return s, nil
}

// TableError is what OpenURL with Config.NoCreate returns when the ledger
// table does not exist, or needs a migration: Migrate (oncely ledger init)
// creates or upgrades it. It matches ledger.ErrConfig.
type TableError struct {
	Schema, Table string
	// Version is the table's version (0: the table does not exist), Want
	// the version this package needs.
	Version, Want int
}

// Error names the table and what it lacks.
func (e *TableError) Error() string {
	if e.Version == 0 {
		return fmt.Sprintf("ledgerpg: table %s.%s does not exist", e.Schema, e.Table)
	}
	return fmt.Sprintf("ledgerpg: table %s.%s is at version %d, this package needs %d", e.Schema, e.Table, e.Version, e.Want)
}

// Unwrap returns ledger.ErrConfig.
func (e *TableError) Unwrap() error { return ledger.ErrConfig }

// checkTable returns a *TableError unless the table c names exists at the
// version this package needs; it creates and locks nothing.
func checkTable(ctx context.Context, db Querier, c Config) error {
	versions := pgx.Identifier{c.Schema, c.Table + "_migrations"}.Sanitize()
	var exists bool
	err := db.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL", c.ExecMode,
		pgx.Identifier{c.Schema, c.Table}.Sanitize(), versions).Scan(&exists)
	if err != nil {
		return unavailable("open", err)
	}
	version := 0
	if exists {
		if err := db.QueryRow(ctx, "SELECT COALESCE(max(version), 0) FROM "+versions, c.ExecMode).Scan(&version); err != nil {
			return unavailable("open", err)
		}
	}
	switch {
	case version > len(migrations):
		return fmt.Errorf("%w %d of %s.%s (this package knows %d)", ErrSchemaVersion, version, c.Schema, c.Table, len(migrations))
	case version < len(migrations):
		return &TableError{Schema: c.Schema, Table: c.Table, Version: version, Want: len(migrations)}
	}
	return nil
}

// configErrors are the SQLSTATE codes with which a server refuses a
// connection for what the URL says, not for its state: a run-time
// parameter it does not know (a mistyped ?tabel=), a value it rejects,
// a database that does not exist.
var configErrors = map[string]bool{
	"42704": true, // undefined_object: unrecognized configuration parameter
	"22023": true, // invalid_parameter_value
	"3D000": true, // invalid_catalog_name: no such database
}

// refusedConnection turns a connection the server refused for the URL's
// sake into an error matching ledger.ErrConfig, with the server's message
// once (pgx repeats it for every address and TLS mode it tried).
func refusedConnection(err error) error {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if !errors.As(err, &ce) || !errors.As(err, &pe) || !configErrors[pe.Code] {
		return err
	}
	return fmt.Errorf("ledgerpg: %w: the server refused the connection: %s (SQLSTATE %s)", ledger.ErrConfig, pe.Message, pe.Code)
}

// redact returns the URL without its password, for error messages.
func redact(u *url.URL) string {
	if u == nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
