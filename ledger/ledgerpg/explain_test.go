package ledgerpg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// explainTable is a store on a table of 50,000 records with statistics:
// 1% pending and 1% uncertain, spread over 100 runs, the rest done, 1%
// of all expired; with the run_id index of Config.RunIndex if runIndex.
func explainTable(t *testing.T, runIndex bool) (*ledgerpg.Store, *pgxpool.Pool, time.Time) {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	now := time.Now()
	s := newStore(t, pool, &ledgerpg.Config{Schema: schema, RunIndex: runIndex})
	table := pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
		fingerprint, attempt, attempt_at, updated_at)
		SELECT 'k-' || i, 'send_reply', 'run-' || (i % 100),
			CASE WHEN i % 100 = 0 THEN 'uncertain' WHEN i % 100 = 1 THEN 'pending' ELSE 'done' END,
			'o', $1::timestamptz - i * interval '1 second',
			$1::timestamptz + CASE WHEN i % 100 = 2 THEN interval '-1 day' ELSE interval '1 day' END, 'fp', 1, $1, $1
		FROM generate_series(1, 50000) AS i`, now); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+table); err != nil {
		t.Fatal(err)
	}
	return s, pool, now
}

// explain returns the plan of q with args (the first is the statement
// mode, dropped), planned for these values (as a statement sent
// unprepared is) or, generic, as a prepared statement may be planned
// once for every value.
func explain(t *testing.T, pool *pgxpool.Pool, q string, args []any, generic bool) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	defer func() { _, _ = conn.Exec(context.Background(), "DEALLOCATE explained") }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if generic {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			t.Fatal(err)
		}
	}
	// EXPLAIN EXECUTE of a statement prepared in SQL plans it as the
	// statement would be (generic under force_generic_plan); EXPLAIN of a
	// query with parameters would plan it for their values every time.
	if _, err := tx.Exec(ctx, "PREPARE explained AS "+q); err != nil {
		t.Fatal(err)
	}
	values := make([]string, len(args)-1)
	for i, a := range args[1:] {
		switch a := a.(type) {
		case time.Time:
			values[i] = "'" + a.Format(time.RFC3339Nano) + "'"
		case string:
			values[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
		default:
			values[i] = fmt.Sprint(a)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN EXECUTE explained("+strings.Join(values, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// The sweeper's listings, and a page after a cursor, read a range of the
// partial index on (state, lease_until, key) of the pending and uncertain
// records in its order, also as a generic plan and for one run (without
// Config.RunIndex, the default):
// PostgreSQL neither scans the table nor sorts (EXPLAIN), so their cost
// follows the stuck records, not the ledger.
func TestListUsesIndex(t *testing.T) {
	t.Parallel()
	s, pool, now := explainTable(t, false)
	after := ledger.Cursor{LeaseUntil: now.Add(-time.Hour), Key: "k-1"}
	for _, f := range []ledger.Filter{
		{State: ledger.StatePending, LeaseBefore: now, Limit: 100},
		{State: ledger.StateUncertain, Limit: 100},
		{State: ledger.StateUncertain, LeaseBefore: now, After: after, Limit: 100},
		{State: ledger.StatePending, LeaseBefore: now, After: after, Limit: 100},
		{State: ledger.StatePending, RunID: "run-1", LeaseBefore: now, After: after, Limit: 100},
		{State: ledger.StateUncertain, RunID: "run-0", LeaseBefore: now, Limit: 100},
	} {
		for _, generic := range []bool{false, true} {
			q, args := ledgerpg.ListQuery(s, f)
			plan := explain(t, pool, q, args, generic)
			if !strings.Contains(plan, "Index Scan using "+ledgerpg.DefaultTable+"_sweep") ||
				strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("List(%+v), generic %v, plan:\n%s\nwant a range of the partial (state, lease_until, key) index, unsorted", f, generic, plan)
			}
		}
	}
}

// An operator's listings of done or failed records by time, and of the
// counter records, read a range of their partial indexes (migration 7) in
// their order, also as a generic plan: their cost follows the page, not
// the ledger.
func TestSettledListUsesIndex(t *testing.T) {
	t.Parallel()
	s, pool, now := explainTable(t, false)
	after := ledger.Cursor{LeaseUntil: now.Add(-time.Hour), Key: "k-1"}
	for _, c := range []struct {
		f     ledger.Filter
		index string
	}{
		{ledger.Filter{State: ledger.StateDone, Limit: 100}, "_settled"},
		{ledger.Filter{State: ledger.StateDone, LeaseBefore: now, After: after, Limit: 100}, "_settled"},
		{ledger.Filter{State: ledger.StateFailed, LeaseBefore: now, After: after, Limit: 100}, "_settled"},
		{ledger.Filter{State: ledger.StateDone, RunID: ledger.CountersRun, LeaseBefore: now, After: after, Limit: 100}, "_counters"},
	} {
		for _, generic := range []bool{false, true} {
			q, args := ledgerpg.ListQuery(s, c.f)
			plan := explain(t, pool, q, args, generic)
			if !strings.Contains(plan, "Index Scan using "+ledgerpg.DefaultTable+c.index) ||
				strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("List(%+v), generic %v, plan:\n%s\nwant a range of the index %s, unsorted", c.f, generic, plan, c.index)
			}
		}
	}
}

// Purge reads the partial index on expires_at of the done and failed
// records; List by run id, of every state, reads the run_id index of
// Config.RunIndex; Get reads the primary key.
func TestOtherQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	s, pool, now := explainTable(t, true)
	q, args := ledgerpg.PurgeQuery(s, now)
	for _, generic := range []bool{false, true} {
		if plan := explain(t, pool, q, args, generic); !strings.Contains(plan, "Index Scan using "+ledgerpg.DefaultTable+"_purge") {
			t.Errorf("Purge, generic %v, plan:\n%s\nwant the partial index on expires_at", generic, plan)
		}
	}
	q, args = ledgerpg.ListQuery(s, ledger.Filter{RunID: "run-7", Limit: 100})
	if plan := explain(t, pool, q, args, false); !strings.Contains(plan, " "+ledgerpg.DefaultTable+"_run ") ||
		strings.Contains(plan, "Seq Scan") {
		t.Errorf("List by run id, plan:\n%s\nwant the run_id index", plan)
	}
}
