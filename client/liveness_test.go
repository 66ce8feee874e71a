package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// By default a claim stands for client.DefaultLiveness after it was taken
// (and after each heartbeat), whatever the call's length: a repeat told
// InProgress learns when the claim may be taken over (Result.TakeoverAt,
// the record's LeaseUntil), and once the owner's heartbeats have stopped
// for that long the repeat takes it over, reconciling first.
func TestDeadOwnerTakenOverAfterLiveness(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	started, release := make(chan string, 1), make(chan struct{})
	var runs atomic.Int64
	tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		started <- inv.Key
		<-release
		return client.Effect{}, client.Ambiguous(errors.New("the owner's process is gone"))
	})
	rec := &verdicts{v: client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "sent before the crash", Ref: "msg_0"}}}
	tool.Reconciler = rec
	// The owner, on another host: nothing tells that its process exited.
	never := func(string) bool { return false }
	owner := newFixture(t, &client.Config{Wait: -1, OwnerExited: never}, tool)
	done := make(chan client.Result, 1)
	go func() {
		r, _ := owner.exec.Execute(ctx, "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"5"}`)})
		done <- r
	}()
	key := <-started
	held, err := owner.store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(client.DefaultLiveness); !held.LeaseUntil.Equal(want) {
		t.Fatalf("claim's LeaseUntil %v, want Liveness after the claim, %v", held.LeaseUntil, want)
	}

	// A repeat on another executor (host) of the same ledger.
	other := (&fixture{clock: owner.clock}).with(t, owner.store, &client.Config{Wait: -1, OwnerExited: never}, tool)
	r := other.call(t, "run", "send_reply", `{"ticketId":"5"}`)
	if r.Outcome != client.InProgress || !r.TakeoverAt.Equal(held.LeaseUntil) {
		t.Fatalf("repeat while the owner lives = %v at %v, want InProgress with TakeoverAt %v", r.Outcome, r.TakeoverAt, held.LeaseUntil)
	}
	// The owner dies (its heartbeats stop: the fake clock moves past its
	// lease before any heartbeat could renew it).
	owner.clock.Advance(client.DefaultLiveness)
	r = other.call(t, "run", "send_reply", `{"ticketId":"5"}`)
	if r.Outcome != client.AlreadyDone || rec.calls.Load() != 1 {
		t.Fatalf("repeat after the owner's liveness = %v (reconciler calls %d), want taken over, reconciled, already done", r.Outcome, rec.calls.Load())
	}
	close(release)
	<-done // the old owner's late write is refused (ErrNotOwner)
	if got, _ := owner.store.Get(ctx, key); got.State != ledger.StateDone || got.Summary != "sent before the crash" {
		t.Fatalf("record %+v, want done as the takeover settled it", got)
	}
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want once (by the dead owner)", runs.Load())
	}
}

// Config.Lease bounds one call's claim: heartbeats never renew it past
// Lease after the claim, and the tool's context ends there (ErrLeaseLost).
func TestLeaseBoundsTheCall(t *testing.T) {
	t.Parallel()
	const liveness, lease = 300 * time.Millisecond, 450 * time.Millisecond
	clk := clock.NewFake(t0)
	store := &renewals{Store: ledgermem.New(&ledgermem.Config{Clock: clk})}
	var runs atomic.Int64
	var cause atomic.Value
	exec := client.New(store, &client.Config{Clock: clk, Liveness: liveness, Lease: lease})
	if err := exec.Register(counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		clk.Advance(200 * time.Millisecond)
		// A heartbeat renews the claim to the call's end, not beyond.
		want := t0.Add(lease)
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			rec, err := store.Get(ctx, inv.Key)
			if err == nil && rec.LeaseUntil.Equal(want) {
				break
			}
			if err == nil && rec.LeaseUntil.After(want) {
				return client.Effect{}, client.Definite(fmt.Errorf("renewed to %v, past the call's end %v", rec.LeaseUntil, want))
			}
			if ctx.Err() != nil || time.Now().After(deadline) {
				return client.Effect{}, client.Definite(fmt.Errorf("lease not renewed to %v (%v)", want, context.Cause(ctx)))
			}
		}
		clk.Advance(lease) // past the call's end
		return waitFenced(&cause)(ctx, inv)
	})); err != nil {
		t.Fatal(err)
	}
	r, err := exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := cause.Load().(error)
	if !errors.Is(got, client.ErrLeaseLost) || !strings.Contains(got.Error(), "without renewal") {
		t.Fatalf("tool context ended with %v (result %v: %s), want ErrLeaseLost at the call's end", got, r.Outcome, r.Text)
	}
}

// The defaults: Liveness 12 s; heartbeats a third of it. A Heartbeat not
// shorter than Liveness falls back to a third of it.
func TestHeartbeatInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		liveness, heartbeat time.Duration
	}{
		{0, 0},
		{300 * time.Millisecond, 0},
		{300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(fmt.Sprint(c.liveness, "/", c.heartbeat), func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			store := ledgermem.New(&ledgermem.Config{Clock: clk})
			var runs atomic.Int64
			exec := client.New(store, &client.Config{Clock: clk, Liveness: c.liveness, Heartbeat: c.heartbeat})
			want := c.liveness
			if want == 0 {
				want = client.DefaultLiveness
			}
			if err := exec.Register(counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				rec, err := store.Get(ctx, inv.Key)
				if err != nil || !rec.LeaseUntil.Equal(t0.Add(want)) {
					return client.Effect{}, client.Definite(fmt.Errorf("claim %+v, %v; want LeaseUntil %v", rec, err, t0.Add(want)))
				}
				return client.Effect{Summary: "ok"}, nil
			})); err != nil {
				t.Fatal(err)
			}
			if r, err := exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)}); err != nil || r.Outcome != client.Executed {
				t.Fatalf("%+v, %v", r, err)
			}
		})
	}
}
