package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// lostReply applies the first n claims and then reports them failed, as a
// connection dropped after the server ran the write would.
type lostReply struct {
	ledger.Store
	lose atomic.Int64
}

func (s *lostReply) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, p)
	if err == nil && s.lose.Add(-1) >= 0 {
		return ledger.ClaimResult{}, fmt.Errorf("%w: read tcp: connection reset by peer", ledger.ErrUnavailable)
	}
	return res, err
}

// A claim applied whose reply was lost is not an action lost: the call
// repeats the claim with its owner token, finds the record its own, and
// runs the action once; the model is told it was done, and a repeat is
// answered from the record.
func TestClaimReplyLostRunsOnce(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := &fixture{clock: clock.NewFake(t0)}
	store := &lostReply{Store: ledgermem.New(&ledgermem.Config{Clock: f.clock})}
	store.lose.Store(1)
	f.with(t, store, nil, counted("send_reply", &runs, nil))
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.Executed, "Done: ")
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.AlreadyDone, "Already done earlier in this run")
	if runs.Load() != 1 {
		t.Fatalf("runs = %d, want 1", runs.Load())
	}
}

// A lost reply of a claim that took over an uncertain record: what it took
// over is unknown to the repeat, so the call reconciles before acting; a
// tool without a reconciler stays uncertain and never runs a second time.
func TestClaimReplyLostOverUncertainReconciles(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := &fixture{clock: clock.NewFake(t0)}
	store := &lostReply{Store: ledgermem.New(&ledgermem.Config{Clock: f.clock})}
	f.with(t, store, nil, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		if runs.Load() == 1 {
			return client.Effect{}, client.Ambiguous(fmt.Errorf("timeout after the request was sent"))
		}
		return client.Effect{Summary: "sent"}, nil
	}))
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.Uncertain, "Outcome unknown")
	f.clock.Advance(time.Second)
	store.lose.Store(1)
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.Uncertain, "Outcome unknown")
	if runs.Load() != 1 {
		t.Fatalf("runs = %d, want 1: the takeover must not act without reconciling", runs.Load())
	}
}

// An uncertain action is never forgotten: after the retention has run out,
// a repeat is still told the outcome is unknown, and nothing runs again.
func TestUncertainOutlivesRetention(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, &client.Config{Wait: 20 * time.Millisecond, RecordTimeout: 200 * time.Millisecond, Retention: 10 * time.Second, Liveness: 5 * time.Second},
		counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{}, fmt.Errorf("the provider answered something unreadable after committing")
		}))
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.Uncertain, "an operator must check")
	f.clock.Advance(48 * time.Hour)
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.Uncertain, "an operator must check")
	if runs.Load() != 1 {
		t.Fatalf("runs = %d, want 1", runs.Load())
	}
	recs, err := f.store.List(context.Background(), ledger.Filter{State: ledger.StateUncertain})
	if err != nil || len(recs) != 1 {
		t.Fatalf("uncertain records after the retention: %v, %v; want the action", recs, err)
	}
}

// A done record lives for the retention the user set, counted from when it
// was settled, whatever the lease: a 10-second retention under a 15-minute
// lease keeps it 10 seconds after the call, not 15 minutes.
func TestRetentionCountsFromSettlement(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, &client.Config{Wait: 20 * time.Millisecond, RecordTimeout: 200 * time.Millisecond, Retention: 10 * time.Second, Liveness: 15 * time.Minute},
		counted("send_reply", &runs, nil))
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"7"}`), client.Executed, "Done: ")
	recs, err := f.store.List(context.Background(), ledger.Filter{State: ledger.StateDone})
	if err != nil || len(recs) != 1 {
		t.Fatalf("done records: %v, %v", recs, err)
	}
	if want := f.clock.Now().Add(10 * time.Second); !recs[0].ExpiresAt.Equal(want) {
		t.Errorf("done record expires at %v, want %v (10 s after it was settled)", recs[0].ExpiresAt, want)
	}
}

// A run id or tenant that is not valid UTF-8 is refused: two such ids
// would share keys once their bad bytes were replaced.
func TestInvalidUTF8RunIDRefused(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, nil, counted("send_reply", &runs, nil))
	for _, c := range []struct{ run, tenant string }{{"run-\xff", ""}, {"run", "t-\xfe"}} {
		res, err := f.exec.Execute(context.Background(), c.run, client.Call{Tool: "send_reply", Tenant: c.tenant, Input: []byte(`{"ticketId":"7"}`)})
		if !errors.Is(err, client.ErrHostInput) || res.Outcome != client.InvalidInput {
			t.Errorf("run %q tenant %q: %v, %v; want InvalidInput with ErrHostInput", c.run, c.tenant, res.Outcome, err)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("runs = %d, want 0", runs.Load())
	}
}

// rivalFails lets a rival caller claim the action just before each of the
// caller's claims, and fail it definitively as soon as the caller, blocked,
// looks at the record: the caller's every round finds the action failed by
// someone else.
type rivalFails struct {
	ledger.Store
	mu     sync.Mutex
	rivals int    // rival owner tokens given
	rival  string // the rival holding the action, or ""
}

func (s *rivalFails) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rivals++
	q := p
	q.Owner = fmt.Sprintf("rival-%d", s.rivals)
	if cr, err := s.Store.Claim(ctx, q); err != nil || !cr.Claimed {
		return cr, fmt.Errorf("rival claim: %v (%+v)", err, cr)
	}
	s.rival = q.Owner
	return s.Store.Claim(ctx, p)
}

func (s *rivalFails) Get(ctx context.Context, key string) (*ledger.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rival != "" {
		if err := s.Store.Fail(ctx, key, s.rival, ledger.Failure{Definite: true, Reason: "the rival's request was refused"}); err != nil {
			return nil, err
		}
		s.rival = ""
	}
	return s.Store.Get(ctx, key)
}

// A caller told of another caller's definite failure is told the number of
// the attempt that failed, not the number of the next attempt that a
// failed record holds: that next attempt's downstream key has not been
// used, and may yet take effect.
func TestFailedOfAnotherTellsItsAttempt(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := &fixture{clock: clock.NewFake(t0)}
	store := &rivalFails{Store: ledgermem.New(&ledgermem.Config{Clock: f.clock})}
	f.with(t, store, &client.Config{Wait: time.Minute, RecordTimeout: time.Minute}, counted("send_reply", &runs, nil))
	res := f.call(t, "run", "send_reply", `{"ticketId":"7"}`)
	wantOutcome(t, res, client.Failed, "Failed, nothing was done: the rival's request was refused")
	rec, err := store.Store.Get(context.Background(), res.Key)
	if err != nil {
		t.Fatal(err)
	}
	// Two rounds, each behind a rival attempt that failed: attempts 1
	// and 2 failed, and the record holds the next one, 3.
	if res.Attempt != 2 || rec.State != ledger.StateFailed || rec.Attempt != 3 {
		t.Fatalf("told attempt %d failed, record %s attempt %d; want attempt 2, record failed holding attempt 3", res.Attempt, rec.State, rec.Attempt)
	}
	if runs.Load() != 0 {
		t.Fatalf("runs = %d, want 0", runs.Load())
	}
}
