package resend_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/resend"
	"github.com/oncely/oncely/reconcile"
)

// A tool that emails an order confirmation through Resend. The model asks
// twice, rephrased: one email. A second process whose ledger lost the
// record sends again with the same key: Resend answers with the first
// email instead of sending another.
func Example() {
	srv := resendfake.NewServer(&resendfake.Config{Seed: 1}) // or "https://api.resend.com"
	defer srv.Close()
	mailer := resend.New(srv.URL, &resend.Config{APIKey: "re_123"})

	confirm := client.Tool{
		Name:     "email_order_confirmation",
		Identity: []client.Field{{Path: "orderId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				OrderID string `json:"orderId"`
				Note    string `json:"note"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			sent, err := mailer.Send(ctx, inv.DownstreamKey, resend.Email{
				From: "Acme <orders@acme.test>", To: []string{"ada@example.com"},
				Subject: "Order " + in.OrderID + " confirmed", Text: "Thank you for your order.",
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: "confirmation of order " + in.OrderID + " emailed", Ref: sent.ID}, nil
		},
		Reconciler: reconcile.New(mailer, nil),
	}
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(confirm); err != nil {
		panic(err)
	}
	for _, input := range []string{`{"orderId": 42, "note": "thanks!"}`, `{"orderId": "42"}`} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "email_order_confirmation", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	other := client.New(ledgermem.New(nil), nil)
	if err := other.Register(confirm); err != nil {
		panic(err)
	}
	res, err := other.Execute(ctx, "run-1", client.Call{Tool: "email_order_confirmation", Input: json.RawMessage(`{"orderId": 42}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("emails sent:", len(srv.Journal()))
	// Output:
	// Done: confirmation of order 42 emailed
	// Already done earlier in this run: confirmation of order 42 emailed. Do not repeat it.
	// Done: confirmation of order 42 emailed
	// emails sent: 1
}
