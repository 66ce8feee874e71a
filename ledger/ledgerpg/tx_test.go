package ledgerpg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// A claim, an effect row and the record made in one transaction commit
// together; other sessions see none of it before, and a claim of theirs
// on the key waits for the transaction and then finds the record done.
func TestInTxCommit(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := newStore(t, pool, &ledgerpg.Config{Schema: schema})
	refunds := pgx.Identifier{schema, "refunds"}.Sanitize()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+refunds+" (order_id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	st := s.InTx(tx)
	p := params("k-tx", "owner-a", time.Now())
	if res, err := st.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim in the transaction = %+v, %v", res, err)
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+refunds+" VALUES ('order-7')"); err != nil {
		t.Fatal(err)
	}
	if err := st.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "refunded order-7"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, p.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get from another session before the commit: %v, want ledger.ErrNotFound", err)
	}
	var xid string
	if err := tx.QueryRow(ctx, "SELECT pg_current_xact_id()::xid::text").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	type claimed struct {
		res ledger.ClaimResult
		err error
	}
	other := make(chan claimed, 1)
	go func() {
		res, err := s.Claim(ctx, params(p.Key, "owner-b", time.Now()))
		other <- claimed{res, err}
	}()
	// Wait, with a deadline, until the other claim waits for the transaction.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var waiting bool
		if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted
			AND locktype = 'transactionid' AND transactionid::text = $1)`, xid).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case c := <-other:
			t.Fatalf("a claim of another session returned while the transaction was open: %+v, %v", c.res, c.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the other session's claim never waited for the transaction")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	c := <-other
	if c.err != nil || c.res.Claimed || c.res.Previous == nil || c.res.Previous.State != ledger.StateDone {
		t.Errorf("the other session's claim after the commit = %+v, %v; want refused by the done record", c.res, c.err)
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+refunds).Scan(&n); err != nil || n != 1 {
		t.Errorf("refunds after the commit: %d, %v; want 1", n, err)
	}
}

// Rolled back, the claim and the record vanish with the effect row: the
// next claim starts afresh.
func TestInTxRollback(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	s := newStore(t, pool, nil)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := s.InTx(tx)
	p := params("k-rollback", "owner-a", time.Now())
	if _, err := st.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := st.Fail(ctx, p.Key, p.Owner, ledger.Failure{Reason: "maybe"}); err != nil {
		t.Fatal(err)
	}
	if err := st.Extend(ctx, p.Key, p.Owner, time.Now().Add(time.Hour)); !errors.Is(err, ledger.ErrNotOwner) {
		t.Errorf("Extend after Fail in the transaction: %v, want ledger.ErrNotOwner", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, params(p.Key, "owner-b", time.Now()))
	if err != nil || !res.Claimed || res.Previous != nil {
		t.Errorf("claim after the rollback = %+v, %v; want a fresh claim", res, err)
	}
}
