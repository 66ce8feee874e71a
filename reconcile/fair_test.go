package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/reconcile"
)

// unsettled is a ledger holding n uncertain send_mail records that no
// sweep can settle (their reconciler cannot tell) and, newest of all, one
// uncertain refund that a sweep settles (its reconciler finds the refund).
// It counts the times each record was examined.
type unsettled struct {
	store ledger.Store
	clock *clock.Fake
	tools []client.Tool
	keys  []string // the send_mail records, oldest first

	mu   sync.Mutex
	seen map[string]int
}

func newUnsettled(t *testing.T, open func(*testing.T, clock.Clock) ledger.Store, n int) *unsettled {
	t.Helper()
	u := &unsettled{clock: clock.NewFake(t0), seen: map[string]int{}}
	u.store = open(t, u.clock)
	examine := func(rec client.Reconciliation) client.Reconciler {
		return client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
			u.mu.Lock()
			defer u.mu.Unlock()
			u.seen[inv.Key]++
			return rec, nil
		})
	}
	u.tools = []client.Tool{
		{Name: "send_mail", Reconciler: examine(client.Reconciliation{Verdict: client.VerdictUnknown, Reason: "no lookup"})},
		{Name: "refund", Reconciler: examine(client.Reconciliation{Verdict: client.VerdictFound,
			Effect: client.Effect{Summary: "refunded", Ref: "re_1"}})},
	}
	ctx := context.Background()
	uncertain := func(key, tool string) {
		t.Helper()
		now := u.clock.Now()
		if _, err := u.store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: tool, RunID: "run-1", Owner: "o-" + key,
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := u.store.Fail(ctx, key, "o-"+key, ledger.Failure{Reason: "timeout"}); err != nil {
			t.Fatal(err)
		}
		u.clock.Advance(time.Second)
	}
	for i := range n {
		u.keys = append(u.keys, fmt.Sprintf("mail-%03d", i))
		uncertain(u.keys[i], "send_mail")
	}
	uncertain("refund", "refund")
	u.clock.Advance(time.Hour)
	return u
}

// sweep runs one sweep as a fresh process would: a new Sweeper that knows
// nothing of the sweeps before.
func (u *unsettled) sweep(t *testing.T, limit int) reconcile.Report {
	t.Helper()
	rep, err := reconcile.NewSweeper(u.store, u.tools, &reconcile.SweeperConfig{Clock: u.clock, Limit: limit}).
		Sweep(context.Background())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return rep
}

// The repro of the starved sweeper: 150 records that no sweep settles ahead
// of one it can settle, Limit 100. The refund is settled within 3 sweeps,
// on every ledger, each sweep a fresh process; the records it could not
// settle keep their facts.
func TestSweeperReachesRecordsBehindUnsettled(t *testing.T) {
	t.Parallel()
	for _, l := range ledgers {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			u := newUnsettled(t, l.open, 150)
			before, err := u.store.Get(context.Background(), u.keys[0])
			if err != nil {
				t.Fatal(err)
			}
			var reps []reconcile.Report
			for len(reps) < 3 {
				reps = append(reps, u.sweep(t, 100))
				if r, err := u.store.Get(context.Background(), "refund"); err != nil || r.State == ledger.StateDone {
					break
				}
			}
			if r, err := u.store.Get(context.Background(), "refund"); err != nil || r.State != ledger.StateDone {
				t.Fatalf("refund after %d sweeps (%+v): %+v, %v; want done", len(reps), reps, r, err)
			}
			after, err := u.store.Get(context.Background(), u.keys[0])
			if err != nil || after.State != ledger.StateUncertain || after.Owner != before.Owner ||
				!after.LeaseUntil.Equal(before.LeaseUntil) || after.Reason != before.Reason {
				t.Errorf("an unsettled record changed: %+v, %v; was %+v", after, err, before)
			}
		})
	}
}

// With a small Limit, every stuck record is examined within
// ceil(stuck/Limit) sweeps, none more than twice meanwhile.
func TestSweeperExaminesEveryRecordInTurn(t *testing.T) {
	t.Parallel()
	for _, l := range ledgers {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			const n, limit = 30, 7
			u := newUnsettled(t, l.open, n)
			sweeps := (n + 1 + limit - 1) / limit
			for range sweeps {
				if rep := u.sweep(t, limit); rep.Examined != limit {
					t.Errorf("sweep examined %d records, want %d", rep.Examined, limit)
				}
			}
			for _, key := range append(u.keys, "refund") {
				if c := u.seen[key]; c < 1 || c > 2 {
					t.Errorf("%s examined %d times in %d sweeps of %d, want once or twice", key, c, sweeps, limit)
				}
			}
		})
	}
}

// A sweep that died while it wrote its position left the position record
// pending: later sweeps neither examine it nor stop; the next one that
// moves the position takes the record over.
func TestSweeperPositionLeftPending(t *testing.T) {
	t.Parallel()
	u := newUnsettled(t, func(t *testing.T, c clock.Clock) ledger.Store { return memStore(c) }, 10)
	u.sweep(t, 4)
	ctx := context.Background()
	key := reconcile.CursorKey("")
	now := u.clock.Now()
	if cr, err := u.store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: reconcile.CursorTool, Owner: "died",
		Fingerprint: reconcile.CursorTool, LeaseUntil: now.Add(time.Millisecond), ExpiresAt: now.Add(time.Hour)}); err != nil || !cr.Claimed {
		t.Fatalf("claim of the position record: %+v, %v", cr, err)
	}
	u.clock.Advance(time.Second)
	if rep := u.sweep(t, 4); rep.Examined != 4 || rep.Skipped != 0 {
		t.Errorf("sweep with the position record pending: %+v, want 4 examined, none skipped", rep)
	}
	if r, err := u.store.Get(ctx, key); err != nil || r.State != ledger.StateFailed || r.Owner == "died" {
		t.Errorf("position record after the sweep: %+v, %v; want failed, taken over", r, err)
	}
}
