package ledgerpg

import (
	"context"
	"time"

	"github.com/oncely/oncely/ledger"
)

// ListQuery is the query of s's List for f, with its arguments (the first
// is the statement mode).
func ListQuery(s *Store, f ledger.Filter) (string, []any) { return s.listQuery(f) }

// Versions is the number of migrations, the version Migrate brings a table to.
var Versions = len(migrations)

// MigrateTo brings the table cfg names to version v, for tests that
// compare a version with the next.
func MigrateTo(ctx context.Context, db Beginner, cfg *Config, v int) error {
	return migrate(ctx, db, cfg, v)
}

// Before5 returns s as it was before migration 5: its owner's writes are
// UPDATE statements sent by the client, for a table at version 4.
func Before5(s *Store) *Store {
	c := *s
	sql := *s.sql
	owned := ` WHERE key = $1 AND owner = $2 AND state = 'pending'`
	sql.complete = `UPDATE ` + sql.table + ` SET state = 'done', summary = $3, ref = $4, result = $5, truncated = $6,
	reason = '', lease_until = $7, updated_at = $7, expires_at = CASE WHEN $8::bigint > 0 THEN $7::timestamptz + $8::bigint * interval '1 millisecond' ELSE expires_at END` + owned
	sql.fail = `UPDATE ` + sql.table + ` SET state = $3, attempt = attempt + $4,
	attempt_at = CASE WHEN $4 = 1 THEN $6 ELSE attempt_at END, reason = $5,
	lease_until = $6, updated_at = $6,
	expires_at = CASE WHEN $4 = 1 AND $7::bigint > 0 THEN $6::timestamptz + $7::bigint * interval '1 millisecond' ELSE expires_at END` + owned
	sql.extend = `UPDATE ` + sql.table + ` SET lease_until = $3, expires_at = GREATEST(expires_at, $3),
	updated_at = $4` + owned
	c.sql = &sql
	return &c
}

// PurgeQuery is the statement of s's Purge, with its arguments (the first
// is the statement mode).
func PurgeQuery(s *Store, before time.Time) (string, []any) {
	return s.sql.purge, []any{s.mode, ms(before), s.batch}
}

// Channel is the notification channel of the table schema.table.
func Channel(schema, table string) string { return settledChannel(schema, table) }

// NotifyEverySettle returns s with the settling statements of the
// version before migration 6, which notify every settle (and, on a table
// at version 6, once more for a watched one), for benchmarks.
func NotifyEverySettle(s *Store, schema string) *Store {
	c := *s
	sql := *s.sql
	ch := settledChannel(schema, DefaultTable)
	fn := func(name string) string { return `"` + schema + `"."` + DefaultTable + "_" + name + `"` }
	sql.complete = `SELECT pg_notify('` + ch + `', $1) WHERE ` + fn("complete") + `($1, $2, $3, $4, $5, $6, $7, $8)`
	sql.fail = `SELECT pg_notify('` + ch + `', $1) WHERE ` + fn("fail") + `($1, $2, $3, $4, $5, $6, $7)`
	c.sql = &sql
	return &c
}
