package integration

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// Deterministic reproductions of duplicates TestChaos found.

// A takeover after a crash reconciles an idempotency-key provider that has
// no lookup by resending with the same key. The provider refuses the
// resend before processing it (429): that says nothing about the first
// request, which took effect. The call must not be told that nothing was
// done, and the model's retry must not make a second order.
func TestResendRefusedAfterTakeover(t *testing.T) {
	t.Parallel()
	r := newRegression(t, "keyheader_order")
	r.crashAfterEffect()
	r.faults.Add(fault.Rule{Route: r.a.s.route, Attempt: 1, Action: fault.FailBeforeCommit,
		Status: http.StatusTooManyRequests, RetryAfter: time.Second})
	r.deliverAsTheModelWould()
}

// A keyed create commits, then its keep-alive connection drops. Go's
// transport resends a request with an Idempotency-Key on a new connection
// by itself, and the resend is refused with 503 and Retry-After. The first
// request took effect: the outcome is ambiguous, not "nothing was done".
func TestTransportResendKeepsAmbiguity(t *testing.T) {
	t.Parallel()
	r := newRegression(t, "stripe_refund") // the refund's setup leaves an idle connection
	r.faults.Add(fault.Rule{Route: r.a.s.route, Attempt: 1, Action: fault.CommitThenDrop})
	r.faults.Add(fault.Rule{Route: r.a.s.route, Attempt: 2, Action: fault.FailBeforeCommit,
		Status: http.StatusServiceUnavailable, RetryAfter: time.Second})
	r.deliverAsTheModelWould()
}

// regression is one action on a fresh fake and ledger.
type regression struct {
	t      *testing.T
	a      *action
	faults *fault.Injector
	clock  *clock.Fake
	store  ledger.Store
	call   client.Call
	runID  string
}

func newRegression(t *testing.T, scenario string) *regression {
	clock := clock.NewFake(time.Now().Truncate(time.Second))
	a := newAction(t, scenarioByName(scenario), clock)
	return &regression{
		t: t, a: a, faults: a.k.server(a.s.provider).faults, clock: clock,
		store: ledgermem.New(&ledgermem.Config{Clock: clock}),
		call:  client.Call{Tool: a.k.tools[a.s.name].Name, Input: a.input, ID: "toolu_1"},
		runID: fmt.Sprintf("regression-%d", a.n),
	}
}

// process is a new executor over the ledger; crash makes it die right
// after the provider call.
func (r *regression) process(crash bool) *client.Executor {
	tool := r.a.k.tools[r.a.s.name]
	if crash {
		run := tool.Run
		tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			_, _ = run(ctx, inv)
			runtime.Goexit()
			return client.Effect{}, nil
		}
	}
	x := client.New(r.store, &client.Config{Clock: r.clock, Liveness: lease})
	if err := x.Register(tool); err != nil {
		r.t.Fatal(err)
	}
	return x
}

// crashAfterEffect runs the call in a process that dies after the provider
// call, and lets its lease run out.
func (r *regression) crashAfterEffect() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	died := make(chan struct{})
	go func() {
		defer close(died)
		_, _ = r.process(true).Execute(ctx, r.runID, r.call)
	}()
	<-died
	if n := r.a.effects(); n != 1 {
		r.t.Fatalf("%d effects before the resume, want 1", n)
	}
	r.clock.Advance(lease + time.Second)
}

// deliverAsTheModelWould delivers the call, and again as long as the model
// is told it may retry; the effect must exist once, and no answer may say
// that nothing was done.
func (r *regression) deliverAsTheModelWould() {
	for round := range 3 {
		res, err := r.process(false).Execute(context.Background(), r.runID, r.call)
		r.t.Logf("delivery %d: %s: %q (%v)", round+1, res.Outcome, res.Text, err)
		if n := r.a.effects(); n > 0 && res.Outcome == client.Failed {
			r.t.Errorf("delivery %d was told %q, but the provider has %d effects", round+1, res.Text, n)
		}
		if res.Outcome != client.Failed || !res.Retryable {
			break
		}
	}
	if n := r.a.effects(); n != 1 {
		r.t.Errorf("%d effects, want 1", n)
	}
}
