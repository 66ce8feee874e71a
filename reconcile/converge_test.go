package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

// A mail-like provider: a reference search that lags behind sends, no
// deduplication, no upsert. The first request never commits (it timed out
// before the provider processed it). With the default configuration the
// action must not stay uncertain forever: once the bound derived from the
// record has passed, the next call performs it exactly once, and so does a
// sweeper pass followed by a call.
func TestDefaultsConvergeWithoutDedup(t *testing.T) {
	t.Parallel()
	const lag = 5 * time.Minute
	caps := providers.Capabilities{Lookup: providers.Eventual, IndexLag: lag}
	setup := func(t *testing.T) (*world, *client.Executor, *atomic.Int64) {
		w := newWorld(t, memStore, caps)
		// The default policy, with a clock that sleeps by advancing.
		w.tool.Reconciler = reconcile.New(w.shop, &reconcile.Config{Clock: w.clock, Sleep: func(ctx context.Context, d time.Duration) error {
			w.clock.Advance(d)
			return ctx.Err()
		}})
		var sends atomic.Int64
		run := w.tool.Run
		w.tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			if sends.Add(1) == 1 {
				return client.Effect{}, client.Ambiguous(errors.New("timeout awaiting the response"))
			}
			return run(ctx, inv)
		}
		exec := client.New(w.store, &client.Config{Clock: w.clock})
		if err := exec.Register(w.tool); err != nil {
			t.Fatal(err)
		}
		return w, exec, &sends
	}
	call := client.Call{Tool: "order", Input: json.RawMessage(`{"id": "m-1"}`)}
	// bound is the documented longest time uncertain: from the record's
	// lease end (when it was settled), DefaultInFlight plus the index lag.
	bound := func(t *testing.T, w *world, key string) time.Time {
		rec := w.state(t, key)
		if rec.State != ledger.StateUncertain {
			t.Fatalf("record %s, want uncertain", rec.State)
		}
		return rec.LeaseUntil.Add(reconcile.DefaultInFlight + lag)
	}
	first := func(t *testing.T, exec *client.Executor) client.Result {
		r, err := exec.Execute(context.Background(), "run-1", call)
		if err != nil || r.Outcome != client.Uncertain {
			t.Fatalf("first call: %+v, %v; want uncertain", r, err)
		}
		return r
	}

	t.Run("next call after the bound", func(t *testing.T) {
		t.Parallel()
		w, exec, sends := setup(t)
		r := first(t, exec)
		w.clock.Set(bound(t, w, r.Key).Add(time.Second))
		r2, err := exec.Execute(context.Background(), "run-1", call)
		if err != nil || r2.Outcome != client.Executed || r2.Attempt != 1 {
			t.Fatalf("repeat after the bound: %+v, %v; want executed", r2, err)
		}
		r3, err := exec.Execute(context.Background(), "run-1", call)
		if err != nil || r3.Outcome != client.AlreadyDone {
			t.Fatalf("third call: %+v, %v", r3, err)
		}
		if n := len(w.shop.effects); n != 1 || sends.Load() != 2 {
			t.Fatalf("%d effects from %d sends, want 1 effect", n, sends.Load())
		}
	})

	t.Run("sweeper after the bound", func(t *testing.T) {
		t.Parallel()
		w, exec, sends := setup(t)
		r := first(t, exec)
		b := bound(t, w, r.Key)
		before := w.state(t, r.Key)
		// Inside the bound a pass learns nothing and writes nothing, so the
		// bound does not move.
		w.clock.Set(b.Add(-time.Minute))
		sw := reconcile.NewSweeper(w.store, []client.Tool{w.tool}, &reconcile.SweeperConfig{Clock: w.clock})
		rep, err := sw.Sweep(context.Background())
		if err != nil || rep != (reconcile.Report{Examined: 1, Uncertain: 1}) {
			t.Fatalf("sweep inside the bound: %+v, %v", rep, err)
		}
		if got := w.state(t, r.Key); !got.LeaseUntil.Equal(before.LeaseUntil) || got.Owner != before.Owner {
			t.Fatalf("an inconclusive sweep moved the record: %+v", got)
		}
		w.clock.Set(b.Add(time.Second))
		rep, err = sw.Sweep(context.Background())
		if err != nil || rep != (reconcile.Report{Examined: 1, Failed: 1}) {
			t.Fatalf("sweep after the bound: %+v, %v; want the record failed (nothing happened)", rep, err)
		}
		r2, err := exec.Execute(context.Background(), "run-1", call)
		if err != nil || r2.Outcome != client.Executed || r2.Attempt != 2 {
			t.Fatalf("call after the sweep: %+v, %v; want executed as attempt 2", r2, err)
		}
		if n := len(w.shop.effects); n != 1 || sends.Load() != 2 {
			t.Fatalf("%d effects from %d sends, want 1 effect", n, sends.Load())
		}
	})
}
