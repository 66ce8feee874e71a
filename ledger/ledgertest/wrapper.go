package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// RunWrapper checks that a Store wrapping another hides none of the
// optional interfaces (ledger.Purger, ledger.Watcher, ledger.RunIndexer)
// of the store it wraps. wrap returns the wrapper of next.
//
// What it requires: over a store that has all three, the wrapper's
// RunsIndexed gives the wrapped store's answer (false and true), its
// Watch signals a settle made through the wrapper, and its Purge deletes
// what the wrapped store's would; over a store that has none, ledger.RunsIndexed
// of the wrapper is true, and its Watch, when it has one, returns an error
// wrapping ledger.ErrNoWatch, and its Purge, when it has one, an error
// wrapping errors.ErrUnsupported.
func RunWrapper(t *testing.T, wrap func(next ledger.Store) ledger.Store) {
	t.Helper()
	ctx := context.Background()
	for _, indexed := range []bool{false, true} {
		clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		next := &everything{Store: ledgermem.New(&ledgermem.Config{Clock: clk}), indexed: indexed}
		w := wrap(next)
		if got := ledger.RunsIndexed(w); got != indexed {
			t.Errorf("%T over a store whose RunsIndexed is %v says %v", w, indexed, got)
		}
		watcher, ok := w.(ledger.Watcher)
		if !ok {
			t.Errorf("%T over a ledger.Watcher is no ledger.Watcher", w)
		} else {
			p := ledger.ClaimParams{Key: "k-watched", Tool: "send_reply", RunID: "run-1", Owner: "o1",
				LeaseUntil: clk.Now().Add(time.Minute), Fingerprint: "fp", ExpiresAt: clk.Now().Add(time.Hour)}
			if _, err := w.Claim(ctx, p); err != nil {
				t.Fatal(err)
			}
			settled, stop, err := watcher.Watch(ctx, p.Key)
			if err != nil {
				t.Fatalf("%T: Watch: %v", w, err)
			}
			if err := w.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent"}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-settled:
			case <-time.After(watchDeadline):
				t.Errorf("%T: the watch got no signal of the settle", w)
			}
			stop()
		}
		purger, ok := w.(ledger.Purger)
		if !ok {
			t.Errorf("%T over a ledger.Purger is no ledger.Purger", w)
		} else {
			clk.Advance(2 * time.Hour)
			n, err := purger.Purge(ctx, clk.Now())
			if err != nil || n != 1 {
				t.Errorf("%T: Purge deleted %d records (%v), want the 1 expired", w, n, err)
			}
		}
	}
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	w := wrap(bare{ledgermem.New(&ledgermem.Config{Clock: clk})})
	if !ledger.RunsIndexed(w) {
		t.Errorf("%T over a store that says nothing of runs says they are not indexed", w)
	}
	if watcher, ok := w.(ledger.Watcher); ok {
		if _, _, err := watcher.Watch(ctx, "k"); !errors.Is(err, ledger.ErrNoWatch) {
			t.Errorf("%T over a store that cannot watch: Watch returns %v, want ledger.ErrNoWatch", w, err)
		}
	}
	if purger, ok := w.(ledger.Purger); ok {
		if _, err := purger.Purge(ctx, clk.Now()); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%T over a store that does not purge: Purge returns %v, want errors.ErrUnsupported", w, err)
		}
	}
}

// everything is a memory store that says whether its runs are indexed.
type everything struct {
	*ledgermem.Store
	indexed bool
}

func (e *everything) RunsIndexed() bool { return e.indexed }

// bare is a store with no optional interface.
type bare struct{ ledger.Store }
