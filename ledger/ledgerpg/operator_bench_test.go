package ledgerpg_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// beforeAfter returns a store on a table at version 4 as the package
// wrote it before migration 5 (before), and one on a table at the latest
// version (after), both on pool, with statements sent in mode.
func beforeAfter(b *testing.B, pool *pgxpool.Pool, mode pgx.QueryExecMode) (before, after *ledgerpg.Store, schemas [2]string) {
	return versionsPaired(b, pool, mode, 4)
}

// versionsPaired returns a store on a table at version from (with the
// statements of that version where they differ) and one at the latest.
func versionsPaired(b *testing.B, pool *pgxpool.Pool, mode pgx.QueryExecMode, from int) (before, after *ledgerpg.Store, schemas [2]string) {
	ctx := context.Background()
	for i, v := range []int{from, ledgerpg.Versions} {
		cfg := &ledgerpg.Config{Schema: pgtest.Schema(b, pool), ExecMode: mode}
		if err := ledgerpg.MigrateTo(ctx, pool, cfg, v); err != nil {
			b.Fatal(err)
		}
		s, err := ledgerpg.New(pool, cfg)
		if err != nil {
			b.Fatal(err)
		}
		schemas[i] = cfg.Schema
		switch {
		case i == 1:
			after = s
		case v < 5:
			before = ledgerpg.Before5(s)
		default:
			before = s
		}
	}
	return before, after, schemas
}

// A fresh action (Claim and Complete, a round trip each), paired in every
// iteration: before migration 5 (its indexes, the UPDATEs sent by the
// client, unprepared), after it unprepared (pgx.QueryExecModeExec, the
// default: through any pooler), and after it with the statements prepared
// once per connection (pgx.QueryExecModeCacheStatement: direct
// connections, PgBouncer >= 1.21 with max_prepared_statements).
func BenchmarkFreshBeforeAfter(b *testing.B) {
	ctx := context.Background()
	pool := pgtest.Pool(b)
	before, after, _ := beforeAfter(b, pool, pgx.QueryExecModeExec)
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(b, pool), ExecMode: pgx.QueryExecModeCacheStatement}
	cached := newStore(b, pool, cfg)
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	fresh := func(s *ledgerpg.Store, key string) time.Duration {
		t0 := time.Now()
		p := ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: t0.Add(time.Minute), Fingerprint: "fp", ExpiresAt: t0.Add(time.Hour)}
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatal(res, err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var t [3]time.Duration
	for i := range b.N {
		key := actionKey("ba-", i)
		// The order turns with i, so that none is always first.
		for j := range 3 {
			k := (i + j) % 3
			t[k] += fresh([]*ledgerpg.Store{before, after, cached}[k], key)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(t[0])/n, "before-ns/op")
	b.ReportMetric(float64(t[1])/n, "after-ns/op")
	b.ReportMetric(float64(t[2])/n, "after_cached-ns/op")
	b.ReportMetric(float64(t[1])/float64(t[0]), "after/before")
	b.ReportMetric(float64(t[2])/float64(t[0]), "after_cached/before")
}

// The WAL a fresh action (Claim and Complete), a heartbeat (Extend) and a
// refused claim write, before migration 5 and after it, paired in every
// iteration: each write runs in a transaction of its own whose id picks
// its records out of the server's WAL (pg_walinspect), so that other
// sessions of the server do not count. Reported per action: WAL bytes
// (without full-page images, which follow checkpoints), WAL records and
// index entries (B-tree insertions); and transactions the refused claims
// wrote (0: they write nothing).
func BenchmarkWALPerAction(b *testing.B) { walPerAction(b, 4) }

// The same before migration 7 (the partial index of the settled records
// by time, and that of the counter records) and after it: a settle adds
// one index entry.
func BenchmarkWALPerActionSettledIndex(b *testing.B) { walPerAction(b, 6) }

func walPerAction(b *testing.B, from int) {
	ctx := context.Background()
	pool := pgtest.Pool(b)
	before, after, schemas := versionsPaired(b, pool, pgx.QueryExecModeExec, from)
	ext := pgx.Identifier{schemas[1]}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA "+ext); err != nil {
		b.Skipf("pg_walinspect: %v", err)
	}
	// inTx runs f in a transaction and returns its id, "" when it wrote
	// nothing.
	inTx := func(s *ledgerpg.Store, f func(s *ledgerpg.Store) error) string {
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if err := f(s.InTx(tx)); err != nil {
			b.Fatal(err)
		}
		var xid *string
		if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id_if_assigned()::xid::text").Scan(&xid); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		if xid == nil {
			return ""
		}
		return *xid
	}
	type xids struct{ fresh, beat, refused []string }
	var x [2]xids
	var start string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&start); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		for k, s := range []*ledgerpg.Store{before, after} {
			now := time.Now()
			p := ledger.ClaimParams{Key: actionKey("wal-", i), Tool: "send_reply", RunID: "run-" + fmt.Sprint(i/10), Owner: "owner",
				LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
			x[k].fresh = append(x[k].fresh, inTx(s, func(s *ledgerpg.Store) error {
				res, err := s.Claim(ctx, p)
				if err == nil && !res.Claimed {
					err = fmt.Errorf("claim refused: %+v", res)
				}
				return err
			}))
			x[k].beat = append(x[k].beat, inTx(s, func(s *ledgerpg.Store) error {
				return s.Extend(ctx, p.Key, p.Owner, now.Add(2*time.Minute))
			}))
			x[k].fresh = append(x[k].fresh, inTx(s, func(s *ledgerpg.Store) error {
				return s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)})
			}))
			dup := p
			dup.Owner = "owner-2"
			x[k].refused = append(x[k].refused, inTx(s, func(s *ledgerpg.Store) error {
				res, err := s.Claim(ctx, dup)
				if err == nil && res.Claimed {
					err = fmt.Errorf("a duplicate claim of a done record won: %+v", res)
				}
				return err
			}))
		}
	}
	b.StopTimer()
	var end string
	if err := pool.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn()::text").Scan(&end); err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	for k, side := range []string{"before", "after"} {
		for _, kind := range []struct {
			name string
			xids []string
		}{{"fresh", x[k].fresh}, {"beat", x[k].beat}} {
			var records, bytes, entries int64
			if err := pool.QueryRow(ctx, `SELECT count(*), COALESCE(sum(record_length - fpi_length), 0),
				count(*) FILTER (WHERE resource_manager = 'Btree' AND record_type IN ('INSERT_LEAF', 'INSERT_POST', 'SPLIT_L', 'SPLIT_R'))
				FROM `+ext+`.pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) WHERE xid::text = ANY($3)`,
				start, end, kind.xids).Scan(&records, &bytes, &entries); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(bytes)/n, side+"-wal-B/"+kind.name)
			b.ReportMetric(float64(records)/n, side+"-wal-records/"+kind.name)
			b.ReportMetric(float64(entries)/n, side+"-index-entries/"+kind.name)
		}
		b.ReportMetric(float64(len(slices.DeleteFunc(x[k].refused, func(s string) bool { return s == "" })))/n, side+"-writing-refusals/op")
	}
}

// Rounds of 16 simultaneous claims of one new key, each in a transaction
// of its own, before migration 5 and after it, paired in every iteration
// (one round each): reported per refused claim, how many updated a row
// (pg_stat_xact_user_tables.n_tup_upd of its transaction; 0 after), and
// the 99th percentile of the refused claims' latency.
func BenchmarkDuplicateClaims(b *testing.B) {
	const callers = 16
	ctx := context.Background()
	pool := pgtest.Pool(b)
	before, after, schemas := beforeAfter(b, pool, pgx.QueryExecModeExec)
	var (
		refused, wrote [2]int
		lat            [2][]time.Duration
		rounds         [2]time.Duration
	)
	round := func(k int, s *ledgerpg.Store, key string) {
		table := pgx.Identifier{schemas[k], ledgerpg.DefaultTable}.Sanitize()
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			ready sync.WaitGroup
		)
		gate := make(chan struct{})
		ready.Add(callers)
		t0 := time.Now()
		for c := range callers {
			wg.Go(func() {
				tx, err := pool.Begin(ctx)
				ready.Done()
				if err != nil {
					b.Error(err)
					return
				}
				defer func() { _ = tx.Rollback(ctx) }()
				<-gate
				now := time.Now()
				res, err := s.InTx(tx).Claim(ctx, ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1",
					Owner: fmt.Sprintf("owner-%d", c), LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)})
				d := time.Since(now)
				var upd int64
				if err == nil {
					err = tx.QueryRow(ctx, `SELECT COALESCE(sum(n_tup_upd), 0)::bigint FROM pg_stat_xact_user_tables
						WHERE relid = $1::regclass`, table).Scan(&upd)
				}
				if err == nil {
					err = tx.Commit(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
				if !res.Claimed {
					mu.Lock()
					refused[k]++
					lat[k] = append(lat[k], d)
					if upd > 0 {
						wrote[k]++
					}
					mu.Unlock()
				}
			})
		}
		ready.Wait()
		close(gate)
		wg.Wait()
		rounds[k] += time.Since(t0)
	}
	for i := range b.N {
		for j := range 2 {
			k := (i + j) % 2
			round(k, []*ledgerpg.Store{before, after}[k], actionKey("dup-", i))
		}
	}
	n := float64(b.N)
	for k, side := range []string{"before", "after"} {
		b.ReportMetric(float64(rounds[k])/n, side+"-ns/op")
		b.ReportMetric(float64(wrote[k])/float64(max(refused[k], 1)), side+"-writes/refused")
		slices.Sort(lat[k])
		if len(lat[k]) > 0 {
			b.ReportMetric(float64(lat[k][len(lat[k])*99/100]), side+"-p99-ns")
		}
	}
	b.ReportMetric(float64(rounds[1])/float64(rounds[0]), "after/before")
}
