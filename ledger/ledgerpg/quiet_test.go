package ledgerpg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// raced is what a claim that waited for another session's open
// transaction got, and the rows its own transaction updated
// (pg_stat_xact_user_tables.n_tup_upd).
type raced struct {
	res     ledger.ClaimResult
	err     error
	updated int64
}

// raceClaims makes n claims of key, each in a transaction of its own,
// while the transaction tx holds the key's row (a claim or a write it has
// not committed), waits until every claim waits for tx, commits tx, and
// returns what the claims got.
func raceClaims(t *testing.T, pool *pgxpool.Pool, s *ledgerpg.Store, table string, tx pgx.Tx, key string, n int) []raced {
	t.Helper()
	ctx := context.Background()
	out := make(chan raced, n)
	pids := make(chan int32, n)
	for i := range n {
		go func() {
			r := raced{err: fmt.Errorf("claim %d: no transaction", i)}
			defer func() { out <- r }()
			own, err := pool.Begin(ctx)
			if err != nil {
				r.err = err
				pids <- 0
				return
			}
			defer func() { _ = own.Rollback(ctx) }()
			var pid int32
			if r.err = own.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); r.err != nil {
				pids <- 0
				return
			}
			pids <- pid
			if r.res, r.err = s.InTx(own).Claim(ctx, params(key, fmt.Sprintf("owner-%d", i), time.Now())); r.err != nil {
				return
			}
			if r.err = own.QueryRow(ctx, `SELECT COALESCE(sum(n_tup_upd), 0)::bigint FROM pg_stat_xact_user_tables
				WHERE relid = $1::regclass`, table).Scan(&r.updated); r.err != nil {
				return
			}
			r.err = own.Commit(ctx)
		}()
	}
	waiting := make([]int32, 0, n)
	for range n {
		waiting = append(waiting, <-pids)
	}
	// Wait, with a deadline, until every claim waits for a lock of tx.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var blocked int
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT pid) FROM pg_locks WHERE NOT granted AND pid = ANY($1)`,
			waiting).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if blocked == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d claims wait for the open transaction", blocked, n)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	rs := make([]raced, n)
	for i := range rs {
		rs[i] = <-out
	}
	return rs
}

// Claims that lose a race write nothing: four claims of a key
// wait for a concurrent claim's transaction, of a new key (the winner's
// INSERT) and of a failed record (the winner's takeover); once it commits,
// each is refused by the winner's record, and its own transaction updated
// no row. At version 4 (the claim's INSERT ... ON CONFLICT DO UPDATE)
// every refused claim rewrote the row, which the test tells apart.
func TestRefusedClaimWritesNothing(t *testing.T) {
	t.Parallel()
	for _, v := range []int{4, ledgerpg.Versions} {
		for _, over := range []string{"new key", "failed record"} {
			t.Run(fmt.Sprintf("version %d/%s", v, over), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				pool := pgtest.Pool(t)
				cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool)}
				if err := ledgerpg.MigrateTo(ctx, pool, cfg, v); err != nil {
					t.Fatal(err)
				}
				s, err := ledgerpg.New(pool, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if v < 5 {
					s = ledgerpg.Before5(s)
				}
				table := pgx.Identifier{cfg.Schema, ledgerpg.DefaultTable}.Sanitize()
				key := "k-race"
				if over == "failed record" {
					p := params(key, "owner-old", time.Now())
					if _, err := s.Claim(ctx, p); err != nil {
						t.Fatal(err)
					}
					if err := s.Fail(ctx, key, p.Owner, ledger.Failure{Definite: true, Reason: "declined"}); err != nil {
						t.Fatal(err)
					}
				}
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = tx.Rollback(ctx) }()
				if res, err := s.InTx(tx).Claim(ctx, params(key, "owner-winner", time.Now())); err != nil || !res.Claimed {
					t.Fatal(res, err)
				}
				for i, r := range raceClaims(t, pool, s, table, tx, key, 4) {
					if r.err != nil || r.res.Claimed || r.res.Previous == nil || r.res.Previous.Owner != "owner-winner" {
						t.Errorf("claim %d = %+v, %v; want refused by owner-winner's record", i, r.res, r.err)
					}
					switch {
					case v < 5 && r.updated != 1:
						t.Errorf("claim %d at version %d updated %d rows; want 1 (the rewrite this test detects)", i, v, r.updated)
					case v >= 5 && r.updated != 0:
						t.Errorf("claim %d updated %d rows; a refused claim must write nothing", i, r.updated)
					}
				}
			})
		}
	}
}

// A record deleted (by Purge) between a claim's read and its takeover: the
// takeover updates nothing, and the claim reads again and creates the
// record, as over an absent key.
func TestClaimAfterConcurrentDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	s, table := storeAt(t, clock.System{})
	key := "k-deleted"
	p := params(key, "owner-old", time.Now())
	if _, err := s.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ctx, key, p.Owner, ledger.Failure{Definite: true, Reason: "declined"}); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if tag, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE key = $1", key); err != nil || tag.RowsAffected() != 1 {
		t.Fatal(tag, err)
	}
	r := raceClaims(t, pool, s, table, tx, key, 1)[0]
	if r.err != nil || !r.res.Claimed || r.res.Previous != nil || r.updated != 0 {
		t.Errorf("claim after the delete = %+v, %v, %d rows updated; want a fresh claim that updated nothing", r.res, r.err, r.updated)
	}
	if rec, err := s.Get(ctx, key); err != nil || rec.Owner != "owner-0" || rec.State != ledger.StatePending {
		t.Errorf("Get = %+v, %v; want owner-0's pending record", rec, err)
	}
}
