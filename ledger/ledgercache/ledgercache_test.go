package ledgercache_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgercache"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgertest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		return ledgercache.New(ledgermem.New(&ledgermem.Config{Clock: clock}), &ledgercache.Config{Clock: clock})
	})
}

// counting counts the requests that reach the wrapped store.
type counting struct {
	ledger.Store
	n atomic.Int64
}

func (c *counting) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	c.n.Add(1)
	return c.Store.Claim(ctx, p)
}

func (c *counting) Complete(ctx context.Context, key, owner string, comp ledger.Completion) error {
	c.n.Add(1)
	return c.Store.Complete(ctx, key, owner, comp)
}

func (c *counting) Get(ctx context.Context, key string) (*ledger.Record, error) {
	c.n.Add(1)
	return c.Store.Get(ctx, key)
}

func newExec(t *testing.T, clock clock.Clock, store ledger.Store) (*client.Executor, *atomic.Int64) {
	t.Helper()
	var runs atomic.Int64
	exec := client.New(store, &client.Config{Clock: clock, Retention: time.Hour})
	err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.Integer}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			runs.Add(1)
			return client.Effect{Summary: "reply sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return exec, &runs
}

func call(text string) client.Call {
	return client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42, "text": "` + text + `"}`)}
}

// A repeat of an action this process completed costs no ledger request,
// and is answered exactly as the ledger would answer it.
func TestRepeatCostsNoRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clock.NewFake(time.Unix(1_800_000_000, 0))
	inner := &counting{Store: ledgermem.New(&ledgermem.Config{Clock: clock})}
	cached := ledgercache.New(inner, &ledgercache.Config{Clock: clock})
	exec, runs := newExec(t, clock, cached)

	first, err := exec.Execute(ctx, "run-1", call("Hello"))
	if err != nil || first.Outcome != client.Executed {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	if n := inner.n.Load(); n != 2 {
		t.Fatalf("fresh action: %d ledger requests, want 2 (claim, complete)", n)
	}
	again, err := exec.Execute(ctx, "run-1", call("Hello again"))
	if err != nil || again.Outcome != client.AlreadyDone {
		t.Fatalf("repeat: %+v, %v", again, err)
	}
	if n := inner.n.Load(); n != 2 {
		t.Errorf("repeat: %d ledger requests in all, want still 2", n)
	}
	if runs.Load() != 1 {
		t.Errorf("tool ran %d times", runs.Load())
	}

	// The same repeat through the bare ledger gives the same answer.
	bare, _ := newExec(t, clock, inner.Store)
	want, err := bare.Execute(ctx, "run-1", call("Hello once more"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Text != want.Text || again.Ref != want.Ref || string(again.Payload) != string(want.Payload) || again.Attempt != want.Attempt {
		t.Errorf("cached replay %+v\nledger replay %+v", again, want)
	}
	if st := cached.Stats(); st.Hits != 1 {
		t.Errorf("stats %+v, want 1 hit", st)
	}
}

// Entries end with the record's retention and with the cache's TTL, and
// only done records are cached.
func TestInvalidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clock.NewFake(time.Unix(1_800_000_000, 0))
	inner := &counting{Store: ledgermem.New(&ledgermem.Config{Clock: clock})}
	cached := ledgercache.New(inner, &ledgercache.Config{Clock: clock, TTL: time.Minute})
	now := clock.Now()
	p := ledger.ClaimParams{Key: "k1", Tool: "t", RunID: "r", Owner: "o1", Fingerprint: "f",
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	if _, err := cached.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Pending: every Get reaches the ledger.
	for range 2 {
		if _, err := cached.Get(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
	}
	if n := inner.n.Load(); n != 3 {
		t.Fatalf("%d requests, want 3: a pending record is never cached", n)
	}
	if err := cached.Complete(ctx, "k1", "o1", ledger.Completion{Summary: "s", Ref: "r"}); err != nil {
		t.Fatal(err)
	}
	before := inner.n.Load()
	if rec, err := cached.Get(ctx, "k1"); err != nil || rec.State != ledger.StateDone || inner.n.Load() != before {
		t.Fatalf("done record: %+v, %v, %d requests", rec, err, inner.n.Load()-before)
	}
	clock.Advance(time.Minute) // the cache's TTL
	if _, err := cached.Get(ctx, "k1"); err != nil || inner.n.Load() != before+1 {
		t.Fatalf("after the TTL: %v, %d requests, want 1", err, inner.n.Load()-before)
	}
	clock.Advance(time.Hour) // the record's retention
	if _, err := cached.Get(ctx, "k1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("after retention: %v, want not found", err)
	}
	res, err := cached.Claim(ctx, ledger.ClaimParams{Key: "k1", Tool: "t", RunID: "r", Owner: "o2", Fingerprint: "f",
		LeaseUntil: clock.Now().Add(time.Minute), ExpiresAt: clock.Now().Add(time.Hour)})
	if err != nil || !res.Claimed {
		t.Fatalf("claim after retention: %+v, %v", res, err)
	}
}

// The cache holds at most Size records.
func TestSizeBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clock.NewFake(time.Unix(1_800_000_000, 0))
	inner := &counting{Store: ledgermem.New(&ledgermem.Config{Clock: clock})}
	cached := ledgercache.New(inner, &ledgercache.Config{Clock: clock, Size: 2})
	now := clock.Now()
	for _, k := range []string{"a", "b", "c"} {
		p := ledger.ClaimParams{Key: k, Tool: "t", RunID: "r", Owner: "o-" + k, Fingerprint: "f",
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
		if _, err := cached.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := cached.Complete(ctx, k, "o-"+k, ledger.Completion{Summary: k}); err != nil {
			t.Fatal(err)
		}
	}
	before := inner.n.Load()
	for _, k := range []string{"b", "c"} {
		if _, err := cached.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if inner.n.Load() != before {
		t.Fatalf("the two newest records were not cached")
	}
	if _, err := cached.Get(ctx, "a"); err != nil || inner.n.Load() != before+1 {
		t.Fatalf("the oldest record was not evicted: %v, %d requests", err, inner.n.Load()-before)
	}
}

// A cache in front of a store that watches passes its watches on.
func TestWatchConformance(t *testing.T) {
	t.Parallel()
	ledgertest.RunWatch(t, func(t *testing.T, clk clock.Clock) (ledger.Store, ledger.Store) {
		mem := ledgermem.New(&ledgermem.Config{Clock: clk})
		return ledgercache.New(mem, &ledgercache.Config{Clock: clk}), mem
	})
}

// A cache in front of a store that does not watch says so.
func TestWatchUnsupported(t *testing.T) {
	t.Parallel()
	s := ledgercache.New(struct{ ledger.Store }{ledgermem.New(nil)}, nil)
	if _, _, err := s.Watch(context.Background(), "k"); !errors.Is(err, ledger.ErrNoWatch) {
		t.Fatalf("Watch = %v, want ledger.ErrNoWatch", err)
	}
}

// The cache hides none of the wrapped store's optional interfaces.
func TestPassesCapabilities(t *testing.T) {
	ledgertest.RunWrapper(t, func(next ledger.Store) ledger.Store { return ledgercache.New(next, nil) })
}
