package oncelyfunc_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
)

type order struct {
	OrderID any    `json:"orderId"`
	Note    string `json:"note"`
}

type receipt struct {
	Charge string `json:"charge"`
	Seq    int64  `json:"seq"`
}

func newCharge(t *testing.T, opts oncelyfunc.Options[receipt], fn func(context.Context, order) (receipt, error)) func(context.Context, order) (receipt, error) {
	t.Helper()
	exec := client.New(ledgermem.New(nil), nil)
	f, err := oncelyfunc.Wrap(exec, "charge", opts, fn)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A repeat returns the first call's full output, whatever the free text
// and the type of the identity value.
func TestRepeatReturnsFirstOutput(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	charge := newCharge(t, oncelyfunc.Options[receipt]{
		Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.Integer}},
		Scope:    client.ScopeGlobal,
	}, func(_ context.Context, o order) (receipt, error) {
		return receipt{Charge: "ch_1", Seq: runs.Add(1)}, nil
	})
	ctx := context.Background()
	first, err := charge(ctx, order{OrderID: 42, Note: "please"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := charge(ctx, order{OrderID: "42", Note: "again, reworded"})
	if err != nil {
		t.Fatal(err)
	}
	if first != again || runs.Load() != 1 {
		t.Errorf("first %+v, repeat %+v, %d runs; want one run and the same output", first, again, runs.Load())
	}
	other, err := charge(ctx, order{OrderID: 43})
	if err != nil || other.Seq != 2 {
		t.Errorf("another order: %+v, %v", other, err)
	}
}

// The identity can come from a JSON-encoded body (API Gateway, SQS).
func TestIdentityInJSONBody(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	var runs atomic.Int64
	handle, err := oncelyfunc.Wrap(exec, "api", oncelyfunc.Options[events.APIGatewayProxyResponse]{
		Identity: []oncelyfunc.Key{{Expr: "json_parse(body).orderId", Norm: client.Integer}},
		Scope:    client.ScopeGlobal,
	}, func(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		runs.Add(1)
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: `{"charged":true}`}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, body := range []string{`{"orderId": 7, "note": "a"}`, `{"note": "b", "orderId": "7"}`} {
		resp, err := handle(ctx, events.APIGatewayProxyRequest{Body: body, RequestContext: events.APIGatewayProxyRequestContext{RequestID: "req-" + string(rune('a'+i))}})
		if err != nil || resp.StatusCode != 201 || resp.Body != `{"charged":true}` {
			t.Fatalf("call %d: %+v, %v", i, resp, err)
		}
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs, want 1", runs.Load())
	}
	_, err = handle(ctx, events.APIGatewayProxyRequest{Body: `{"note": "no order"}`})
	if !errors.Is(err, oncelyfunc.ErrInvalidInput) {
		t.Errorf("no order id: %v, want ErrInvalidInput", err)
	}
	_, err = handle(ctx, events.APIGatewayProxyRequest{Body: `not json`})
	if !errors.Is(err, oncelyfunc.ErrInvalidInput) {
		t.Errorf("body not JSON: %v, want ErrInvalidInput", err)
	}
	if runs.Load() != 1 {
		t.Errorf("invalid input ran the function: %d runs", runs.Load())
	}
}

// to_number of a large id does not round it: two orders whose ids a
// double cannot tell apart are two actions, and the second order does not
// get the first one's output.
func TestToNumberKeepsBigIds(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	handle, err := oncelyfunc.Wrap(exec, "api", oncelyfunc.Options[string]{
		Identity: []oncelyfunc.Key{{Expr: "to_number(json_parse(body).orderId)", Norm: client.Integer}},
		Scope:    client.ScopeGlobal,
	}, func(_ context.Context, req events.APIGatewayProxyRequest) (string, error) {
		return "charged " + req.Body, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"orderId": "9007199254740993"}`, `{"orderId": "9007199254740992"}`, `{"orderId": 9007199254740991}`} {
		out, err := handle(context.Background(), events.APIGatewayProxyRequest{Body: body})
		if err != nil || out != "charged "+body {
			t.Errorf("%s: %q, %v; want its own charge", body, out, err)
		}
	}
}

// A repeat's Out is the first call's, large numbers in interface values
// included: they are not rounded through float64.
func TestRepeatKeepsBigNumbers(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	charge, err := oncelyfunc.Wrap(exec, "charge", oncelyfunc.Options[map[string]any]{
		Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.Integer}},
	}, func(_ context.Context, o order) (map[string]any, error) {
		return map[string]any{"chargeId": int64(9007199254740993), "orderId": o.OrderID}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var outs []string
	for range 2 {
		out, err := charge(context.Background(), order{OrderID: 7})
		js, _ := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(js))
	}
	if want := `{"chargeId":9007199254740993,"orderId":7}`; outs[0] != want || outs[1] != want {
		t.Errorf("first %s, repeat %s; want both %s", outs[0], outs[1], want)
	}
}

// An identity that is empty once normalized is missing: the call is
// refused, not one action shared by every empty id.
func TestEmptyIdentity(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	exec := client.New(ledgermem.New(nil), nil)
	handle, err := oncelyfunc.Wrap(exec, "api", oncelyfunc.Options[int64]{
		Identity: []oncelyfunc.Key{{Expr: "json_parse(body).orderId", Norm: client.Trimmed}},
		Scope:    client.ScopeGlobal,
	}, func(context.Context, events.APIGatewayProxyRequest) (int64, error) { return runs.Add(1), nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{`{"orderId": "", "amount": 10}`, `{"orderId": "", "amount": 99}`, `{"orderId": "  ", "amount": 99}`} {
		if n, err := handle(context.Background(), events.APIGatewayProxyRequest{Body: body}); !errors.Is(err, oncelyfunc.ErrInvalidInput) || !errors.Is(err, client.ErrMissingField) {
			t.Errorf("%s: %d, %v; want ErrInvalidInput for a missing field", body, n, err)
		}
	}
	if runs.Load() != 0 {
		t.Errorf("%d runs on an empty order id", runs.Load())
	}
}

// A definite failure is returned and a later call runs again; an unmarked
// error leaves the call uncertain and is not run again.
func TestFailures(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	fail := errors.New("card declined")
	charge := newCharge(t, oncelyfunc.Options[receipt]{
		Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.Integer}},
		Scope:    client.ScopeGlobal,
	}, func(_ context.Context, o order) (receipt, error) {
		n := runs.Add(1)
		switch o.OrderID {
		case 1:
			if n == 1 {
				return receipt{}, client.Definite(fail)
			}
			return receipt{Charge: "ch_ok"}, nil
		default:
			return receipt{}, errors.New("connection reset")
		}
	})
	ctx := context.Background()
	if _, err := charge(ctx, order{OrderID: 1}); !errors.Is(err, fail) {
		t.Fatalf("definite failure: %v", err)
	}
	if r, err := charge(ctx, order{OrderID: 1}); err != nil || r.Charge != "ch_ok" {
		t.Fatalf("retry after a definite failure: %+v, %v", r, err)
	}
	if _, err := charge(ctx, order{OrderID: 2}); !errors.Is(err, oncelyfunc.ErrUncertain) {
		t.Fatalf("ambiguous failure: %v, want ErrUncertain", err)
	}
	before := runs.Load()
	if _, err := charge(ctx, order{OrderID: 2}); !errors.Is(err, oncelyfunc.ErrUncertain) || runs.Load() != before {
		t.Fatalf("repeat of an uncertain call: %v, ran %d more times", err, runs.Load()-before)
	}
}

// An output over the ledger's result limit is returned to the first
// caller; a repeat through Wrap says it was not kept, and through
// WrapDone is a Done that says so (Known false) with the reference.
func TestResultTooLargeToKeep(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 70<<10) // over the executor's 64 KiB default
	opts := oncelyfunc.Options[receipt]{
		Identity: []oncelyfunc.Key{{Expr: "orderId"}},
		Ref:      func(r receipt) string { return "ch_9" },
	}
	fn := func(context.Context, order) (receipt, error) { return receipt{Charge: big}, nil }
	charge := newCharge(t, opts, fn)
	ctx := context.Background()
	first, err := charge(ctx, order{OrderID: 9})
	if err != nil || first.Charge != big {
		t.Fatalf("first call: %v", err)
	}
	if _, err := charge(ctx, order{OrderID: 9}); !errors.Is(err, oncelyfunc.ErrResultNotKept) {
		t.Errorf("repeat: %v, want ErrResultNotKept", err)
	}

	exec := client.New(ledgermem.New(nil), nil)
	done, err := oncelyfunc.WrapDone(exec, "charge", opts, fn)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := done(ctx, order{OrderID: 9})
	if err != nil || !d.Known || d.Value.Charge != big || d.Replayed || d.Ref != "ch_9" {
		t.Fatalf("first call through WrapDone: known %v, replayed %v, ref %q, %v", d.Known, d.Replayed, d.Ref, err)
	}
	d, res, err := done(ctx, order{OrderID: 9})
	if err != nil || d.Known || d.Value != (receipt{}) || !d.Replayed || d.Ref != "ch_9" || res.Outcome != client.AlreadyDone {
		t.Errorf("repeat through WrapDone: %+v, %v, %v; want a Done not known, with the reference", d, res.Outcome, err)
	}
}

// Concurrent calls of one identity run the function once; every caller
// gets its output or is told the call is in progress.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	entered, release := make(chan struct{}, 8), make(chan struct{})
	charge := newCharge(t, oncelyfunc.Options[receipt]{
		Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.Integer}},
	}, func(context.Context, order) (receipt, error) {
		runs.Add(1)
		entered <- struct{}{}
		<-release
		return receipt{Charge: "ch_1"}, nil
	})
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			r, err := charge(ctx, order{OrderID: 5})
			if err == nil && r.Charge != "ch_1" {
				err = errors.New("wrong output " + r.Charge)
			}
			if err != nil && !errors.Is(err, oncelyfunc.ErrInProgress) {
				errs <- err
			}
		})
	}
	<-entered // the first caller is inside; the others merge or find the claim
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if runs.Load() != 1 {
		t.Errorf("%d runs, want 1", runs.Load())
	}
}

func TestWrapRefusesMistakes(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	fn := func(context.Context, order) (receipt, error) { return receipt{}, nil }
	if _, err := oncelyfunc.Wrap(exec, "a", oncelyfunc.Options[receipt]{}, fn); err == nil {
		t.Error("no identity: accepted")
	}
	if _, err := oncelyfunc.Wrap(exec, "b", oncelyfunc.Options[receipt]{Identity: []oncelyfunc.Key{{Expr: "orderId[["}}}, fn); err == nil {
		t.Error("a malformed expression: accepted")
	}
	if _, err := oncelyfunc.Wrap[order, receipt](exec, "c", oncelyfunc.Options[receipt]{Identity: []oncelyfunc.Key{{Expr: "orderId"}}}, nil); err == nil {
		t.Error("nil function: accepted")
	}
}

// A plain error leaves the call uncertain for good by default; with
// ErrorsAreDefinite it means nothing happened, and a retry runs again, as
// Powertools does. A error marked ambiguous stays ambiguous.
func TestErrorsAreDefinite(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		definite  bool
		err       error
		wantRetry bool
		wantFirst error
	}{
		{"default: a plain error may have happened", false, errors.New("boom"), false, oncelyfunc.ErrUncertain},
		{"ErrorsAreDefinite: a plain error did nothing", true, errors.New("boom"), true, nil},
		{"ErrorsAreDefinite: a marked ambiguous error", true, client.Ambiguous(errors.New("timeout")), false, oncelyfunc.ErrUncertain},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			charge := newCharge(t, oncelyfunc.Options[receipt]{
				Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.Integer}}, ErrorsAreDefinite: c.definite,
			}, func(ctx context.Context, o order) (receipt, error) {
				calls++
				if calls == 1 {
					return receipt{}, c.err
				}
				return receipt{Charge: "ch_1"}, nil
			})
			_, err := charge(context.Background(), order{OrderID: 7})
			if c.wantFirst != nil && !errors.Is(err, c.wantFirst) {
				t.Fatalf("first call: %v, want %v", err, c.wantFirst)
			}
			if c.wantFirst == nil && (err == nil || errors.Is(err, oncelyfunc.ErrUncertain)) {
				t.Fatalf("first call: %v, want the function's error", err)
			}
			out, err := charge(context.Background(), order{OrderID: 7})
			if ran := calls == 2; ran != c.wantRetry {
				t.Fatalf("retry ran the function: %v, want %v (err %v)", ran, c.wantRetry, err)
			}
			if c.wantRetry && (err != nil || out.Charge != "ch_1") {
				t.Fatalf("retry: %+v, %v", out, err)
			}
		})
	}
}

// The wrapped function gets the downstream key of the action's attempt, the
// one a provider deduplicates on; outside a wrapped function there is none.
func TestDownstreamKeyInsideWrap(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	var seen string
	f, err := oncelyfunc.WrapResult(exec, "charge", oncelyfunc.Options[receipt]{
		Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.Integer}},
	}, func(ctx context.Context, o order) (receipt, error) {
		seen = oncelyfunc.DownstreamKey(ctx)
		return receipt{Charge: "ch_1"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	_, res, err := f(context.Background(), order{OrderID: 7})
	if err != nil || res.Outcome != client.Executed {
		t.Fatalf("%+v, %v", res, err)
	}
	if want := client.DownstreamKey(res.Key, res.Attempt); seen != want || seen == "" {
		t.Errorf("DownstreamKey inside = %q, want %q", seen, want)
	}
	if k := oncelyfunc.DownstreamKey(context.Background()); k != "" {
		t.Errorf("DownstreamKey outside = %q, want \"\"", k)
	}
}
