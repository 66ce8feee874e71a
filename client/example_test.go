package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"syscall"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// A tool is declared with the fields that identify its action, and tells
// the executor what each of its errors means for the effect. The model
// calls it twice, rephrasing the free text and drifting the id's type: the
// reply is sent once.
func Example() {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)

	// sendReply stands for the provider's client: the message id, or the
	// HTTP status (0: no answer) and the error of a failed request.
	sent := 0
	sendReply := func(ctx context.Context, downstreamKey string) (string, int, error) {
		sent++
		return "msg_1", 200, nil
	}

	err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			// The provider gets inv.DownstreamKey as its idempotency key or
			// reference, so that it can recognise a repeat.
			ref, status, err := sendReply(ctx, inv.DownstreamKey)
			switch {
			case err == nil:
				return client.Effect{Summary: "reply sent on ticket 42", Ref: ref}, nil
			case status == http.StatusBadRequest || status == http.StatusUnprocessableEntity:
				return client.Effect{}, client.Permanent(err) // refused: nothing sent, a retry fails too
			case status == http.StatusTooManyRequests || errors.Is(err, syscall.ECONNREFUSED):
				return client.Effect{}, client.Definite(err) // not sent: a retry may succeed
			default:
				// A timeout or a 5xx: it may have been sent. The action stays
				// uncertain until a Reconciler (package reconcile) or an
				// operator (ledger.Resolve) settles it.
				return client.Effect{}, client.Ambiguous(err)
			}
		},
	})
	if err != nil {
		panic(err)
	}

	for _, input := range []string{
		`{"ticketId": 42, "text": "Your refund is on its way."}`,
		`{"ticketId": "42", "text": "We have issued your refund!"}`,
	} {
		// The run id names one conversation (see Scope).
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(input), ID: "toolu_01"})
		if err != nil {
			panic(err) // the ledger failed, or the program passed a bad run id
		}
		fmt.Println(res.Text)
	}
	fmt.Println("replies sent:", sent)
	// Output:
	// Done: reply sent on ticket 42
	// Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// replies sent: 1
}

// The scope decides which calls are the same action. A refund of one
// payment is the same refund whichever conversation asks for it, so the
// tool is scoped to the tenant (the merchant account the host program
// serves), not to the run: a second conversation about the same payment
// does not refund it again.
func ExampleScope() {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	refunds := 0
	err := exec.Register(client.Tool{
		Name: "refund_payment",
		Identity: []client.Field{
			{Path: "paymentId", Norm: client.String},
			{Path: "amountCents", Norm: client.Integer},
		},
		Scope: client.ScopeTenant,
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			refunds++
			return client.Effect{Summary: "refunded 1000 cents of pay_7", Ref: "re_1"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	input := json.RawMessage(`{"paymentId": "pay_7", "amountCents": 1000, "reason": "damaged"}`)
	// Two conversations (runs) of one tenant.
	for _, run := range []string{"conversation-1", "conversation-2"} {
		res, err := exec.Execute(ctx, run, client.Call{Tool: "refund_payment", Input: input, Tenant: "acme"})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("refunds:", refunds)
	// Output:
	// Done: refunded 1000 cents of pay_7
	// Already done earlier: refunded 1000 cents of pay_7. Do not repeat it.
	// refunds: 1
}

// Normalizers keep the model's type drift from making a second action:
// 10 and "10.00" are the same amount, while 10.01 is another one.
func ExampleDecimal() {
	refund := client.Tool{Name: "refund_order", Identity: []client.Field{
		{Path: "orderId", Norm: client.Integer},
		{Path: "amount", Norm: client.Decimal},
	}}
	key := func(input string) string {
		k, err := refund.Key("run-1", client.Call{Input: json.RawMessage(input)}, 0)
		if err != nil {
			return err.Error()
		}
		return k[:12]
	}
	fmt.Println(key(`{"orderId": 7, "amount": 10}`) == key(`{"orderId": "7", "amount": "10.00"}`))
	fmt.Println(key(`{"orderId": 7, "amount": 10}`) == key(`{"orderId": 7, "amount": 10.01}`))
	fmt.Println(key(`{"amount": 10}`))
	// Output:
	// true
	// false
	// client: refund_order: field "orderId": missing or null
}

// A tool marks its errors so the executor knows whether the effect may
// exist. A definite failure can be retried; the retry gets a new
// downstream key, because providers replay the failure of a key.
func ExampleDefinite() {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	_ = exec.Register(client.Tool{
		Name:     "charge",
		Identity: []client.Field{{Path: "orderId", Norm: client.Integer}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			if inv.Attempt == 1 {
				return client.Effect{}, client.Definite(errors.New("rate limited before the request was accepted"))
			}
			return client.Effect{Summary: "charged order 7"}, nil
		},
	})
	for range 3 {
		res, _ := exec.Execute(ctx, "run-1", client.Call{Tool: "charge", Input: json.RawMessage(`{"orderId": 7}`)})
		fmt.Printf("attempt %d: %s\n", res.Attempt, res.Text)
	}
	// Output:
	// attempt 1: Failed, nothing was done: rate limited before the request was accepted. You may retry.
	// attempt 2: Done: charged order 7
	// attempt 2: Already done earlier in this run: charged order 7. Do not repeat it.
}

// A tool reads its input with Bind: the values its key was made of, with
// the identity normalized, and field names matched exactly.
func ExampleInvocation_Bind() {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	err := exec.Register(client.Tool{
		Name: "refund_order",
		Identity: []client.Field{
			{Path: "paymentIntent", Norm: client.Trimmed},
			{Path: "amount", Norm: client.Integer},
		},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				PaymentIntent string `json:"paymentIntent"`
				Amount        int64  `json:"amount"`
				Reason        string `json:"reason"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err // permanent: nothing was done
			}
			return client.Effect{Summary: fmt.Sprintf("refunded %d cents of %s", in.Amount, in.PaymentIntent)}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	for _, input := range []string{
		`{"paymentIntent": "pi_1 ", "amount": "1000", "reason": "asked"}`,
		`{"paymentIntent": "pi_2", "amount": 1000.0}`,
		`{"paymentIntent": "pi_3", "amount": 1, "AMOUNT": 1000}`,
	} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	// Output:
	// Done: refunded 1000 cents of pi_1
	// Done: refunded 1000 cents of pi_2
	// refund_order: keys "amount" and "AMOUNT" in one JSON object differ only in case or Unicode normalization. Nothing was done.
}

// In an emergency (the ledger is down and the agent must go on), Disabled
// runs tools directly. Nothing is deduplicated any more, and the logs say
// so at every call.
func ExampleNew_disabled() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "key" {
				return slog.Attr{} // keep the output stable
			}
			return a
		},
	}))
	exec := client.New(ledgermem.New(nil), &client.Config{Disabled: true, Logger: logger})
	_ = exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "reply sent"}, nil
		},
	})
	res, _ := exec.Execute(context.Background(), "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)})
	fmt.Println(res.Text)
	// Output:
	// level=WARN msg="oncely: DISABLED: tools run directly, without the ledger; repeated calls are NOT deduplicated" env=ONCELY_DISABLED
	// level=WARN msg="oncely call (DISABLED: not deduplicated)" tool=send_reply run=run-1 attempt=1 outcome=executed
	// Done: reply sent
}
