package ledgerpg_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// storeAt returns a store on clock and the name of its table.
func storeAt(t *testing.T, clock clock.Clock) (*ledgerpg.Store, string) {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	return newStore(t, pool, &ledgerpg.Config{Clock: clock, Schema: schema}), pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()
}

// A pending record whose lease is live never counts as expired, even past
// its ExpiresAt (a row that an older writer left so): claims are blocked,
// Get and List return it, Purge keeps it, its owner may complete it.
func TestLiveClaimNeverExpires(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	s, table := storeAt(t, clock)
	ctx := context.Background()
	p := params("k-live", "owner-a", t0)
	if _, err := s.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	pool := pgtest.Pool(t)
	if _, err := pool.Exec(ctx, "UPDATE "+table+" SET expires_at = $1", t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(20 * time.Second)) // past the expiry, within the lease
	if res, err := s.Claim(ctx, params(p.Key, "owner-b", clock.Now())); err != nil || res.Claimed || res.Previous == nil || res.Previous.Owner != p.Owner {
		t.Errorf("claim over a live lease past its expiry = %+v, %v; want refused by owner-a", res, err)
	}
	if r, err := s.Get(ctx, p.Key); err != nil || r.Owner != p.Owner {
		t.Errorf("Get = %+v, %v; want the pending record", r, err)
	}
	if rs, err := s.List(ctx, ledger.Filter{State: ledger.StatePending}); err != nil || len(rs) != 1 {
		t.Errorf("List(pending) = %+v, %v; want the record", rs, err)
	}
	if n, err := s.Purge(ctx, clock.Now()); err != nil || n != 0 {
		t.Errorf("Purge = %d, %v; want 0", n, err)
	}
	if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
		t.Errorf("Complete by the owner: %v", err)
	}
	// Settled, the record has expired.
	if _, err := s.Get(ctx, p.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get after completion past the expiry: %v, want ledger.ErrNotFound", err)
	}
}

// Extend keeps the record at least until the new lease ends.
func TestExtendRaisesExpiry(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	s, _ := storeAt(t, clock)
	ctx := context.Background()
	p := params("k-extend", "owner-a", t0)
	p.ExpiresAt = t0.Add(time.Minute)
	if _, err := s.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lease, expires time.Time }{
		{t0.Add(50 * time.Second), t0.Add(time.Minute)}, // within the retention: unchanged
		{t0.Add(5 * time.Minute), t0.Add(5 * time.Minute)},
		{t0.Add(2 * time.Minute), t0.Add(5 * time.Minute)}, // never lowered
	} {
		if err := s.Extend(ctx, p.Key, p.Owner, c.lease); err != nil {
			t.Fatal(err)
		}
		r, err := s.Get(ctx, p.Key)
		if err != nil || !r.LeaseUntil.Equal(c.lease) || !r.ExpiresAt.Equal(c.expires) {
			t.Errorf("after Extend to %v: %+v, %v; want lease %v, expiry %v", c.lease, r, err, c.lease, c.expires)
		}
	}
	clock.Set(t0.Add(90 * time.Second)) // past the first retention, within the lease
	if res, err := s.Claim(ctx, params(p.Key, "owner-b", clock.Now())); err != nil || res.Claimed {
		t.Errorf("claim within the extended lease = %+v, %v; want refused", res, err)
	}
}

// A pending record whose lease lapsed and whose retention ran out is an
// abandoned claim whose effect may exist: Get, List and Purge keep it, a
// claim of another action is refused, and a claim of the same action
// takes it over and reports it, so that the caller reconciles first.
func TestAbandonedClaimNeverExpires(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	s, _ := storeAt(t, clock)
	ctx := context.Background()
	p := params("k-abandoned", "owner-a", t0)
	p.LeaseUntil, p.ExpiresAt = t0.Add(30*time.Second), t0.Add(time.Minute)
	if _, err := s.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	abandoned, err := s.Get(ctx, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Hour))
	if r, err := s.Get(ctx, p.Key); err != nil || r.Owner != p.Owner {
		t.Errorf("Get past the retention = %+v, %v; want the abandoned claim", r, err)
	}
	if rs, err := s.List(ctx, ledger.Filter{State: ledger.StatePending, LeaseBefore: clock.Now()}); err != nil || len(rs) != 1 {
		t.Errorf("List(abandoned) = %+v, %v; want the claim", rs, err)
	}
	if n, err := s.Purge(ctx, clock.Now()); err != nil || n != 0 {
		t.Errorf("Purge = %d, %v; want 0", n, err)
	}
	other := params(p.Key, "owner-b", clock.Now())
	other.Fingerprint = "fp-other"
	if res, err := s.Claim(ctx, other); err != nil || res.Claimed || res.Previous == nil || res.Previous.Owner != p.Owner {
		t.Errorf("claim of another action = %+v, %v; want refused by the abandoned claim", res, err)
	}
	res, err := s.Claim(ctx, params(p.Key, "owner-c", clock.Now()))
	if err != nil || !res.Claimed || !res.MustReconcile() || res.Attempt != 1 {
		t.Fatalf("claim = %+v, %v; want a takeover that must reconcile, attempt 1", res, err)
	}
	if got := *res.Previous; got.Owner != abandoned.Owner || got.State != ledger.StatePending ||
		!got.AttemptAt.Equal(abandoned.AttemptAt) || !got.LeaseUntil.Equal(abandoned.LeaseUntil) {
		t.Errorf("Previous = %+v, want %+v", got, abandoned)
	}
}

// ledger.Resolve settles uncertain and abandoned records on this store.
func TestResolve(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	s, _ := storeAt(t, clock)
	ctx := context.Background()
	for _, k := range []string{"k-uncertain", "k-pending"} {
		if _, err := s.Claim(ctx, params(k, "owner-a", t0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Fail(ctx, "k-uncertain", "owner-a", ledger.Failure{Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Resolve(ctx, s, "k-pending", ledger.Resolution{By: "alice", Done: true}, clock.Now()); !errors.Is(err, ledger.ErrNotResolvable) {
		t.Errorf("Resolve of a live claim: %v, want ledger.ErrNotResolvable", err)
	}
	r, err := ledger.Resolve(ctx, s, "k-uncertain", ledger.Resolution{By: "alice", Done: true, Ref: "re_1", Summary: "refunded"}, clock.Now())
	if err != nil || r.State != ledger.StateDone || r.Ref != "re_1" || r.ResolvedBy() != "alice" {
		t.Errorf("Resolve(done) = %+v, %v", r, err)
	}
	clock.Advance(time.Minute) // the claim on k-pending lapses
	r, err = ledger.Resolve(ctx, s, "k-pending", ledger.Resolution{By: "bob", Reason: "not at the provider"}, clock.Now())
	if err != nil || r.State != ledger.StateFailed || r.Attempt != 2 || r.ResolvedBy() != "bob" {
		t.Errorf("Resolve(failed) = %+v, %v", r, err)
	}
}

// Purge deletes in batches and passes over a record that a transaction
// holds instead of waiting for it.
func TestPurgeBatches(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s := newStore(t, pool, &ledgerpg.Config{Clock: clock, Schema: schema, PurgeBatch: 2})
	ctx := context.Background()
	for i := range 6 {
		p := params(fmt.Sprintf("k-purge-%d", i), "owner-a", t0)
		p.ExpiresAt = t0.Add(time.Minute)
		if _, err := s.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT FROM "+pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()+" WHERE key = 'k-purge-0' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	clock.Set(t0.Add(time.Hour))
	if n, err := s.Purge(ctx, clock.Now()); err != nil || n != 5 {
		t.Errorf("Purge with one record locked = %d, %v; want 5", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, clock.Now()); err != nil || n != 1 {
		t.Errorf("Purge after the lock = %d, %v; want 1", n, err)
	}
}
