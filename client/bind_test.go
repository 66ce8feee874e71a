package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

type refundInput struct {
	PaymentIntent string `json:"paymentIntent"`
	Amount        int64  `json:"amount"`
	Reason        string `json:"reason"`
}

// bindRefund registers a refund tool that binds its input, and returns
// what each run bound.
func bindRefund(t *testing.T) (*client.Executor, *[]refundInput) {
	t.Helper()
	var runs []refundInput
	exec := client.New(ledgermem.New(nil), nil)
	err := exec.Register(client.Tool{
		Name: "refund_order",
		Identity: []client.Field{
			{Path: "paymentIntent", Norm: client.Trimmed},
			{Path: "amount", Norm: client.Integer},
		},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in refundInput
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			runs = append(runs, in)
			return client.Effect{Summary: "refunded"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return exec, &runs
}

// The tool acts on the values its key was made of, whatever form the model
// wrote them in.
func TestBindNormalizedIdentity(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"paymentIntent": "pi_1", "amount": 1000}`,
		`{"paymentIntent": "pi_1", "amount": "1000"}`,
		`{"paymentIntent": " pi_1\n", "amount": 1000.0}`,
		`{"paymentIntent": "pi_1", "amount": "1e3", "reason": "asked twice"}`,
		`{"paymentIntent": "pi_1", "amount": " +1000.00 "}`,
	} {
		exec, runs := bindRefund(t)
		res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(in)})
		if err != nil || res.Outcome != client.Executed {
			t.Fatalf("%s: %v %v %s", in, res.Outcome, err, res.Text)
		}
		if got := (*runs)[0]; got.PaymentIntent != "pi_1" || got.Amount != 1000 {
			t.Errorf("%s: bound %+v", in, got)
		}
	}
}

// Two readers of one input cannot disagree: an input whose names differ
// only in case is refused before the tool runs, and a field is filled only
// from its exact name.
func TestBindExactNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec, runs := bindRefund(t)
	for _, in := range []string{
		`{"paymentIntent": "pi_1", "amount": 1, "AMOUNT": 1000}`,
		`{"paymentIntent": "pi_1", "Amount": 1000, "amount": 1}`,
		`{"paymentIntent": "pi_1", "amount": 1, "reason": "a", "Reason": "b"}`,
	} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(in)})
		if err != nil || res.Outcome != client.InvalidInput || !errors.Is(res.Err, client.ErrDuplicateKey) {
			t.Errorf("%s: %v %v %v", in, res.Outcome, res.Err, err)
		}
	}
	if len(*runs) != 0 {
		t.Fatalf("the tool ran on a refused input: %+v", *runs)
	}
	// "REASON" alone is not "reason"; "AMOUNT" alone is not the identity.
	res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(`{"paymentIntent": "pi_1", "amount": 5, "REASON": "x"}`)})
	if err != nil || res.Outcome != client.Executed || (*runs)[0].Reason != "" {
		t.Errorf("REASON filled reason: %+v %v %v", *runs, res.Outcome, err)
	}
	res, _ = exec.Execute(ctx, "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(`{"paymentIntent": "pi_1", "AMOUNT": 5}`)})
	if res.Outcome != client.InvalidInput || !errors.Is(res.Err, client.ErrMissingField) {
		t.Errorf("AMOUNT taken for amount: %v %v", res.Outcome, res.Err)
	}
	// An untagged field is matched by its Go name, exactly.
	var untagged struct{ Note, Other string }
	inv := bound(t, client.Tool{Name: "t", Identity: []client.Field{{Path: "Note"}}}, `{"Note": "n", "other": "o"}`)
	if err := inv.Bind(&untagged); err != nil || untagged.Note != "n" || untagged.Other != "" {
		t.Errorf("untagged fields: %+v %v", untagged, err)
	}
}

// bound returns the Invocation an Executor hands tool.Run for input.
func bound(t *testing.T, tool client.Tool, input string) client.Invocation {
	t.Helper()
	var inv client.Invocation
	tool.Run = func(ctx context.Context, i client.Invocation) (client.Effect, error) {
		inv = i
		return client.Effect{Summary: "ok"}, nil
	}
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(tool); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: tool.Name, Input: json.RawMessage(input)})
	if err != nil || res.Outcome != client.Executed {
		t.Fatalf("%s: %v %v %s", input, res.Outcome, err, res.Text)
	}
	return inv
}

func TestBindNormalizers(t *testing.T) {
	t.Parallel()
	tool := client.Tool{
		Name: "invite",
		Identity: []client.Field{
			{Path: "user.email", Norm: client.Email},
			{Path: "team", Norm: client.CaseFolded},
			{Path: "seat", Norm: client.String},
			{Path: "id", Norm: client.Integer},
		},
		Validated: []client.Field{{Path: "price", Norm: client.Decimal}, {Path: "missing", Norm: client.Decimal}},
	}
	inv := bound(t, tool, `{"user": {"email": " Ada@Example.COM", "name": " Ada "}, "team": "ΣΊΣΥΦΟΣ", "seat": 7,
		"id": "123456789012345678901234567890", "price": "10.50", "note": " free text "}`)
	var in struct {
		User struct {
			Email string `json:"email"`
			Name  string `json:"name"`
		} `json:"user"`
		Team    string   `json:"team"`
		Seat    string   `json:"seat"`
		ID      *big.Int `json:"id"`
		Price   float64  `json:"price"`
		Note    string   `json:"note"`
		Missing *float64 `json:"missing"`
	}
	if err := inv.Bind(&in); err != nil {
		t.Fatal(err)
	}
	if in.User.Email != "ada@example.com" || in.Team != "σίσυφοσ" || in.Seat != "7" || in.ID.String() != "123456789012345678901234567890" ||
		in.Price != 10.5 || in.Missing != nil {
		t.Errorf("identity or validated fields not normalized: %+v", in)
	}
	if in.User.Name != " Ada " || in.Note != " free text " {
		t.Errorf("other fields changed: %+v", in)
	}
	// A number without a normalizer is bound as the value its key hashed.
	for _, in := range []string{`{"qty": 10}`, `{"qty": 10.0}`, `{"qty": 1e1}`, `{"qty": 100E-1}`} {
		var q struct {
			Qty int `json:"qty"`
		}
		if err := bound(t, client.Tool{Name: "t", Identity: []client.Field{{Path: "qty"}}}, in).Bind(&q); err != nil || q.Qty != 10 {
			t.Errorf("%s: bound %d, %v", in, q.Qty, err)
		}
	}
	// A map sees the same view.
	var m map[string]any
	if err := inv.Bind(&m); err != nil || m["price"] != 10.5 || m["seat"] != "7" {
		t.Errorf("map view: %v %v", m, err)
	}
}

// A number field tagged `json:",string"` gets the number bound for an
// identity or validated field, whatever form the model wrote it in, as it
// gets a number in a string in encoding/json; any other field tagged so
// still takes a number in a string only.
func TestBindStringTag(t *testing.T) {
	t.Parallel()
	tool := client.Tool{
		Name:      "refund_order",
		Identity:  []client.Field{{Path: "amount", Norm: client.Integer}, {Path: "order.id"}},
		Validated: []client.Field{{Path: "rate", Norm: client.Decimal}},
	}
	type order struct {
		ID uint64 `json:"id,string"`
	}
	for _, in := range []string{
		`{"amount": "1000", "order": {"id": 42}, "rate": "0.25"}`,
		`{"amount": 1000, "order": {"id": 42.0}, "rate": 0.25}`,
		`{"amount": "1e3", "order": {"id": 4.2e1}, "rate": "25e-2", "free": "7"}`,
	} {
		inv := bound(t, tool, in)
		var v struct {
			Amount int64   `json:"amount,string"`
			Order  order   `json:"order"`
			Rate   float64 `json:"rate,string"`
			Free   int     `json:"free,string"`
		}
		if err := inv.Bind(&v); err != nil || v.Amount != 1000 || v.Order.ID != 42 || v.Rate != 0.25 {
			t.Errorf("%s: bound %+v, %v", in, v, err)
		}
		var p struct {
			Amount *int64 `json:"amount,string"`
		}
		if err := inv.Bind(&p); err != nil || p.Amount == nil || *p.Amount != 1000 {
			t.Errorf("%s: pointer field: %v", in, err)
		}
	}
	// A field outside the identity keeps encoding/json's rule.
	inv := bound(t, tool, `{"amount": 1000, "order": {"id": 42}, "free": 7}`)
	var free struct {
		Free int `json:"free,string"`
	}
	var ie *client.InputError
	if err := inv.Bind(&free); !errors.As(err, &ie) || ie.Field != "free" {
		t.Errorf("an unquoted number for another ,string field: %+v, %v", free, err)
	}
	// A bound number that does not fit is the model's mistake, named.
	var small struct {
		Amount int8 `json:"amount,string"`
	}
	if err := inv.Bind(&small); !errors.As(err, &ie) || ie.Field != "amount" || !strings.Contains(ie.Msg, "want an integer") || errclass.Of(err) != errclass.Permanent {
		t.Errorf("1000 into an int8: %v", err)
	}
}

// A json.Number field gets a number exactly, as in encoding/json: an id
// beyond 2^53 that client.Integer hashed, or any other number.
func TestBindJSONNumber(t *testing.T) {
	t.Parallel()
	inv := bound(t, client.Tool{Name: "ship", Identity: []client.Field{{Path: "orderId", Norm: client.Integer}}},
		`{"orderId": "9007199254740993", "box": {"weight": 1.50}}`)
	var in struct {
		OrderID json.Number `json:"orderId"`
		Box     struct {
			Weight *json.Number `json:"weight"`
		} `json:"box"`
	}
	if err := inv.Bind(&in); err != nil || in.OrderID != "9007199254740993" || in.Box.Weight == nil || *in.Box.Weight != "1.50" {
		t.Errorf("bound %+v, %v", in, err)
	}
}

// Input that does not fit the tool's type is the model's mistake: a
// permanent failure naming the field, and nothing was done.
func TestBindWrongType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	ran := false
	err := exec.Register(client.Tool{
		Name:     "ship",
		Identity: []client.Field{{Path: "orderId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				OrderID string `json:"orderId"`
				Box     struct {
					Count int `json:"count"`
				} `json:"box"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			ran = true
			return client.Effect{Summary: "shipped"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "ship", Input: json.RawMessage(`{"orderId": 7, "box": {"count": "three"}}`)})
	if err != nil || ran || res.Outcome != client.Failed || res.Retryable {
		t.Fatalf("%v %v ran=%v %s", res.Outcome, err, ran, res.Text)
	}
	var ie *client.InputError
	if !errors.As(res.Err, &ie) || ie.Field != "box.count" || !errors.Is(res.Err, client.ErrFieldType) || errclass.Of(res.Err) != errclass.Permanent {
		t.Errorf("want a permanent *InputError for box.count, got %#v", res.Err)
	}
	if !strings.Contains(res.Text, "box.count") || !strings.Contains(res.Text, "want an integer") {
		t.Errorf("text: %s", res.Text)
	}
}

func TestBindMisuse(t *testing.T) {
	t.Parallel()
	var in struct{}
	err := client.Invocation{Input: json.RawMessage(`{"a":1}`)}.Bind(&in)
	if !errors.Is(err, client.ErrNotBound) || errclass.Of(err) != errclass.Permanent {
		t.Errorf("hand-made invocation: %v", err)
	}
	inv := bound(t, client.Tool{Name: "t", Identity: []client.Field{{Path: "a"}}}, `{"a":1}`)
	for _, v := range []any{in, nil, (*struct{})(nil)} {
		if err := inv.Bind(v); err == nil || errclass.Of(err) != errclass.Permanent {
			t.Errorf("Bind(%T): %v", v, err)
		}
	}
	var ch struct {
		A chan int `json:"a"`
	}
	if err := inv.Bind(&ch); err == nil || errors.As(err, new(*client.InputError)) {
		t.Errorf("an undecodable type is the program's error, not the input's: %v", err)
	}
}

// A reconciler asked at a takeover and a tool run with Config.Disabled bind
// the same normalized values as a tool run under a claim: the Executor
// builds the bound input whenever it hands out an Invocation.
func TestBindOutsideFirstRun(t *testing.T) {
	t.Parallel()
	type input struct {
		PaymentIntent string `json:"paymentIntent"`
		Amount        int64  `json:"amount"`
	}
	const raw = `{"paymentIntent": " pi_1 ", "amount": "1e3"}`
	bindInto := func(inv client.Invocation) (input, error) {
		var in input
		err := inv.Bind(&in)
		return in, err
	}
	newTool := func(runs *[]input) client.Tool {
		return client.Tool{
			Name:     "refund_order",
			Identity: []client.Field{{Path: "paymentIntent", Norm: client.Trimmed}, {Path: "amount", Norm: client.Integer}},
			Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				in, err := bindInto(inv)
				if err != nil {
					return client.Effect{}, err
				}
				*runs = append(*runs, in)
				return client.Effect{Summary: "refunded"}, nil
			},
		}
	}
	want := input{PaymentIntent: "pi_1", Amount: 1000}

	t.Run("disabled", func(t *testing.T) {
		var runs []input
		exec := client.New(ledgermem.New(nil), &client.Config{Disabled: true})
		if err := exec.Register(newTool(&runs)); err != nil {
			t.Fatal(err)
		}
		res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(raw)})
		if err != nil || res.Outcome != client.Executed || len(runs) != 1 || runs[0] != want {
			t.Fatalf("%v %v %s: bound %+v, want %+v", res.Outcome, err, res.Text, runs, want)
		}
	})

	t.Run("reconciler at takeover", func(t *testing.T) {
		ctx := context.Background()
		clock := clock.NewFake(t0)
		store := ledgermem.New(&ledgermem.Config{Clock: clock})
		var runs, reconciled []input
		tool := newTool(&runs)
		tool.Reconciler = client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
			in, err := bindInto(inv)
			if err != nil {
				return client.Reconciliation{}, err
			}
			reconciled = append(reconciled, in)
			return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "refunded before the crash"}}, nil
		})
		exec := client.New(store, &client.Config{Clock: clock})
		if err := exec.Register(tool); err != nil {
			t.Fatal(err)
		}
		key, err := tool.Key("run-1", client.Call{Input: json.RawMessage(raw)}, 0)
		if err != nil {
			t.Fatal(err)
		}
		// A worker claimed the action and crashed.
		if _, err := store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "refund_order", RunID: "run-1", Owner: "crashed",
			LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(raw)})
		if err != nil || res.Outcome != client.AlreadyDone || len(reconciled) != 1 || reconciled[0] != want || len(runs) != 0 {
			t.Fatalf("%v %v %s: reconciler bound %+v, want %+v; runs %+v", res.Outcome, err, res.Text, reconciled, want, runs)
		}
	})
}
