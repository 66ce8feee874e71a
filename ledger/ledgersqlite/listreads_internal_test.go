package ledgersqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/oncely/oncely/ledger"
)

// A listing reads what its page needs, whatever the size of the ledger. It
// counts the B-tree pages a List fetches (SQLite's own counters of
// page-cache hits and misses on the reading connection,
// SQLITE_DBSTATUS_CACHE_HIT and _MISS) on two ledgers whose B-trees have
// the same depth, one with ten times the records of the other: the larger
// may fetch one page more per range of an index the listing reads (the
// page of records can straddle one leaf more), and nothing else. Every kind
// of listing: a sweep of lapsed claims, a state, the next page of a state
// after a cursor, every state (each state's page merged), the next page of
// every state, and a run. A listing by run reads all the run's records (50
// in both ledgers, sorted for a page of 10), by the index on run_id: what
// it reads grows with the run, not with the ledger, and the records beyond
// the page, spread over more leaves in the larger ledger, may cost a table
// leaf each. Reading the table, or every record of a state, would fetch
// ten times the pages.
func TestListReadsDoNotGrowWithLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	const pending, limit = 50, 10
	sizes := [2]int{1_000, 10_000}
	open := func(done int) *Store {
		path := filepath.Join(t.TempDir(), "x.db")
		s, err := Open(ctx, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		ins, err := tx.Prepare(`INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
			VALUES (?1, 'send_reply', ?2, ?3, 'owner', ?4, ?5, 'fp', 1, ?4, 'sent', 'msg_1', '{"id":"msg_1"}', ?4)`)
		if err != nil {
			t.Fatal(err)
		}
		// The done records are older than the pending ones, so that a page
		// of every state holds both; the pending ones make one run.
		for i := range done + pending {
			state, run, at := "done", fmt.Sprintf("run-%d", i/10), now.Add(-time.Hour).Add(time.Duration(i)*time.Millisecond)
			if i >= done {
				state, run, at = "pending", "the-run", now.Add(-time.Minute).Add(time.Duration(i)*time.Millisecond)
			}
			if _, err := ins.Exec(fmt.Sprintf("key-%08d", (i*7919)%(done+pending)), run, state, at.UnixMilli(), now.Add(time.Hour).UnixMilli()); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if s, err = Open(ctx, path, nil); err != nil {
			t.Fatal(err)
		}
		s.r.SetMaxOpenConns(1) // so that List reads on the connection counted
		return s
	}
	// fetched returns the pages a List of f on s fetched and what it listed.
	fetched := func(s *Store, f ledger.Filter) (int, []ledger.Record) {
		count := func() int {
			conn, err := s.r.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			return cacheFetches(t, conn)
		}
		if _, err := s.List(ctx, f); err != nil { // the schema read once
			t.Fatal(err)
		}
		before := count()
		recs, err := s.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return count() - before, recs
	}
	// depth returns the pages a lookup in each of the ledger's B-trees
	// fetches on s: the table's, and each index's.
	depth := func(s *Store) (d [3]int) {
		conn, err := s.r.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for i, q := range []string{
			"SELECT key FROM records WHERE key = 'key-00000007'",
			"SELECT key FROM records INDEXED BY records_state_lease WHERE state = 'done' AND lease_until = 0",
			"SELECT key FROM records INDEXED BY records_run WHERE run_id = 'run-0'",
		} {
			before := cacheFetches(t, conn)
			rows, err := conn.QueryContext(ctx, q+" LIMIT 1")
			if err != nil {
				t.Fatal(err)
			}
			rows.Next()
			if err := rows.Close(); err != nil {
				t.Fatal(err)
			}
			d[i] = cacheFetches(t, conn) - before
		}
		return d
	}
	small, large := open(sizes[0]), open(sizes[1])
	defer small.Close()
	defer large.Close()
	if ds, dl := depth(small), depth(large); ds != dl {
		t.Fatalf("the B-trees (table, state index, run index) are %v pages deep at %d records, %v at %d: choose sizes of one depth", ds, sizes[0], dl, sizes[1])
	}
	for _, c := range []struct {
		f     ledger.Filter
		extra int // the pages more allowed: a leaf per index range, a table leaf per record read beyond the page
	}{
		{ledger.Filter{State: ledger.StatePending, LeaseBefore: now, Limit: limit}, 1},
		{ledger.Filter{State: ledger.StateDone, Limit: limit}, 1},
		{ledger.Filter{State: ledger.StateDone, After: ledger.Cursor{LeaseUntil: now.Add(-time.Hour).Add(100 * time.Millisecond), Key: "key-"}, Limit: limit}, 1},
		{ledger.Filter{RunID: "the-run", Limit: limit}, 1 + pending - limit},
		{ledger.Filter{Limit: limit}, len(listStates)},
		{ledger.Filter{After: ledger.Cursor{LeaseUntil: now.Add(-time.Hour).Add(5 * time.Millisecond), Key: "key-"}, Limit: limit}, len(listStates)},
	} {
		ns, rs := fetched(small, c.f)
		nl, rl := fetched(large, c.f)
		t.Logf("List(%+v): %d pages at %d records, %d at %d (%d and %d listed)", c.f, ns, sizes[0], nl, sizes[1], len(rs), len(rl))
		if len(rs) != limit || len(rl) != limit {
			t.Errorf("List(%+v) listed %d and %d records; want a full page of %d", c.f, len(rs), len(rl), limit)
		}
		if bound := ns + c.extra; nl > bound {
			t.Errorf("List(%+v) fetched %d pages at %d records, %d at %d; want at most %d", c.f, nl, sizes[1], ns, sizes[0], bound)
		}
	}
}

// cacheFetches returns the pages conn has fetched so far (SQLite's
// counters of page-cache hits and misses).
func cacheFetches(t *testing.T, conn *sql.Conn) (n int) {
	t.Helper()
	if err := conn.Raw(func(dc any) error {
		for _, op := range []sqlite.DBStatusOp{sqlite.DBStatusCacheHit, sqlite.DBStatusCacheMiss} {
			cur, _, err := dc.(sqlite.DBStatus).Status(op, false)
			if err != nil {
				return err
			}
			n += cur
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}
