package oncelyfunc_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
)

// A Lambda handler made exactly-once per order: a redelivered event gets
// the first invocation's full response.
func ExampleWrap() {
	exec := client.New(ledgermem.New(nil), nil) // ledgerdynamo in production
	type Event struct {
		OrderID string `json:"orderId"`
		Amount  int64  `json:"amount"`
	}
	type Response struct {
		RefundID string `json:"refundId"`
	}
	refunds := 0
	handler, err := oncelyfunc.Wrap(exec, "refund_order", oncelyfunc.Options[Response]{
		Identity:  []oncelyfunc.Key{{Expr: "orderId", Norm: client.String}},
		Validated: []oncelyfunc.Key{{Expr: "amount", Norm: client.Integer}},
		Scope:     client.ScopeGlobal,
		Ref:       func(r Response) string { return r.RefundID },
	}, func(ctx context.Context, ev Event) (Response, error) {
		// The refund, with the action's key passed to the provider (as
		// Stripe's Idempotency-Key, for example).
		_ = oncelyfunc.DownstreamKey(ctx)
		refunds++
		return Response{RefundID: fmt.Sprintf("re_%d", refunds)}, nil
	})
	if err != nil {
		panic(err)
	}
	for range 2 {
		resp, err := handler(context.Background(), Event{OrderID: "A-1", Amount: 1000})
		fmt.Println(resp.RefundID, err)
	}
	fmt.Println("refunds:", refunds)
	// Output:
	// re_1 <nil>
	// re_1 <nil>
	// refunds: 1
}

// WrapResult tells a first run from a repeat answered from the ledger, as
// Powertools' response hook does.
func ExampleWrapResult() {
	exec := client.New(ledgermem.New(nil), nil)
	type Event struct {
		OrderID string `json:"orderId"`
	}
	handler, err := oncelyfunc.WrapResult(exec, "ship_order", oncelyfunc.Options[string]{
		Identity: []oncelyfunc.Key{{Expr: "orderId", Norm: client.String}},
		Scope:    client.ScopeGlobal,
	}, func(ctx context.Context, ev Event) (string, error) {
		return "shipped " + ev.OrderID, nil
	})
	if err != nil {
		panic(err)
	}
	for range 2 {
		out, res, err := handler(context.Background(), Event{OrderID: "A-1"})
		fmt.Println(out, res.Outcome == client.AlreadyDone, err)
	}
	// Output:
	// shipped A-1 false <nil>
	// shipped A-1 true <nil>
}

// An SQS consumer that handles each order once, however often it is
// delivered, and asks Lambda to redeliver only what failed.
func ExampleSQS() {
	exec := client.New(ledgermem.New(nil), nil)
	handler, err := oncelyfunc.SQS(exec, "ship_order", oncelyfunc.SQSOptions{
		Identity: []oncelyfunc.Key{{Expr: "json_parse(body).orderId", Norm: client.String}},
	}, func(ctx context.Context, m events.SQSMessage) error {
		fmt.Println("shipping", m.Body)
		return nil
	})
	if err != nil {
		panic(err)
	}
	resp, _ := handler(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "1", Body: `{"orderId": "A-1"}`},
		{MessageId: "2", Body: `{"orderId": "A-1"}`},
		{MessageId: "3", Body: `{"orderId": "A-2"}`},
	}})
	fmt.Println("failures:", len(resp.BatchItemFailures))
	// Output:
	// shipping {"orderId": "A-1"}
	// shipping {"orderId": "A-2"}
	// failures: 0
}
