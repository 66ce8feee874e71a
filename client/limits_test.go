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

// tight is a store with tighter limits than ledger's: it refuses a
// summary or ref over max bytes.
type tight struct {
	ledger.Store
	max       int
	completes atomic.Int64
}

func (s *tight) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	s.completes.Add(1)
	if len(c.Summary) > s.max || len(c.Ref) > s.max {
		return fmt.Errorf("%w: item too large", ledger.ErrTooLarge)
	}
	return s.Store.Complete(ctx, key, owner, c)
}

// A done effect is never lost over a size limit: a ref over
// ledger.MaxRefBytes (a presigned URL) is clipped, and a store that still
// refuses the completion gets one with less detail.
func TestDoneEffectSurvivesSizeLimits(t *testing.T) {
	t.Parallel()
	url := "https://files.example/report.pdf?X-Signature=" + strings.Repeat("ab", 557) // 1,159 bytes
	for _, c := range []struct {
		name  string
		store func(ledger.Store) ledger.Store
		max   int
	}{
		{"ref over MaxRefBytes", func(s ledger.Store) ledger.Store { return s }, ledger.MaxRefBytes},
		{"store with tighter limits", func(s ledger.Store) ledger.Store { return &tight{Store: s, max: 300} }, 300},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			f := &fixture{clock: clock.NewFake(t0)}
			f.store = c.store(ledgermem.New(&ledgermem.Config{Clock: f.clock}))
			f.with(t, f.store, nil, counted("upload", &runs, func(context.Context, client.Invocation) (client.Effect, error) {
				return client.Effect{Summary: "uploaded " + strings.Repeat("report ", 100), Ref: url, Result: json.RawMessage(`{"ok":true}`)}, nil
			}))
			r := f.call(t, "run", "upload", `{"ticketId":"1"}`)
			wantOutcome(t, r, client.Executed, "Done: uploaded")
			if r.Ref != url {
				t.Errorf("the caller lost the full ref: %d bytes", len(r.Ref))
			}
			rec, err := f.store.Get(context.Background(), r.Key)
			if err != nil || rec.State != ledger.StateDone {
				t.Fatalf("record %+v, %v: the done effect was not recorded", rec, err)
			}
			if len(rec.Ref) > c.max || !strings.HasPrefix(url, rec.Ref) || len(rec.Ref) < 100 {
				t.Errorf("stored ref of %d bytes, want a prefix of at most %d", len(rec.Ref), c.max)
			}
			again := f.call(t, "run", "upload", `{"ticketId":"1"}`)
			wantOutcome(t, again, client.AlreadyDone, "Already done")
			if runs.Load() != 1 {
				t.Fatalf("runs %d", runs.Load())
			}
		})
	}
}

// Mistakes of the programmer fail fast at New and Register, atomically, or
// come back to the host program as errors; the model reads only about its
// own input.
func TestConfigurationMistakes(t *testing.T) {
	t.Parallel()
	run := func(context.Context, client.Invocation) (client.Effect, error) {
		return client.Effect{Summary: "ok"}, nil
	}
	id := []client.Field{{Path: "id"}}

	t.Run("New without a store", func(t *testing.T) {
		t.Parallel()
		defer func() {
			if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), "ledger.Store") {
				t.Errorf("New(nil, nil): panic %v, want one naming the store", p)
			}
		}()
		client.New(nil, nil)
	})

	t.Run("Register", func(t *testing.T) {
		t.Parallel()
		e := client.New(ledgermem.New(nil), nil)
		good := client.Tool{Name: "good", Identity: id, Run: run}
		for _, bad := range []client.Tool{
			{Name: strings.Repeat("n", ledger.MaxKeyBytes+1), Identity: id, Run: run},
			{Name: "dup_identity", Identity: []client.Field{{Path: "id"}, {Path: "id", Norm: client.String}}, Run: run},
			{Name: "dup_validated", Identity: id, Validated: []client.Field{{Path: "amount"}, {Path: "amount"}}, Run: run},
			{Name: "both", Identity: id, Validated: []client.Field{{Path: "id"}}, Run: run},
			{Name: "scope", Identity: id, Run: run, Scope: client.ScopeGlobal + 1},
			{Name: "negative_scope", Identity: id, Run: run, Scope: -1},
			{Name: "good", Identity: id, Run: run}, // twice in one call
		} {
			if err := e.Register(good, bad); err == nil {
				t.Errorf("registered %.60q", bad.Name)
			}
			// Nothing was registered: good can still be registered alone,
			// once.
			r, err := e.Execute(context.Background(), "run", client.Call{Tool: "good", Input: json.RawMessage(`{"id":1}`)})
			if err != nil || r.Outcome != client.InvalidInput || !errors.Is(r.Err, client.ErrUnknownTool) {
				t.Fatalf("after a refused Register(good, %.20q): %+v %v; want good unknown", bad.Name, r, err)
			}
		}
		if err := e.Register(good); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("host errors", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		f := newFixture(t, nil, counted("send_reply", &runs, nil))
		tenant := counted("refund", &runs, nil)
		tenant.Scope = client.ScopeTenant
		if err := f.exec.Register(tenant); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, run, tool string
		}{
			{"empty run id", "", "send_reply"},
			{"run id over the limit", strings.Repeat("r", ledger.MaxKeyBytes+1), "send_reply"},
			{"tenant-scoped without a tenant", "run", "refund"},
		} {
			r, err := f.exec.Execute(context.Background(), c.run, client.Call{Tool: c.tool, Input: json.RawMessage(`{"ticketId":"1"}`)})
			if !errors.Is(err, client.ErrHostInput) || !errors.Is(r.Err, client.ErrHostInput) {
				t.Errorf("%s: err %v, result err %v; want ErrHostInput", c.name, err, r.Err)
			}
			wantOutcome(t, r, client.InvalidInput, "configuration error in the application, not in your input. Nothing was done")
			if strings.Contains(r.Text, "run id") || strings.Contains(r.Text, "client.") {
				t.Errorf("%s: the model is told about the program: %q", c.name, r.Text)
			}
		}
		if runs.Load() != 0 {
			t.Fatalf("runs %d", runs.Load())
		}
		if recs, err := f.store.List(context.Background(), ledger.Filter{}); err != nil || len(recs) != 0 {
			t.Fatalf("ledger changed: %v %v", recs, err)
		}
		// With a tenant, the tenant-scoped tool runs.
		r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "refund", Tenant: "acme", Input: json.RawMessage(`{"ticketId":"1"}`)})
		if err != nil || r.Outcome != client.Executed {
			t.Fatalf("%+v %v", r, err)
		}
	})
}

// A Reconciler that panics leaves the action uncertain, like a tool that
// panics; the record is settled at once, not left pending.
func TestReconcilerPanicIsUncertain(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	tool := counted("send_reply", &runs, func(context.Context, client.Invocation) (client.Effect, error) {
		return client.Effect{}, errors.New("timeout")
	})
	tool.Reconciler = client.ReconcilerFunc(func(context.Context, client.Invocation) (client.Reconciliation, error) {
		panic("index out of range")
	})
	f := newFixture(t, nil, tool)
	r := f.call(t, "run", "send_reply", `{"ticketId":"5"}`)
	wantOutcome(t, r, client.Uncertain, "It is being reconciled; do not retry.")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "reconciler of send_reply panicked: index out of range") {
		t.Errorf("err %v", r.Err)
	}
	if rec, _ := f.store.Get(context.Background(), r.Key); rec == nil || rec.State != ledger.StateUncertain {
		t.Fatalf("record %+v, want uncertain", rec)
	}
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
}

// expiring hands the executor a claim over a pending record that expired
// (retention) while its lease was still being renewed, as a store reports
// it: Claimed, with that record as Previous.
type expiring struct {
	ledger.Store
	prev *ledger.Record
}

func (s *expiring) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	cr, err := s.Store.Claim(ctx, p)
	if err == nil && cr.Claimed && s.prev != nil {
		prev := *s.prev
		prev.Key, prev.Fingerprint = p.Key, p.Fingerprint
		cr.Previous, s.prev = &prev, nil
	}
	return cr, err
}

// A claim over an expired pending record reconciles before it acts: the
// earlier owner may have sent the request.
func TestClaimOverExpiredPendingReconciles(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	rec := &verdicts{v: client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "sent by the first owner", Ref: "msg_0"}}}
	tool := counted("send_reply", &runs, nil)
	tool.Reconciler = rec
	lease := t0.Add(-time.Second)
	store := &expiring{Store: ledgermem.New(nil), prev: &ledger.Record{State: ledger.StatePending, Owner: "first",
		LeaseUntil: lease, ExpiresAt: t0.Add(-2 * time.Second), Attempt: 1, AttemptAt: t0.Add(-time.Hour)}}
	f := (&fixture{clock: clock.NewFake(t0)}).with(t, store, nil, tool)
	r := f.call(t, "run", "send_reply", `{"ticketId":"5"}`)
	wantOutcome(t, r, client.AlreadyDone, "sent by the first owner")
	if runs.Load() != 0 || rec.calls.Load() != 1 || !rec.seen[0].SentBy.Equal(lease) {
		t.Fatalf("runs %d, reconciles %d (%+v)", runs.Load(), rec.calls.Load(), rec.seen)
	}
}

// A store that refuses the claim's parameters is a configuration error:
// the call fails without a retry hint, and the error reaches the program.
func TestRefusedClaimIsNotRetryable(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := &fixture{clock: clock.NewFake(t0)}
	f.with(t, &flaky{Store: ledgermem.New(nil), claimErr: fmt.Errorf("%w: owner too long", ledger.ErrTooLarge)}, nil, counted("send_reply", &runs, nil))
	r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
	if !errors.Is(err, ledger.ErrTooLarge) {
		t.Fatalf("err %v", err)
	}
	wantOutcome(t, r, client.Failed, "Failed, nothing was done. Do not retry: a configuration error in the application.")
	if r.Retryable || runs.Load() != 0 {
		t.Fatalf("retryable %v, runs %d", r.Retryable, runs.Load())
	}
}
