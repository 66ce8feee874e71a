package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// renewals wraps a store and answers every Extend with err (nil: pass
// through), counting the calls.
type renewals struct {
	ledger.Store
	err     error
	extends atomic.Int64
}

func (s *renewals) Extend(ctx context.Context, key, owner string, until time.Time) error {
	s.extends.Add(1)
	if s.err != nil {
		return s.err
	}
	return s.Store.Extend(ctx, key, owner, until)
}

// waitFenced is a tool body that waits for its context to end (the fence)
// and reports the cause. It never asserts how soon.
func waitFenced(cause *atomic.Value) func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	return func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		select {
		case <-ctx.Done():
			cause.Store(context.Cause(ctx))
			return client.Effect{}, client.Ambiguous(fmt.Errorf("request cancelled: %w", ctx.Err()))
		case <-time.After(time.Minute): // generous: a failure, not a bound
			return client.Effect{}, client.Definite(errors.New("the fence never closed"))
		}
	}
}

// The tool's context ends with ErrLeaseLost when a renewal finds the record
// taken over, and when the lease runs out because renewals keep failing.
func TestFenceCancelsToolWhenLeaseEnds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		err   error
		clock clock.Clock // nil: the wall clock, so that the lease can run out
		want  string
	}{
		{"renewal finds the record taken over", ledger.ErrNotOwner, clock.NewFake(t0), "taken over"},
		{"renewals fail until the lease ends", fmt.Errorf("%w: connection refused", ledger.ErrUnavailable), nil, "without renewal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			var cause atomic.Value
			store := &renewals{Store: ledgermem.New(&ledgermem.Config{Clock: c.clock}), err: c.err}
			exec := client.New(store, &client.Config{Clock: c.clock, Liveness: 50 * time.Millisecond})
			if err := exec.Register(counted("send_reply", &runs, waitFenced(&cause))); err != nil {
				t.Fatal(err)
			}
			r, err := exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := cause.Load().(error)
			if !errors.Is(got, client.ErrLeaseLost) || !strings.Contains(got.Error(), c.want) {
				t.Fatalf("tool context ended with %v, want ErrLeaseLost (%s)", got, c.want)
			}
			wantOutcome(t, r, client.Uncertain, "Do not retry.")
			if runs.Load() != 1 {
				t.Fatalf("runs %d", runs.Load())
			}
		})
	}
}

// An owner that lost its claim does not resend. Owner A's request times
// out after the lease ran out; B takes the record over; A's reconciler
// finds nothing and would resend while B sends too: two effects. The resend
// needs a renewal of A's claim, which fails, so the outcome stays uncertain.
func TestNoResendAfterTheClaimWasLost(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"memory", "sqlite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var runs atomic.Int64
			rec := &verdicts{v: client.Reconciliation{Verdict: client.VerdictResendSafe}}
			f := &fixture{clock: clock.NewFake(t0)}
			f.store = ledgermem.New(&ledgermem.Config{Clock: f.clock})
			if backend == "sqlite" {
				s, err := ledgersqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), &ledgersqlite.Config{Clock: f.clock})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
				f.store = s
			}
			in := `{"ticketId":"5"}`
			tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				// While A's request hangs, its lease runs out and B claims.
				f.clock.Advance(3 * time.Minute)
				cr, err := f.store.Claim(context.Background(), ledger.ClaimParams{Key: inv.Key, Tool: "send_reply", RunID: "run", Owner: "owner-b",
					LeaseUntil: f.clock.Now().Add(time.Minute), ExpiresAt: f.clock.Now().Add(time.Hour), Fingerprint: fingerprintOf(t, f.tool(t), in)})
				if err != nil || !cr.Claimed {
					t.Errorf("B could not take over: %+v %v", cr, err)
				}
				return client.Effect{}, client.Ambiguous(errors.New("timeout after the request was written"))
			})
			tool.Reconciler = rec
			f.with(t, f.store, nil, tool)
			r := f.call(t, "run", "send_reply", in)
			wantOutcome(t, r, client.Uncertain, "Outcome unknown")
			if runs.Load() != 1 || rec.calls.Load() != 1 {
				t.Fatalf("runs %d, reconciles %d: a resend left after the claim was lost", runs.Load(), rec.calls.Load())
			}
			if !errors.Is(r.Err, client.ErrLeaseLost) || !strings.Contains(r.Err.Error(), "not resent") {
				t.Errorf("err %v", r.Err)
			}
			if got, _ := f.store.Get(ctx, r.Key); got == nil || got.Owner != "owner-b" || got.State != ledger.StatePending {
				t.Fatalf("B's claim was overwritten: %+v", got)
			}
		})
	}
}

// fixture.tool returns the registered tool's declaration for fingerprints.
func (f *fixture) tool(t *testing.T) client.Tool {
	t.Helper()
	return client.Tool{Name: "send_reply", Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Validated: []client.Field{{Path: "channel"}}}
}

// Every resend, after an ambiguous error and after a takeover, is preceded
// by a successful renewal; when the renewal fails, nothing is sent.
func TestResendNeedsRenewal(t *testing.T) {
	t.Parallel()
	for _, takeover := range []bool{false, true} {
		for _, fail := range []error{nil, fmt.Errorf("%w: timeout", ledger.ErrUnavailable), ledger.ErrNotOwner} {
			t.Run(fmt.Sprintf("takeover=%v/extend=%v", takeover, fail), func(t *testing.T) {
				t.Parallel()
				var runs atomic.Int64
				tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					if !takeover && runs.Load() == 1 {
						return client.Effect{}, errors.New("timeout after the request was written")
					}
					return client.Effect{Summary: "sent"}, nil
				})
				rec := &verdicts{v: client.Reconciliation{Verdict: client.VerdictResendSafe}}
				tool.Reconciler = rec
				f := &fixture{clock: clock.NewFake(t0)}
				inner := ledgermem.New(&ledgermem.Config{Clock: f.clock})
				store := &renewals{Store: inner, err: fail}
				f.store = store
				f.with(t, store, nil, tool) // the default 2-minute lease: no heartbeat fires
				in := `{"ticketId":"5"}`
				if takeover {
					k, _ := tool.Key("run", client.Call{Input: json.RawMessage(in)}, 0)
					if _, err := inner.Claim(context.Background(), ledger.ClaimParams{Key: k, Tool: "send_reply", RunID: "run", Owner: "crashed",
						LeaseUntil: t0.Add(time.Second), ExpiresAt: t0.Add(time.Hour), Fingerprint: fingerprintOf(t, tool, in)}); err != nil {
						t.Fatal(err)
					}
					f.clock.Advance(time.Second)
				}
				r := f.call(t, "run", "send_reply", in)
				sends := runs.Load()
				if !takeover {
					sends-- // the first, ambiguous request
				}
				if store.extends.Load() != 1 {
					t.Errorf("%d renewals before the resend, want 1", store.extends.Load())
				}
				if fail == nil {
					wantOutcome(t, r, client.Executed, "Done: sent")
					if sends != 1 {
						t.Fatalf("%d resends, want 1", sends)
					}
					return
				}
				wantOutcome(t, r, client.Uncertain, "Outcome unknown: the request may have gone through.")
				if sends != 0 {
					t.Fatalf("%d resends without a renewed claim", sends)
				}
				if !strings.Contains(r.Err.Error(), "not resent") {
					t.Errorf("err %v", r.Err)
				}
			})
		}
	}
}

// SentBy anchors a reconciler's in-flight bound: after an ambiguous error,
// when the failed request returned; on a takeover, the earlier lease's end.
func TestSentByAnchorsTheInFlightBound(t *testing.T) {
	t.Parallel()
	t.Run("ambiguous", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		var f *fixture
		tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			f.clock.Advance(7 * time.Second) // the request hangs, then times out
			return client.Effect{}, errors.New("timeout")
		})
		rec := &verdicts{v: client.Reconciliation{Verdict: client.VerdictUnknown}}
		tool.Reconciler = rec
		f = newFixture(t, nil, tool)
		f.call(t, "run", "send_reply", `{"ticketId":"5"}`)
		if got := rec.seen[0].SentBy; !got.Equal(t0.Add(7 * time.Second)) {
			t.Errorf("SentBy %v, want when the request returned (%v)", got, t0.Add(7*time.Second))
		}
	})
	t.Run("takeover", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		tool := counted("send_reply", &runs, nil)
		rec := &verdicts{v: client.Reconciliation{Verdict: client.VerdictUnknown}}
		tool.Reconciler = rec
		f := newFixture(t, nil, tool)
		in := `{"ticketId":"5"}`
		k, _ := tool.Key("run", client.Call{Input: json.RawMessage(in)}, 0)
		lease := t0.Add(30 * time.Second)
		if _, err := f.store.Claim(context.Background(), ledger.ClaimParams{Key: k, Tool: "send_reply", RunID: "run", Owner: "crashed",
			LeaseUntil: lease, ExpiresAt: t0.Add(time.Hour), Fingerprint: fingerprintOf(t, tool, in)}); err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(10 * time.Minute)
		f.call(t, "run", "send_reply", in)
		if got := rec.seen[0].SentBy; !got.Equal(lease) {
			t.Errorf("SentBy %v, want the earlier lease's end %v", got, lease)
		}
	})
}

// A lease that already reaches the call's deadline (a Lambda invocation
// shorter than the lease) is never renewed: no renewal could move it. The
// fence still ends the tool's context when it runs out.
func TestNoRenewalAtTheDeadline(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	var cause atomic.Value
	store := &renewals{Store: ledgermem.New(nil)}
	exec := client.New(store, &client.Config{Liveness: 15 * time.Minute})
	if err := exec.Register(counted("send_reply", &runs, waitFenced(&cause))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := exec.Execute(ctx, "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)}); err != nil {
		t.Fatal(err)
	}
	if n := store.extends.Load(); n != 0 {
		t.Errorf("%d renewals of a lease that reached the deadline, want 0", n)
	}
	if got, _ := cause.Load().(error); got == nil {
		t.Error("the tool's context did not end")
	}
}
