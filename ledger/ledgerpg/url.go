package ledgerpg

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/ledger"
)

// OpenURL opens a ledger by URL, for programs that choose their ledger by
// one: postgres://user:password@host:port/database?schema=s&table=t, or
// postgresql://. schema and table override cfg's; every other parameter
// is pgx's, pool_max_conns included (see pgxpool.ParseConfig). It makes a
// pool, runs Migrate, and returns the Store and a function that closes
// the pool.
func OpenURL(ctx context.Context, rawurl string, cfg *Config) (*Store, func(), error) {
	u, err := url.Parse(rawurl)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, nil, fmt.Errorf("ledgerpg: %w: want a postgres:// URL, got %q", ledger.ErrConfig, redact(u))
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
		return nil, nil, fmt.Errorf("ledgerpg: %w: %s: %v", ledger.ErrConfig, redact(u), err)
	}
	if _, err := c.withDefaults(); err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, nil, unavailable("open", err)
	}
	if err := Migrate(ctx, pool, &c); err != nil {
		pool.Close()
		return nil, nil, err
	}
	s, err := New(pool, &c)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, pool.Close, nil
}

// redact returns the URL without its password, for error messages.
func redact(u *url.URL) string {
	if u == nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
