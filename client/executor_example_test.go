package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// Execute answers every call with an outcome and the text the model is
// told: here a refund done, repeated with another amount (a conflict,
// since the amount is validated), and called without its identity field.
// Execute's error is for the host program (an unreachable ledger, a bad
// run id), never for the model.
func ExampleExecutor_Execute() {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	err := exec.Register(client.Tool{
		Name:      "refund_payment",
		Identity:  []client.Field{{Path: "paymentId", Norm: client.String}},
		Validated: []client.Field{{Path: "amountCents", Norm: client.Integer}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "refunded pay_7", Ref: "re_1"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	for _, input := range []string{
		`{"paymentId": "pay_7", "amountCents": 1000}`,
		`{"paymentId": "pay_7", "amountCents": 1500}`,
		`{"amountCents": 1000}`,
	} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "refund_payment", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%v (is_error %v): %s\n", res.Outcome, res.IsError, res.Text)
	}
	// Output:
	// executed (is_error false): Done: refunded pay_7
	// conflict (is_error true): A refund_payment for paymentId pay_7 was already done with different amountCents. Not repeated.
	// invalid input (is_error true): refund_payment needs "paymentId" to run safely (missing or null). Nothing was done.
}

// A Reconciler settles an ambiguous outcome by asking the provider. The
// send times out after the provider took the message: the executor asks
// the reconciler, which finds the message by its downstream key, so the
// action is recorded done with the provider's reference, and the
// model's repeat is answered from the ledger. Without a Reconciler the
// action would stay uncertain until an operator settled it.
func ExampleReconcilerFunc() {
	ctx := context.Background()
	sent := map[string]string{} // the provider: message id by downstream key
	exec := client.New(ledgermem.New(nil), nil)
	err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			sent[inv.DownstreamKey] = fmt.Sprintf("msg_%d", len(sent)+1)
			// The answer is lost: the message may or may not exist.
			return client.Effect{}, client.Ambiguous(errors.New("timeout after the request was sent"))
		},
		Reconciler: client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
			if id, ok := sent[inv.DownstreamKey]; ok {
				return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "reply sent", Ref: id}}, nil
			}
			return client.Reconciliation{Verdict: client.VerdictAbsent}, nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for range 2 {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%v: %s (%s)\n", res.Outcome, res.Text, res.Ref)
	}
	fmt.Println("messages sent:", len(sent), "reconciled:", exec.Stats().Reconciled)
	// Output:
	// executed: Done: reply sent (msg_1)
	// already done: Already done earlier in this run: reply sent. Do not repeat it. (msg_1)
	// messages sent: 1 reconciled: 1
}
