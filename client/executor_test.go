package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

type fixture struct {
	clock *clock.Fake
	store ledger.Store
	exec  *client.Executor
}

func newFixture(t *testing.T, cfg *client.Config, tools ...client.Tool) *fixture {
	t.Helper()
	f := &fixture{clock: clock.NewFake(t0)}
	f.store = ledgermem.New(&ledgermem.Config{Clock: f.clock})
	return f.with(t, f.store, cfg, tools...)
}

func (f *fixture) with(t *testing.T, store ledger.Store, cfg *client.Config, tools ...client.Tool) *fixture {
	t.Helper()
	c := client.Config{Clock: f.clock, Wait: 20 * time.Millisecond, RecordTimeout: 200 * time.Millisecond}
	if cfg != nil {
		c = *cfg
		c.Clock = f.clock
	}
	f.exec = client.New(store, &c)
	if err := f.exec.Register(tools...); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) call(t *testing.T, runID, tool, input string) client.Result {
	t.Helper()
	res, err := f.exec.Execute(context.Background(), runID, client.Call{Tool: tool, Input: json.RawMessage(input), ID: "toolu_" + fmt.Sprint(time.Now().UnixNano())})
	if err != nil {
		t.Fatalf("Execute(%s): %v", input, err)
	}
	return res
}

// counted returns a tool whose Run counts its calls and runs fn.
func counted(name string, n *atomic.Int64, fn func(ctx context.Context, inv client.Invocation) (client.Effect, error)) client.Tool {
	return client.Tool{
		Name:      name,
		Identity:  []client.Field{{Path: "ticketId", Norm: client.String}},
		Validated: []client.Field{{Path: "channel"}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			n.Add(1)
			if fn != nil {
				return fn(ctx, inv)
			}
			return client.Effect{Summary: "reply sent to ticket " + inv.Key[:6], Ref: "msg_" + inv.DownstreamKey[:8]}, nil
		},
	}
}

func wantOutcome(t *testing.T, res client.Result, o client.Outcome, text string) {
	t.Helper()
	if res.Outcome != o {
		t.Fatalf("outcome %v, want %v (text %q, err %v)", res.Outcome, o, res.Text, res.Err)
	}
	if res.IsError != o.IsError() {
		t.Errorf("IsError %v for %v", res.IsError, o)
	}
	if !strings.Contains(res.Text, text) {
		t.Errorf("text %q does not contain %q", res.Text, text)
	}
}

func TestSendReplyTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, nil, counted("send_reply", &runs, nil))

	first := f.call(t, "run-1", "send_reply", `{"ticketId": 42, "text": "Sorry for the delay, refund is on its way."}`)
	wantOutcome(t, first, client.Executed, "Done: reply sent")
	second := f.call(t, "run-1", "send_reply", `{"text": "Apologies! Your refund has been issued.", "ticketId": "42"}`)
	wantOutcome(t, second, client.AlreadyDone, "Already done earlier in this run: reply sent")
	if !strings.HasSuffix(second.Text, "Do not repeat it.") {
		t.Errorf("replay text %q", second.Text)
	}
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", runs.Load())
	}
	if second.Key != first.Key || second.Ref != first.Ref || second.Summary != first.Summary {
		t.Errorf("replay differs: %+v vs %+v", second, first)
	}
	// Another run is another action.
	wantOutcome(t, f.call(t, "run-2", "send_reply", `{"ticketId": 42}`), client.Executed, "Done")
	if runs.Load() != 2 {
		t.Fatalf("tool ran %d times, want 2", runs.Load())
	}
	if s := f.exec.Stats(); s.Executed != 2 || s.Replayed != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	release := make(chan struct{})
	f := newFixture(t, nil, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		<-release
		return client.Effect{Summary: "sent", Ref: "msg_1"}, nil
	}))
	const n = 100
	results := make([]client.Result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"7"}`), ID: fmt.Sprint("call-", i)})
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		}()
	}
	// The tool holds the first call until every other caller waits on it
	// inside the in-process merge: then the merge cannot be missed.
	const creator = "client_test.TestConcurrentDuplicatesRunOnce"
	for deadline := time.Now().Add(time.Minute); mergeWaiters(creator) < n-1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of %d duplicates waited on the first call", mergeWaiters(creator), n-1)
		}
	}
	close(release)
	wg.Wait()
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1", runs.Load())
	}
	for i, r := range results {
		if r.IsError || r.Ref != "msg_1" || r.Summary != "sent" || r.Key != results[0].Key || !r.Shared {
			t.Fatalf("result %d differs: %+v", i, r)
		}
	}
	if m := f.exec.Stats().Merged; m != n {
		t.Errorf("%d calls merged in process, want %d", m, n)
	}
}

// In-process merging follows the action: with no validated fields as with
// some, identical calls merge and calls of other actions run beside them.
func TestMergeFollowsTheAction(t *testing.T) {
	t.Parallel()
	for _, validated := range [][]client.Field{nil, {{Path: "channel"}}} {
		var runs atomic.Int64
		release := make(chan struct{})
		tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			if bytes.Contains(inv.Input, []byte(`"1"`)) {
				<-release
			}
			return client.Effect{Summary: "sent"}, nil
		})
		tool.Validated = validated
		f := newFixture(t, nil, tool)
		results := make(chan client.Result, 3)
		call := func(ticket string) {
			r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `"}`)})
			if err != nil {
				t.Error(err)
			}
			results <- r
		}
		go call("1")
		for runs.Load() == 0 { // ticket 1 holds its flight
			runtime.Gosched()
		}
		// Another action runs at once, beside the one in flight.
		go call("2")
		for other := false; !other; {
			select {
			case r := <-results:
				if r.Outcome != client.Executed || r.Shared || runs.Load() != 2 {
					t.Fatalf("validated %v: other action %+v, runs %d", validated, r, runs.Load())
				}
				other = true
			default:
				if mergeWaiters("client_test.TestMergeFollowsTheAction") > 0 {
					close(release)
					t.Fatalf("validated %v: another action waited on the one in flight", validated)
				}
				runtime.Gosched()
			}
		}
		// The same action merges into it.
		go call("1")
		for mergeWaiters("client_test.TestMergeFollowsTheAction") == 0 {
			runtime.Gosched()
		}
		close(release)
		if a, b := <-results, <-results; !a.Shared || !b.Shared || a.Key != b.Key || runs.Load() != 2 {
			t.Errorf("validated %v: %+v %+v, runs %d", validated, a, b, runs.Load())
		}
	}
}

// mergeWaiters counts the goroutines started by creator that wait, inside
// the executor's singleflight group, for an identical call in flight.
func mergeWaiters(creator string) int {
	buf := make([]byte, 1<<20)
	for {
		if k := runtime.Stack(buf, true); k < len(buf) {
			buf = buf[:k]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "singleflight.(*Group).Do(") && strings.Contains(g, "sync.(*WaitGroup).Wait(") &&
			!strings.Contains(g, "singleflight.(*Group).doCall(") && strings.Contains(g, "client.(*Executor).Execute(") &&
			strings.Contains(g, "created by github.com/oncely/oncely/"+creator) {
			n++
		}
	}
	return n
}

func TestBadInputRunsNothing(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, nil, counted("send_reply", &runs, nil))
	cases := []struct {
		tool, in string
		want     error
		text     string
	}{
		{"send_reply", `{"text":"hi"}`, client.ErrMissingField, `send_reply needs "ticketId" to run safely`},
		{"send_reply", `{"ticketId":null}`, client.ErrMissingField, `send_reply needs "ticketId" to run safely`},
		{"send_reply", `{"ticketId":{"id":1}}`, client.ErrFieldType, `send_reply needs "ticketId"`},
		{"send_reply", `["ticketId"]`, client.ErrNotObject, "must be a JSON object"},
		{"send_reply", `{"ticketId":1`, client.ErrInvalidJSON, "invalid JSON"},
		{"send_reply", `{"ticketId":1,"ticketId":2}`, client.ErrDuplicateKey, "duplicate key"},
		{"send_reply", `{"ticketId":1,"x":"` + strings.Repeat("x", 1<<20) + `"}`, client.ErrTooLarge, "limit"},
		{"delete_everything", `{"ticketId":1}`, client.ErrUnknownTool, `Unknown tool "delete_everything"`},
	}
	for _, c := range cases {
		res := f.call(t, "run", c.tool, c.in)
		wantOutcome(t, res, client.InvalidInput, c.text)
		if !errors.Is(res.Err, c.want) {
			t.Errorf("%.40s: err %v, want %v", c.in, res.Err, c.want)
		}
		if res.Key != "" {
			t.Errorf("%.40s: a key was derived", c.in)
		}
	}
	if runs.Load() != 0 {
		t.Fatalf("tool ran %d times on bad input", runs.Load())
	}
	if recs, err := f.store.List(context.Background(), ledger.Filter{}); err != nil || len(recs) != 0 {
		t.Fatalf("ledger changed: %v %v", recs, err)
	}
}

func TestRegisterRejectsIncompleteTools(t *testing.T) {
	t.Parallel()
	run := func(context.Context, client.Invocation) (client.Effect, error) { return client.Effect{}, nil }
	id := []client.Field{{Path: "id"}}
	e := client.New(ledgermem.New(nil), nil)
	for _, tool := range []client.Tool{
		{Identity: id, Run: run},
		{Name: "a", Identity: id},
		{Name: "a", Run: run},
		{Name: "a", Identity: []client.Field{{}}, Run: run},
	} {
		if err := e.Register(tool); err == nil {
			t.Errorf("registered %+v", tool)
		}
	}
	if err := e.Register(client.Tool{Name: "a", Identity: id, Run: run}); err != nil {
		t.Fatal(err)
	}
	if err := e.Register(client.Tool{Name: "a", Identity: id, Run: run}); err == nil {
		t.Error("registered a tool twice")
	}
}

func TestDefiniteFailureAllowsRetryWithNewDownstreamKey(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	var keys []string
	f := newFixture(t, nil, counted("charge", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		keys = append(keys, inv.DownstreamKey)
		switch inv.Attempt {
		case 1:
			return client.Effect{}, client.Definite(errors.New("provider busy (503 before commit)"))
		case 2:
			return client.Effect{}, client.Permanent(errors.New("card declined"))
		}
		return client.Effect{Summary: "charged"}, nil
	}))
	in := `{"ticketId":"9"}`
	r1 := f.call(t, "run", "charge", in)
	wantOutcome(t, r1, client.Failed, "Failed, nothing was done: provider busy (503 before commit). You may retry.")
	if !r1.Retryable {
		t.Error("definite failure not retryable")
	}
	r2 := f.call(t, "run", "charge", in)
	wantOutcome(t, r2, client.Failed, "Failed, nothing was done. Do not retry: card declined.")
	if r2.Retryable {
		t.Error("permanent failure retryable")
	}
	wantOutcome(t, f.call(t, "run", "charge", in), client.Executed, "Done: charged")
	wantOutcome(t, f.call(t, "run", "charge", in), client.AlreadyDone, "charged")
	if runs.Load() != 3 {
		t.Fatalf("runs %d, want 3", runs.Load())
	}
	k := r1.Key
	if want := []string{k, k + "-2", k + "-3"}; strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Errorf("downstream keys %v, want %v", keys, want)
	}
}

func TestAmbiguousWithoutReconcilerStaysUncertain(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, nil, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		return client.Effect{}, errors.New("read tcp: connection reset by peer") // unmarked: ambiguous
	}))
	in := `{"ticketId":"5"}`
	r := f.call(t, "run", "send_reply", in)
	// Nothing will reconcile it: the model is told so, truthfully.
	wantOutcome(t, r, client.Uncertain, "Outcome unknown: the request may have gone through. It cannot be checked automatically; an operator must check it. Do not retry.")
	rec, err := f.store.Get(context.Background(), r.Key)
	if err != nil || rec.State != ledger.StateUncertain || rec.Attempt != 1 {
		t.Fatalf("record %+v, %v", rec, err)
	}
	wantOutcome(t, f.call(t, "run", "send_reply", in), client.Uncertain, "an operator must check it. Do not retry.")
	if runs.Load() != 1 {
		t.Fatalf("tool ran %d times, want 1: an uncertain action ran again without reconciling", runs.Load())
	}
}

func TestPanicIsUncertain(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, nil, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		panic("nil map write")
	}))
	r := f.call(t, "run", "send_reply", `{"ticketId":"5"}`)
	wantOutcome(t, r, client.Uncertain, "Outcome unknown")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "panicked: nil map write") {
		t.Errorf("err %v", r.Err)
	}
	if rec, _ := f.store.Get(context.Background(), r.Key); rec == nil || rec.State != ledger.StateUncertain {
		t.Fatalf("record %+v", rec)
	}
}

type verdicts struct {
	calls atomic.Int64
	seen  []client.Invocation
	mu    sync.Mutex
	v     client.Reconciliation
	err   error
}

func (r *verdicts) Reconcile(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
	r.calls.Add(1)
	r.mu.Lock()
	r.seen = append(r.seen, inv)
	r.mu.Unlock()
	return r.v, r.err
}

func TestAmbiguousThenReconcile(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		v        client.Reconciliation
		err      error
		want     client.Outcome
		wantRuns int64
		state    ledger.State
	}{
		{"found", client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "found it", Ref: "msg_9"}}, nil, client.Executed, 1, ledger.StateDone},
		{"resend safe reruns with the same key", client.Reconciliation{Verdict: client.VerdictResendSafe}, nil, client.Executed, 2, ledger.StateDone},
		{"absent reruns with the same key", client.Reconciliation{Verdict: client.VerdictAbsent}, nil, client.Executed, 2, ledger.StateDone},
		{"unknown", client.Reconciliation{Verdict: client.VerdictUnknown, Reason: "inside the search index lag"}, nil, client.Uncertain, 1, ledger.StateUncertain},
		{"lookup error", client.Reconciliation{}, errors.New("provider down"), client.Uncertain, 1, ledger.StateUncertain},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			var keys []string
			rec := &verdicts{v: c.v, err: c.err}
			tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				keys = append(keys, inv.DownstreamKey)
				if runs.Load() == 1 {
					return client.Effect{}, client.Ambiguous(errors.New("timeout after the request was written"))
				}
				return client.Effect{Summary: "sent on rerun", Ref: "msg_2"}, nil
			})
			tool.Reconciler = rec
			f := newFixture(t, nil, tool)
			r := f.call(t, "run", "send_reply", `{"ticketId":"5"}`)
			text := ""
			if c.want == client.Uncertain {
				text = "It is being reconciled; do not retry."
			}
			wantOutcome(t, r, c.want, text)
			if runs.Load() != c.wantRuns || rec.calls.Load() != 1 {
				t.Fatalf("runs %d reconciles %d", runs.Load(), rec.calls.Load())
			}
			for _, k := range keys {
				if k != r.Key {
					t.Errorf("a rerun used downstream key %s, want the first attempt's %s", k, r.Key)
				}
			}
			if got, _ := f.store.Get(context.Background(), r.Key); got == nil || got.State != c.state {
				t.Fatalf("record %+v, want %s", got, c.state)
			}
			if c.want == client.Executed && c.v.Verdict == client.VerdictFound && r.Ref != "msg_9" {
				t.Errorf("found effect not reported: %+v", r)
			}
		})
	}
}

func TestTakeoverOfAbandonedClaimReconcilesFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, verdict := range []client.Verdict{client.VerdictFound, client.VerdictResendSafe, client.VerdictAbsent, client.VerdictUnknown} {
		t.Run(verdict.String(), func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			rec := &verdicts{v: client.Reconciliation{Verdict: verdict, Effect: client.Effect{Summary: "sent before the crash", Ref: "msg_0"}}}
			tool := counted("send_reply", &runs, nil)
			tool.Reconciler = rec
			f := newFixture(t, nil, tool)
			k, err := tool.Key("run", client.Call{Input: json.RawMessage(`{"ticketId":"5"}`)}, 0)
			if err != nil {
				t.Fatal(err)
			}
			// A worker claimed the action and crashed.
			if _, err := f.store.Claim(ctx, ledger.ClaimParams{Key: k, Tool: "send_reply", RunID: "run", Owner: "crashed",
				LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour), Fingerprint: fingerprintOf(t, tool, `{"ticketId":"5"}`)}); err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"5"}`), client.InProgress, "Already in progress. Do not retry.")
			if runs.Load() != 0 || rec.calls.Load() != 0 {
				t.Fatal("acted over a live claim")
			}
			f.clock.Advance(time.Minute)
			r := f.call(t, "run", "send_reply", `{"ticketId":"5"}`)
			if rec.calls.Load() != 1 || rec.seen[0].Attempt != 1 || rec.seen[0].DownstreamKey != k {
				t.Fatalf("reconciler calls %d, invocations %+v", rec.calls.Load(), rec.seen)
			}
			switch verdict {
			case client.VerdictFound:
				wantOutcome(t, r, client.AlreadyDone, "Already done earlier in this run: sent before the crash")
				if runs.Load() != 0 {
					t.Fatal("ran although the effect was found")
				}
			case client.VerdictResendSafe, client.VerdictAbsent:
				wantOutcome(t, r, client.Executed, "Done")
				if runs.Load() != 1 {
					t.Fatalf("did not run after %s", verdict)
				}
			default:
				wantOutcome(t, r, client.Uncertain, "do not retry")
				if runs.Load() != 0 {
					t.Fatal("ran although the reconciler could not tell")
				}
			}
			if f.exec.Stats().Takeovers != 1 {
				t.Errorf("stats %+v", f.exec.Stats())
			}
		})
	}
}

// fingerprintOf finds the fingerprint the executor stores for an input,
// by running it through a scratch executor.
func fingerprintOf(t *testing.T, tool client.Tool, input string) string {
	t.Helper()
	store := ledgermem.New(nil)
	tool.Run = func(context.Context, client.Invocation) (client.Effect, error) { return client.Effect{}, nil }
	tool.Reconciler = nil
	e := client.New(store, nil)
	if err := e.Register(tool); err != nil {
		t.Fatal(err)
	}
	r, err := e.Execute(context.Background(), "run", client.Call{Tool: tool.Name, Input: json.RawMessage(input)})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Get(context.Background(), r.Key)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Fingerprint
}

func TestInProgressResolvesWhileWaiting(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	started, release := make(chan struct{}), make(chan struct{})
	f := newFixture(t, &client.Config{Wait: 5 * time.Second}, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		close(started)
		<-release
		return client.Effect{Summary: "sent once"}, nil
	}))
	// A second executor on the same ledger, as in another process.
	other := client.New(f.store, &client.Config{Clock: f.clock, Wait: 5 * time.Second})
	if err := other.Register(counted("send_reply", &runs, nil)); err != nil {
		t.Fatal(err)
	}
	go func() { f.call(t, "run", "send_reply", `{"ticketId":"1"}`) }()
	<-started
	done := make(chan client.Result)
	go func() {
		r, _ := other.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
		done <- r
	}()
	close(release)
	r := <-done
	wantOutcome(t, r, client.AlreadyDone, "sent once")
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
}

// A conflict names the action by its identity fields as they were hashed,
// in their declared order, whatever their type; the validated fields are
// not part of that name.
func TestConflictDescribesIdentity(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	tool := counted("refund", &runs, nil)
	tool.Identity = []client.Field{{Path: "orderId", Norm: client.Integer}, {Path: "amount"}, {Path: "express"}, {Path: "customer.handle", Norm: client.CaseFolded}}
	tool.Validated = []client.Field{{Path: "channel"}, {Path: "note"}}
	f := newFixture(t, nil, tool)
	wantOutcome(t, f.call(t, "run", "refund", `{"orderId":"0042","amount":10.0,"express":true,"customer":{"handle":" Ada "},"channel":"email"}`),
		client.Executed, "Done")
	r := f.call(t, "run", "refund", `{"orderId":42,"amount":10.0,"express":true,"customer":{"handle":"ADA"},"channel":"sms","note":"n"}`)
	want := "A refund for orderId 42, amount 10.0, express true, customer.handle ada was already done with different channel or note. Not repeated."
	if r.Outcome != client.Conflict || r.Text != want {
		t.Fatalf("%v %q, want Conflict %q", r.Outcome, r.Text, want)
	}
}

func TestConflictOnDifferentValidatedFields(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := newFixture(t, nil, counted("send_reply", &runs, nil))
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"3","channel":"email"}`), client.Executed, "Done")
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"3","channel":"sms"}`), client.Conflict,
		"A send_reply for ticketId 3 was already done with different channel. Not repeated.")
	wantOutcome(t, f.call(t, "run", "send_reply", `{"ticketId":"3","channel":"email","text":"again"}`), client.AlreadyDone, "")
	if runs.Load() != 1 {
		t.Fatalf("runs %d", runs.Load())
	}
}

// flaky wraps a store and fails chosen methods.
type flaky struct {
	ledger.Store
	claimErr    error
	completeErr atomic.Int64 // number of Complete calls left to fail
	completes   atomic.Int64
}

func (s *flaky) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if s.claimErr != nil {
		return ledger.ClaimResult{}, s.claimErr
	}
	return s.Store.Claim(ctx, p)
}

func (s *flaky) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	s.completes.Add(1)
	if s.completeErr.Add(-1) >= 0 {
		return fmt.Errorf("%w: connection refused", ledger.ErrUnavailable)
	}
	return s.Store.Complete(ctx, key, owner, c)
}

func TestUnreachableLedgerFailsClosed(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := &fixture{clock: clock.NewFake(t0)}
	f.with(t, &flaky{Store: ledgermem.New(nil), claimErr: fmt.Errorf("%w: dial tcp 127.0.0.1:1: connection refused", ledger.ErrUnavailable)}, nil, counted("send_reply", &runs, nil))
	r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("err %v", err)
	}
	wantOutcome(t, r, client.Failed, "Failed, nothing was done: the action ledger is unavailable. You may retry.")
	if !r.Retryable || runs.Load() != 0 {
		t.Fatalf("retryable %v runs %d", r.Retryable, runs.Load())
	}
}

func TestRecordWriteRetriedWithBackoff(t *testing.T) {
	t.Parallel()
	t.Run("recovers", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		clock := clock.NewFake(t0) // the ledger's too: the record is read back at t0
		s := &flaky{Store: ledgermem.New(&ledgermem.Config{Clock: clock})}
		s.completeErr.Store(3)
		f := (&fixture{clock: clock}).with(t, s, &client.Config{RecordTimeout: 5 * time.Second}, counted("send_reply", &runs, nil))
		r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
		if err != nil || r.Outcome != client.Executed || s.completes.Load() != 4 {
			t.Fatalf("r %+v err %v completes %d", r, err, s.completes.Load())
		}
		if rec, _ := s.Get(context.Background(), r.Key); rec == nil || rec.State != ledger.StateDone {
			t.Fatalf("record %+v", rec)
		}
	})
	t.Run("gives up", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		clock := clock.NewFake(t0) // the ledger's too: the record is read back at t0
		s := &flaky{Store: ledgermem.New(&ledgermem.Config{Clock: clock})}
		s.completeErr.Store(1 << 30)
		f := (&fixture{clock: clock}).with(t, s, &client.Config{RecordTimeout: 100 * time.Millisecond}, counted("send_reply", &runs, nil))
		r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
		if !errors.Is(err, ledger.ErrUnavailable) || s.completes.Load() < 2 {
			t.Fatalf("err %v completes %d", err, s.completes.Load())
		}
		wantOutcome(t, r, client.Executed, "could not be recorded yet; it will be reconciled")
		if rec, _ := s.Get(context.Background(), r.Key); rec == nil || rec.State != ledger.StatePending {
			t.Fatalf("record %+v: want pending, for reconciliation after the lease", rec)
		}
	})
}

func TestLeaseFollowsContextDeadline(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	var lease time.Time
	// A deadline is wall-clock time, so this fixture's clock starts now.
	now := time.Now().Truncate(time.Second)
	f := &fixture{clock: clock.NewFake(now)}
	f.store = ledgermem.New(&ledgermem.Config{Clock: f.clock})
	f.with(t, f.store, &client.Config{Liveness: time.Hour}, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		rec, err := f.store.Get(ctx, inv.Key)
		if err != nil {
			return client.Effect{}, client.Definite(err)
		}
		lease = rec.LeaseUntil
		return client.Effect{Summary: "ok"}, nil
	}))
	// As in a Lambda invocation with 90 s left: the claim lapses with it.
	deadline := now.Add(90 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if _, err := f.exec.Execute(ctx, "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)}); err != nil {
		t.Fatal(err)
	}
	if !lease.Equal(deadline) {
		t.Fatalf("lease %v, want the deadline %v", lease, deadline)
	}
	// Without a deadline the configured lease applies.
	r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"2"}`)})
	if err != nil || r.Outcome != client.Executed {
		t.Fatal(r, err)
	}
	if want := now.Add(time.Hour); !lease.Equal(want) {
		t.Fatalf("lease %v, want %v", lease, want)
	}
}

func TestOversizedResultIsNotStored(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	big := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	f := newFixture(t, &client.Config{MaxResultBytes: 1000}, counted("send_reply", &runs, func(context.Context, client.Invocation) (client.Effect, error) {
		return client.Effect{Summary: "sent", Result: big}, nil
	}))
	r := f.call(t, "run", "send_reply", `{"ticketId":"1"}`)
	if string(r.Payload) != string(big) {
		t.Error("the first caller lost its payload")
	}
	rec, err := f.store.Get(context.Background(), r.Key)
	if err != nil || !rec.Truncated || len(rec.Result) != 0 {
		t.Fatalf("record %+v %v", rec, err)
	}
	if again := f.call(t, "run", "send_reply", `{"ticketId":"1"}`); again.Outcome != client.AlreadyDone || len(again.Payload) != 0 {
		t.Fatalf("replay %+v", again)
	}
}

func TestHeartbeatRenewsLeaseOfLongRuns(t *testing.T) {
	t.Parallel()
	const lease = 100 * time.Millisecond
	for _, withDeadline := range []bool{false, true} {
		t.Run(fmt.Sprint("deadline=", withDeadline), func(t *testing.T) {
			t.Parallel()
			// A fake clock that only the tool moves: the lease cannot run
			// out however late the heartbeat wakes.
			clock := clock.NewFake(time.Now().Truncate(time.Second)) // stores keep milliseconds
			store := &renewals{Store: ledgermem.New(&ledgermem.Config{Clock: clock})}
			var runs atomic.Int64
			exec := client.New(store, &client.Config{Clock: clock, Liveness: lease})
			if err := exec.Register(counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				first, err := store.Get(ctx, inv.Key)
				if err != nil {
					return client.Effect{}, client.Definite(err)
				}
				// Twice: the lease follows the clock.
				for range 2 {
					clock.Advance(lease / 2)
					want := clock.Now().Add(lease)
					for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
						rec, err := store.Get(ctx, inv.Key)
						if err == nil && rec.LeaseUntil.Equal(want) && rec.Owner == first.Owner {
							break
						}
						if ctx.Err() != nil || time.Now().After(deadline) {
							return client.Effect{}, client.Definite(fmt.Errorf("lease not renewed to %v (%v)", want, context.Cause(ctx)))
						}
					}
				}
				return client.Effect{Summary: "renewed"}, nil
			})); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if withDeadline { // a deadline later than the lease: renewals go on until it
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, clock.Now().Add(time.Hour))
				defer cancel()
			}
			r, err := exec.Execute(ctx, "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
			if err != nil || r.Outcome != client.Executed {
				t.Fatalf("%+v %v", r, err)
			}
		})
	}
}

// After a reconciler said a resend is safe, a resend the provider refuses
// (a 409 while the first request still runs, a 429) says nothing about the
// first attempt: the action stays uncertain with the same attempt, never
// "failed, nothing was done" with a new downstream key.
func TestRefusedResendAfterReconcileStaysUncertain(t *testing.T) {
	t.Parallel()
	for _, takeover := range []bool{false, true} {
		t.Run(fmt.Sprint("takeover=", takeover), func(t *testing.T) {
			t.Parallel()
			var runs atomic.Int64
			tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				if !takeover && runs.Load() == 1 {
					return client.Effect{}, errors.New("timeout after the request was written")
				}
				return client.Effect{}, client.Definite(errors.New("409 idempotency_key_in_use"))
			})
			tool.Reconciler = &verdicts{v: client.Reconciliation{Verdict: client.VerdictResendSafe}}
			f := newFixture(t, nil, tool)
			in := `{"ticketId":"5"}`
			if takeover {
				k, _ := tool.Key("run", client.Call{Input: json.RawMessage(in)}, 0)
				if _, err := f.store.Claim(context.Background(), ledger.ClaimParams{Key: k, Tool: "send_reply", RunID: "run", Owner: "crashed",
					LeaseUntil: t0.Add(time.Second), ExpiresAt: t0.Add(time.Hour), Fingerprint: fingerprintOf(t, tool, in)}); err != nil {
					t.Fatal(err)
				}
				f.clock.Advance(time.Second)
			}
			r := f.call(t, "run", "send_reply", in)
			wantOutcome(t, r, client.Uncertain, "do not retry")
			rec, err := f.store.Get(context.Background(), r.Key)
			if err != nil || rec.State != ledger.StateUncertain || rec.Attempt != 1 {
				t.Fatalf("record %+v, %v: want uncertain at attempt 1", rec, err)
			}
		})
	}
}

// contended is a ledger where another caller always holds the claim and
// keeps failing: every claim is refused by a live pending record, and every
// read finds it failed.
type contended struct {
	ledger.Store
	mu          sync.Mutex
	fingerprint string
}

func (s *contended) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fingerprint = p.Fingerprint
	return ledger.ClaimResult{Previous: &ledger.Record{Key: p.Key, State: ledger.StatePending, Owner: "other",
		Fingerprint: p.Fingerprint, Attempt: 1, LeaseUntil: p.LeaseUntil, ExpiresAt: p.ExpiresAt}}, nil
}

func (s *contended) Get(ctx context.Context, key string) (*ledger.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &ledger.Record{Key: key, State: ledger.StateFailed, Owner: "other", Attempt: 2, Reason: "provider busy",
		Fingerprint: s.fingerprint}, nil
}

func TestDuplicateOfAFailingCallGivesUpTruthfully(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	f := &fixture{clock: clock.NewFake(t0)}
	f.with(t, &contended{Store: ledgermem.New(nil)}, nil, counted("send_reply", &runs, nil))
	r := f.call(t, "run", "send_reply", `{"ticketId":"1"}`)
	wantOutcome(t, r, client.Failed, "Failed, nothing was done: provider busy. You may retry.")
	if runs.Load() != 0 || !r.Retryable {
		t.Fatalf("runs %d, result %+v", runs.Load(), r)
	}
}

// A repeat that takes over an uncertain record keeps the earlier attempt's
// own reason: in its Result's Err, which is what a host shows the model,
// and in the record it leaves (before, both became the generic "the
// outcome of an earlier attempt is unknown", and the provider's words were
// lost). A takeover that ends uncertain for a cause of its own records
// that cause beside the first one, once.
func TestTakeoverKeepsTheEarlierReason(t *testing.T) {
	t.Parallel()
	const words = "lost the connection to the bank after the transfer was sent"
	t.Run("no reconciler", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		f := newFixture(t, nil, counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{}, client.Ambiguous(errors.New(words))
		}))
		in := `{"ticketId":"5"}`
		first := f.call(t, "run", "send_reply", in)
		wantOutcome(t, first, client.Uncertain, "Do not retry.")
		for i := range 2 {
			again := f.call(t, "run", "send_reply", in)
			wantOutcome(t, again, client.Uncertain, "Do not retry.")
			if again.Err == nil || !strings.Contains(again.Err.Error(), words) {
				t.Fatalf("repeat %d: cause %v, want the earlier attempt's words %q", i, again.Err, words)
			}
			rec, err := f.store.Get(context.Background(), again.Key)
			if err != nil || rec.State != ledger.StateUncertain || !strings.Contains(rec.Reason, words) || strings.Count(rec.Reason, words) != 1 {
				t.Fatalf("repeat %d: record %+v, %v: want the earlier reason kept once", i, rec, err)
			}
		}
		if runs.Load() != 1 {
			t.Fatalf("tool ran %d times, want 1", runs.Load())
		}
	})
	t.Run("reconciler undecided", func(t *testing.T) {
		t.Parallel()
		var runs atomic.Int64
		tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{}, client.Ambiguous(errors.New(words))
		})
		tool.Reconciler = &verdicts{v: client.Reconciliation{Verdict: client.VerdictUnknown, Reason: "the bank's API is down"}}
		f := newFixture(t, nil, tool)
		in := `{"ticketId":"6"}`
		first := f.call(t, "run", "send_reply", in)
		if first.Err == nil || !strings.Contains(first.Err.Error(), words) || !strings.Contains(first.Err.Error(), "the bank's API is down") {
			t.Fatalf("first call: cause %v, want the tool's words beside the reconciler's", first.Err)
		}
		for i := range 2 {
			again := f.call(t, "run", "send_reply", in)
			wantOutcome(t, again, client.Uncertain, "")
			rec, err := f.store.Get(context.Background(), again.Key)
			if err != nil || strings.Count(rec.Reason, words) != 1 || !strings.Contains(rec.Reason, "the bank's API is down") ||
				again.Err == nil || !strings.Contains(again.Err.Error(), words) {
				t.Fatalf("repeat %d: record %+v, %v; cause %v", i, rec, err, again.Err)
			}
		}
	})
}
