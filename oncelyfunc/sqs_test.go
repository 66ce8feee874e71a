package oncelyfunc_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
)

func msg(id, body, group string, fifo bool) events.SQSMessage {
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	if fifo {
		arn += ".fifo"
	}
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: arn, Attributes: map[string]string{"MessageGroupId": group}}
}

func failures(r events.SQSEventResponse) []string {
	var ids []string
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// Redelivered messages are handled once; a definite failure is reported
// for redelivery and handled on the next delivery.
func TestSQSRedelivery(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	var handled []string
	failOnce := map[string]bool{"m2": true}
	h, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{}, func(_ context.Context, m events.SQSMessage) error {
		if failOnce[m.MessageId] {
			failOnce[m.MessageId] = false
			return client.Definite(errors.New("downstream refused"))
		}
		handled = append(handled, m.MessageId)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	batch := events.SQSEvent{Records: []events.SQSMessage{msg("m1", "{}", "", false), msg("m2", "{}", "", false), msg("m3", "{}", "", false)}}
	resp, err := h(ctx, batch)
	if err != nil || !slices.Equal(failures(resp), []string{"m2"}) {
		t.Fatalf("first delivery: failures %v, %v; want [m2]", failures(resp), err)
	}
	// Lambda delivers the whole batch again (a timeout), and m2 again.
	resp, err = h(ctx, batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: failures %v, %v", failures(resp), err)
	}
	if !slices.Equal(handled, []string{"m1", "m3", "m2"}) {
		t.Errorf("handled %v, want each message once: [m1 m3 m2]", handled)
	}
}

// With identity fields from the body, two messages carrying one order are
// one action.
func TestSQSBodyIdentity(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	n := 0
	h, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{
		Identity: []oncelyfunc.Key{{Expr: "json_parse(body).orderId", Norm: client.Integer}},
	}, func(context.Context, events.SQSMessage) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a", `{"orderId": 12, "from": "checkout"}`, "", false),
		msg("b", `{"orderId": "12", "from": "retry job"}`, "", false),
		msg("c", `{"from": "no order"}`, "", false),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || !slices.Equal(failures(resp), []string{"c"}) {
		t.Errorf("handled %d times, failures %v; want 1 and [c] (no identity)", n, failures(resp))
	}
}

// On a FIFO queue a failure holds back the rest of its message group, not
// the other groups.
func TestSQSFIFOGroups(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	var handled []string
	h, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{}, func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "a1" {
			return client.Definite(errors.New("refused"))
		}
		handled = append(handled, m.MessageId)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a1", "{}", "A", true), msg("b1", "{}", "B", true), msg("a2", "{}", "A", true), msg("b2", "{}", "B", true),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(failures(resp), []string{"a1", "a2"}) || !slices.Equal(handled, []string{"b1", "b2"}) {
		t.Errorf("failures %v, handled %v; want [a1 a2] and [b1 b2]", failures(resp), handled)
	}
}

// A message whose action is done is processed, also when the ledger holds
// no result for it: the reconciler found the effect (in the same
// delivery), or an operator resolved the record done. Until then an
// uncertain message is reported for redelivery with a warning that says
// what to do.
func TestSQSDoneWithoutResult(t *testing.T) {
	t.Parallel()
	found := client.ReconcilerFunc(func(context.Context, client.Invocation) (client.Reconciliation, error) {
		return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "shipped"}}, nil
	})
	for _, c := range []struct {
		name       string
		reconciler client.Reconciler
		resolve    bool // an operator resolves the record done before the redelivery
	}{
		{"reconciled in the same delivery", found, false},
		{"resolved by an operator", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := ledgermem.New(nil)
			var logs bytes.Buffer
			handled := 0
			h, err := oncelyfunc.SQS(client.New(store, nil), "ship", oncelyfunc.SQSOptions{
				Reconciler: c.reconciler,
				Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
			}, func(context.Context, events.SQSMessage) error {
				handled++
				return errors.New("connection reset after the request was sent") // ambiguous
			})
			if err != nil {
				t.Fatal(err)
			}
			batch := events.SQSEvent{Records: []events.SQSMessage{msg("m1", "{}", "", false)}}
			resp, err := h(ctx, batch)
			if c.resolve {
				uncertain, lerr := store.List(ctx, ledger.Filter{State: ledger.StateUncertain})
				if err != nil || lerr != nil || len(uncertain) != 1 || !slices.Equal(failures(resp), []string{"m1"}) {
					t.Fatalf("first delivery: failures %v, %v; uncertain %v, %v", failures(resp), err, uncertain, lerr)
				}
				key := uncertain[0].Key
				if out := logs.String(); !strings.Contains(out, "key="+key) || !strings.Contains(out, "oncely ledger resolve") || !strings.Contains(out, "dead-letter queue") {
					t.Errorf("the uncertain message went for redelivery without saying what to do: %q", out)
				}
				if _, err := ledger.Resolve(ctx, store, key, ledger.Resolution{Done: true, Summary: "found by hand", By: "alice"}, time.Now()); err != nil {
					t.Fatal(err)
				}
				resp, err = h(ctx, batch) // the redelivery
			}
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("a message whose action is done: failures %v, %v; want none", failures(resp), err)
			}
			if handled != 1 {
				t.Errorf("handled %d times, want 1", handled)
			}
		})
	}
}

// A message without an identity is reported for redelivery with a
// warning: it can only reach the dead-letter queue.
func TestSQSNoIdentityLogged(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h, err := oncelyfunc.SQS(client.New(ledgermem.New(nil), nil), "ship", oncelyfunc.SQSOptions{
		Identity: []oncelyfunc.Key{{Expr: "json_parse(body).orderId"}},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	}, func(context.Context, events.SQSMessage) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg("m1", `{"orderId": ""}`, "", false)}})
	if err != nil || !slices.Equal(failures(resp), []string{"m1"}) {
		t.Fatalf("failures %v, %v; want [m1]", failures(resp), err)
	}
	if out := logs.String(); !strings.Contains(out, "message_id=m1") || !strings.Contains(out, "dead-letter queue") {
		t.Errorf("log: %q", out)
	}
}

func received(m events.SQSMessage, n int) events.SQSMessage {
	m.Attributes = map[string]string{"ApproximateReceiveCount": strconv.Itoa(n)}
	return m
}

// The queue scenarios on SQS: the same message delivered 5 times runs
// once and no delivery is reported for redelivery.
func TestSQSFiveDeliveriesOneEffect(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), &client.Config{NoCounters: true})
	runs := 0
	h, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{}, func(context.Context, events.SQSMessage) error { runs++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{received(msg("m-5", "{}", "", false), i)}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Errorf("delivery %d: failures %v, %v; want none (deleted)", i, failures(resp), err)
		}
	}
	if runs != 1 {
		t.Errorf("handler ran %d times for 5 deliveries, want 1", runs)
	}
}

// 8 invocations (8 executors, as 8 Lambda instances, on one ledger)
// receive the same message at once: one runs it; the others wait for it
// and delete it, or report it for redelivery while it runs.
func TestSQSEightConcurrentOneRuns(t *testing.T) {
	t.Parallel()
	store := ledgermem.New(nil)
	var runs atomic.Int32
	release := make(chan struct{})
	type result struct {
		resp events.SQSEventResponse
		err  error
	}
	results := make(chan result, 8)
	for range 8 {
		exec := client.New(store, &client.Config{NoCounters: true, Wait: time.Minute})
		h, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{}, func(context.Context, events.SQSMessage) error {
			runs.Add(1)
			<-release
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg("m-8", "{}", "", false)}})
			results <- result{resp, err}
		}()
	}
	// Release the run once it started; the others wait for it (Wait).
	deadline := time.Now().Add(30 * time.Second)
	for runs.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no invocation ran the handler")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range 8 {
		r := <-results
		if r.err != nil || len(r.resp.BatchItemFailures) != 0 {
			t.Errorf("an invocation: failures %v, %v; want none", failures(r.resp), r.err)
		}
	}
	if got := runs.Load(); got != 1 {
		t.Errorf("handler ran %d times for 8 concurrent invocations, want 1", got)
	}
}

// A function timeout not below the visibility timeout is refused when
// the handler is built, naming both.
func TestSQSVisibilityTimeoutRefused(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), &client.Config{NoCounters: true})
	h := func(context.Context, events.SQSMessage) error { return nil }
	_, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{FunctionTimeout: time.Minute, VisibilityTimeout: 30 * time.Second}, h)
	if err == nil || !strings.Contains(err.Error(), "FunctionTimeout (1m0s)") || !strings.Contains(err.Error(), "VisibilityTimeout (30s)") {
		t.Errorf("function timeout above the visibility timeout: %v; want a refusal naming both", err)
	}
	if _, err := oncelyfunc.SQS(exec, "orders2", oncelyfunc.SQSOptions{FunctionTimeout: time.Minute, VisibilityTimeout: 6 * time.Minute}, h); err != nil {
		t.Errorf("a visibility timeout 6 times the function's: %v", err)
	}
}

// A handler that always fails is reported for redelivery on every
// receive; on the last one (maxReceiveCount) the dead-letter hook fires,
// once.
func TestSQSAlwaysFailsDeadLetterOnce(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), &client.Config{NoCounters: true})
	runs, hooks := 0, 0
	h, err := oncelyfunc.SQS(exec, "orders", oncelyfunc.SQSOptions{
		MaxReceiveCount: 3,
		OnDeadLetter:    func(context.Context, events.SQSMessage, error) { hooks++ },
		Logger:          slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
	}, func(context.Context, events.SQSMessage) error {
		runs++
		return client.Definite(errors.New("downstream refused"))
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{received(msg("m-fail", "{}", "", false), i)}})
		if err != nil || !slices.Equal(failures(resp), []string{"m-fail"}) {
			t.Fatalf("receive %d: failures %v, %v; want [m-fail]", i, failures(resp), err)
		}
		if want := map[bool]int{true: 1, false: 0}[i == 3]; hooks != want {
			t.Errorf("after receive %d the hook fired %d times, want %d", i, hooks, want)
		}
	}
	if runs != 3 {
		t.Errorf("handler ran %d times, want 3", runs)
	}
}
