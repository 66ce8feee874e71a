package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/providers/stripe"
)

// The tests run against the DynamoDB-compatible server of dynalitetest
// and a fake Stripe on 127.0.0.1.
func TestMain(m *testing.M) { os.Exit(dynalitetest.Main(m)) }

const apiKey = "sk_test_lambda"

// testAWS is the AWS configuration of the tests: static credentials for a
// local server, unless AWS credentials are in the environment (real
// DynamoDB through DYNAMODB_ENDPOINT).
func testAWS() []func(*config.LoadOptions) error {
	if os.Getenv("AWS_ACCESS_KEY_ID") != "" || os.Getenv("AWS_PROFILE") != "" {
		return nil
	}
	return []func(*config.LoadOptions) error{
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("local", "local", "")),
	}
}

// environ is an environment for EnvFrom.
type environ map[string]string

func (e environ) get(name string) string { return e[name] }

// fixture is one deployment: a ledger table, a fake Stripe with a paid
// PaymentIntent to refund, and a Handler built from the environment.
type fixture struct {
	env    environ
	h      *Handler
	stripe *stripefake.Server
	st     *stripe.Client
	store  *ledgerdynamo.Store
	pi     string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	endpoint := dynalitetest.Endpoint(t)
	api := dynalitetest.NewClient(endpoint)
	table := dynalitetest.NewTable(t, api)
	srv := stripefake.NewServer(&stripefake.Config{Seed: 1})
	t.Cleanup(srv.Close)
	f := &fixture{
		env:    environ{"ONCELY_TABLE": table, "DYNAMODB_ENDPOINT": endpoint, "STRIPE_BASE_URL": srv.URL, "STRIPE_API_KEY": apiKey},
		stripe: srv,
		st:     stripe.New(srv.URL, &stripe.Config{APIKey: apiKey}),
		store:  ledgerdynamo.New(api, table, nil),
	}
	f.h = f.newHandler(t)
	pi, err := f.st.PaymentIntents.Create(context.Background(), "setup", stripe.PaymentIntentParams{
		Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true})
	if err != nil {
		t.Fatal(err)
	}
	f.pi = pi.ID
	return f
}

// newHandler builds a Handler from the fixture's environment, as a cold
// start of one execution environment does.
func (f *fixture) newHandler(t *testing.T) *Handler {
	t.Helper()
	env, err := EnvFrom(f.env.get)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), env, &Options{AWS: testAWS(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// refundCall is a refund_payment tool_use of amount cents of the fixture's
// PaymentIntent, with a note the model words anew for every call.
func (f *fixture) refundCall(id string, amount any, reason string) ToolUse {
	in := map[string]any{"payment_intent": f.pi, "amount": amount, "note": "as asked in " + id}
	if reason != "" {
		in["reason"] = reason
	}
	raw, _ := json.Marshal(in)
	return ToolUse{Type: "tool_use", ID: id, Name: "refund_payment", Input: raw}
}

// refunds are the refunds Stripe made.
func (f *fixture) refunds() []fakes.Effect {
	return fakes.Filter(f.stripe.Journal(), fakes.KindRefund, "")
}

// invoke calls the handler as Lambda does: a context with the invocation's
// deadline and its request id.
func invoke(h *Handler, deadline time.Time, ev Event) (Response, error) {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-" + ev.ToolCalls[0].ID})
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return h.Handle(ctx, ev)
}

// one returns the single result of an invocation.
func one(t *testing.T, res Response, err error) ToolResult {
	t.Helper()
	if err != nil || len(res.ToolResults) != 1 {
		t.Fatalf("Handle = %+v, %v; want one tool result", res, err)
	}
	return res.ToolResults[0]
}

// invokeOne invokes the handler and returns the single result.
func invokeOne(t *testing.T, h *Handler, deadline time.Time, ev Event) ToolResult {
	t.Helper()
	res, err := invoke(h, deadline, ev)
	return one(t, res, err)
}

// waitFor polls cond until it holds, for at most 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// An invocation times out while Stripe holds the refund request; Stripe
// commits it after the client gave up. The claim's lease was the
// invocation's deadline, so the retry after the deadline takes the record
// over, finds the refund at Stripe instead of refunding again, and tells
// the model it was already done.
func TestTimeoutThenRetryReconciles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.Delay}) // held until the client hangs up, then committed
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "requested_by_customer")}}
	tool := RefundTool(f.st)
	key, err := tool.Key(ev.RunID, client.Call{Tool: tool.Name, Input: ev.ToolCalls[0].Input}, 0)
	if err != nil {
		t.Fatal(err)
	}

	// Long enough for the claim and the request to reach Stripe on a busy
	// machine; the fake holds the request past it.
	deadline := time.Now().Add(5 * time.Second)
	type answer struct {
		res Response
		err error
	}
	first := make(chan answer, 1)
	go func() {
		res, err := invoke(f.h, deadline, ev)
		first <- answer{res, err}
	}()

	waitFor(t, "the refund request to reach Stripe", func() bool { return len(f.stripe.Faults.Log()) == 1 })
	rec, err := f.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != ledger.StatePending || !rec.LeaseUntil.Equal(time.UnixMilli(deadline.UnixMilli())) {
		t.Errorf("record while the refund is in flight: %s, lease until %v; want pending until the invocation's deadline %v",
			rec.State, rec.LeaseUntil, deadline)
	}

	a := <-first
	r1 := one(t, a.res, a.err)
	if !time.Now().After(deadline) {
		t.Errorf("the first invocation returned before its deadline")
	}
	if !r1.IsError.Value || !strings.HasPrefix(text(r1), "Outcome unknown: the request may have gone through.") || r1.ToolUseID != "toolu_01" {
		t.Errorf("first invocation told the model %+v; want that the outcome is unknown", r1)
	}
	waitFor(t, "Stripe to commit the held refund", func() bool { return len(f.refunds()) == 1 })
	refund := f.refunds()[0]

	// The retry: Lambda's async retry, or the agent calling again.
	ev.ToolCalls[0].ID = "toolu_02"
	r2 := invokeOne(t, f.h, time.Now().Add(10*time.Second), ev)
	want := fmt.Sprintf("Already done earlier in this run: refund %s of EUR 10.00 for %s (succeeded). Do not repeat it.", refund.ID, f.pi)
	if r2.IsError.Value || text(r2) != want || r2.ToolUseID != "toolu_02" {
		t.Errorf("retry told the model %+v; want %q", r2, want)
	}
	if n := len(f.refunds()); n != 1 {
		t.Errorf("Stripe made %d refunds, want 1", n)
	}
	if st := f.h.exec.Stats(); st.Takeovers != 1 || st.Executed != 0 {
		t.Errorf("executor stats %+v; want one takeover and no second run", st)
	}
	if rec, err := f.store.Get(context.Background(), key); err != nil || rec.State != ledger.StateDone || rec.Ref != refund.ID {
		t.Errorf("record after the retry = %+v, %v; want done with ref %s", rec, err, refund.ID)
	}
}

// With the longest Lambda timeout, the lease is still the invocation's
// deadline, not the executor's default of two minutes, which it would not
// renew while the refund runs.
func TestLeaseIsTheDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.Delay})
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "")}}
	deadline := time.Now().Add(MaxLambdaTimeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.h.Handle(ctx, ev)
	}()
	waitFor(t, "the refund request to reach Stripe", func() bool { return len(f.stripe.Faults.Log()) == 1 })
	recs, err := f.store.List(context.Background(), ledger.Filter{State: ledger.StatePending, RunID: "run-1"})
	cancel() // the invocation ends
	<-done
	if err != nil || len(recs) != 1 || !recs[0].LeaseUntil.Equal(time.UnixMilli(deadline.UnixMilli())) {
		t.Fatalf("pending records = %+v, %v; want one with the lease until %v", recs, err, deadline)
	}
}

// The same event delivered twice (an async retry) refunds once, and the
// model is told the second time that it was done already.
func TestDoubleInvocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "requested_by_customer")}}
	r1 := invokeOne(t, f.h, time.Now().Add(10*time.Second), ev)
	// The model rewords its note, spells the reason its own way and writes
	// the amount as a string.
	ev.ToolCalls = []ToolUse{f.refundCall("toolu_02", "1000", "Requested by customer")}
	r2 := invokeOne(t, f.h, time.Now().Add(10*time.Second), ev)

	refunds := f.refunds()
	if len(refunds) != 1 {
		t.Fatalf("Stripe made %d refunds, want 1", len(refunds))
	}
	summary := fmt.Sprintf("refund %s of EUR 10.00 for %s (succeeded)", refunds[0].ID, f.pi)
	if r1.IsError.Value || text(r1) != "Done: "+summary {
		t.Errorf("first result %+v", r1)
	}
	if r2.IsError.Value || text(r2) != "Already done earlier in this run: "+summary+". Do not repeat it." {
		t.Errorf("second result %+v", r2)
	}
}

// Two execution environments get the same event at once: one refund.
func TestConcurrentInvocations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	handlers := []*Handler{f.h, f.newHandler(t)}
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "")}}
	results := make([]ToolResult, len(handlers))
	var wg sync.WaitGroup
	for i, h := range handlers {
		wg.Go(func() {
			res, err := invoke(h, time.Now().Add(10*time.Second), ev)
			if err == nil && len(res.ToolResults) == 1 {
				results[i] = res.ToolResults[0]
			}
		})
	}
	wg.Wait()
	if n := len(f.refunds()); n != 1 {
		t.Fatalf("Stripe made %d refunds, want 1", n)
	}
	done := 0
	for _, r := range results {
		switch {
		case r.IsError.Value:
			t.Errorf("result %+v", r)
		case strings.HasPrefix(text(r), "Done: "):
			done++
		case !strings.HasPrefix(text(r), "Already done earlier in this run: "):
			t.Errorf("result %+v", r)
		}
	}
	if done != 1 {
		t.Errorf("%d invocations report they did the refund, want 1: %+v", done, results)
	}
}

// Calls that cannot run get error results, in order, and do nothing; an
// event without a run is refused.
func TestBadCalls(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{
		{ID: "toolu_01", Name: "delete_account", Input: json.RawMessage(`{"id": 1}`)},
		{ID: "toolu_02", Name: "refund_payment", Input: json.RawMessage(`{"payment_intent": "` + f.pi + `"}`)},
		{ID: "toolu_03", Name: "refund_payment", Input: json.RawMessage(`{"payment_intent": "` + f.pi + `", "amount": -5}`)},
		// Two readers could disagree on which amount this is.
		{ID: "toolu_04", Name: "refund_payment", Input: json.RawMessage(`{"payment_intent": "` + f.pi + `", "amount": 1, "AMOUNT": 1000}`)},
		{ID: "toolu_05", Name: "refund_payment", Input: json.RawMessage(`{"payment_intent": "` + f.pi + `", "amount": "0x3e8"}`)},
	}}
	res, err := invoke(f.h, time.Now().Add(10*time.Second), ev)
	if err != nil || len(res.ToolResults) != len(ev.ToolCalls) {
		t.Fatalf("Handle = %+v, %v", res, err)
	}
	for i, want := range []string{
		`Unknown tool "delete_account". Nothing was done.`,
		`refund_payment needs "amount" to run safely`,
		"Failed, nothing was done. Do not retry: amount: -5 is not a positive number of cents.",
		`refund_payment: keys "amount" and "AMOUNT" in one JSON object differ only in case or Unicode normalization. Nothing was done.`,
		`refund_payment needs "amount" to run safely (want a number in plain decimal notation).`,
	} {
		r := res.ToolResults[i]
		if r.ToolUseID != ev.ToolCalls[i].ID || !r.IsError.Value || !strings.HasPrefix(text(r), want) {
			t.Errorf("result %d = %+v, want an error starting %q", i, r, want)
		}
	}
	if n := len(f.refunds()); n != 0 {
		t.Errorf("Stripe made %d refunds", n)
	}
	if _, err := invoke(f.h, time.Now().Add(time.Second), Event{ToolCalls: ev.ToolCalls}); err == nil {
		t.Error("an event without run_id was accepted")
	}
}

func TestEnvFrom(t *testing.T) {
	t.Parallel()
	full := environ{"ONCELY_TABLE": "ledger", "STRIPE_API_KEY": "sk_live_x", "DYNAMODB_ENDPOINT": "http://127.0.0.1:8000", "STRIPE_BASE_URL": "http://127.0.0.1:12111"}
	for _, tc := range []struct {
		name string
		env  environ
		want Env
		err  string
	}{
		{"all set", full, Env{Table: "ledger", StripeAPIKey: "sk_live_x", DynamoDBEndpoint: "http://127.0.0.1:8000", StripeBaseURL: "http://127.0.0.1:12111"}, ""},
		{"defaults", environ{"ONCELY_TABLE": "ledger", "STRIPE_API_KEY": "sk_live_x"}, Env{Table: "ledger", StripeAPIKey: "sk_live_x", StripeBaseURL: DefaultStripeBaseURL}, ""},
		{"no table", environ{"STRIPE_API_KEY": "sk_live_x"}, Env{}, "ONCELY_TABLE"},
		{"key from a parameter", environ{"ONCELY_TABLE": "ledger", "STRIPE_API_KEY_PARAMETER": "/oncely/stripe"}, Env{Table: "ledger", StripeAPIKeyParameter: "/oncely/stripe", StripeBaseURL: DefaultStripeBaseURL}, ""},
		{"sweeper", environ{"ONCELY_TABLE": "ledger", "STRIPE_API_KEY": "sk_live_x", "ONCELY_MODE": "sweeper"}, Env{Table: "ledger", StripeAPIKey: "sk_live_x", StripeBaseURL: DefaultStripeBaseURL, Sweeper: true}, ""},
		{"unknown mode", environ{"ONCELY_TABLE": "ledger", "STRIPE_API_KEY": "sk_live_x", "ONCELY_MODE": "sweep"}, Env{}, "ONCELY_MODE"},
		{"nothing", environ{}, Env{}, "[ONCELY_TABLE STRIPE_API_KEY_PARAMETER (or STRIPE_API_KEY)]"},
	} {
		got, err := EnvFrom(tc.env.get)
		switch {
		case tc.err != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want ErrConfig naming %s", tc.name, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s: EnvFrom = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// text is the text of a tool_result block.
func text(r ToolResult) string {
	var s strings.Builder
	for _, c := range r.Content {
		if c.OfText != nil {
			s.WriteString(c.OfText.Text)
		}
	}
	return s.String()
}
