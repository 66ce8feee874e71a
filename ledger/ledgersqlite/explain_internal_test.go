package ledgersqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

// The listings of a sweep and of a page after a cursor read a range of the
// index on (state, lease_until) in its order: SQLite neither scans the
// table nor sorts (EXPLAIN QUERY PLAN), so their cost follows the records
// of the state, not the ledger.
func TestListUsesIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "x.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Now()
	after := ledger.Cursor{LeaseUntil: now.Add(-time.Hour), Key: "k"}
	for _, f := range []ledger.Filter{
		{State: ledger.StatePending, LeaseBefore: now, Limit: 100},
		{State: ledger.StateUncertain, Limit: 100},
		{State: ledger.StateUncertain, LeaseBefore: now, After: after, Limit: 100},
		{State: ledger.StatePending, LeaseBefore: now, After: after, Limit: 100},
		{State: ledger.StateDone, RunID: "run-1", After: after},
	} {
		q, args := listQuery(f, now)
		rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "; ")
		t.Logf("List(%+v): %s", f, text)
		if !strings.Contains(text, "USING INDEX records_state_lease (state=?") || strings.Contains(text, "TEMP B-TREE") {
			t.Errorf("List(%+v) plan: %s; want a range of records_state_lease, unsorted", f, text)
		}
	}
}
