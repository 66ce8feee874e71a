package ledgerpg_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerpg"
	"github.com/idemkit/idemkit/ledger/ledgerpg/pgtest"
)

// On a table of 50,000 done records and 500 stuck ones, with statistics,
// the listings of a sweep and of a page after a cursor read a range of the
// index on (state, lease_until, key) in its order: PostgreSQL neither
// scans the table nor sorts (EXPLAIN), so their cost follows the records
// of the state, not the ledger.
func TestListUsesIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	now := time.Now()
	s := newStore(t, pool, &ledgerpg.Config{Schema: schema})
	table := pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
		fingerprint, attempt, attempt_at, updated_at)
		SELECT 'k-' || i, 'send_reply', 'run-' || (i % 100),
			CASE WHEN i % 100 = 0 THEN 'uncertain' WHEN i % 100 = 1 THEN 'pending' ELSE 'done' END,
			'o', $1::timestamptz - i * interval '1 second', $1::timestamptz + interval '1 day', 'fp', 1, $1, $1
		FROM generate_series(1, 50000) AS i`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	after := ledger.Cursor{LeaseUntil: now.Add(-time.Hour), Key: "k-1"}
	for _, f := range []ledger.Filter{
		{State: ledger.StatePending, LeaseBefore: now, Limit: 100},
		{State: ledger.StateUncertain, Limit: 100},
		{State: ledger.StateUncertain, LeaseBefore: now, After: after, Limit: 100},
		{State: ledger.StatePending, LeaseBefore: now, After: after, Limit: 100},
	} {
		q, args := ledgerpg.ListQuery(s, f)
		rows, err := pool.Query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, "Index Scan using "+ledgerpg.DefaultTable+"_state_lease_key") ||
			strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
			t.Errorf("List(%+v) plan:\n%s\nwant a range of the (state, lease_until, key) index, unsorted", f, plan)
		}
	}
}
