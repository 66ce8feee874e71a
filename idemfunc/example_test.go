package idemfunc_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/idemfunc"
	"github.com/idemkit/idemkit/ledger/ledgermem"
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
	handler, err := idemfunc.Wrap(exec, "refund_order", idemfunc.Options[Response]{
		Identity:  []idemfunc.Key{{Expr: "orderId", Norm: client.String}},
		Validated: []idemfunc.Key{{Expr: "amount", Norm: client.Integer}},
		Scope:     client.ScopeGlobal,
		Ref:       func(r Response) string { return r.RefundID },
	}, func(ctx context.Context, ev Event) (Response, error) {
		refunds++ // the refund, with the action's key passed to the provider
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

// An SQS consumer that handles each order once, however often it is
// delivered, and asks Lambda to redeliver only what failed.
func ExampleSQS() {
	exec := client.New(ledgermem.New(nil), nil)
	handler, err := idemfunc.SQS(exec, "ship_order", idemfunc.SQSOptions{
		Identity: []idemfunc.Key{{Expr: "json_parse(body).orderId", Norm: client.String}},
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
