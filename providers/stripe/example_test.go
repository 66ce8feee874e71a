package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// A refund tool: the executor hands the tool its downstream key, which the
// adapter sends as Stripe's Idempotency-Key and metadata[oncely_key]. The
// model asks twice: one refund. A second process whose ledger lost the
// record asks again: Stripe itself replays the first refund by key.
func Example() {
	srv := stripefake.NewServer(&stripefake.Config{Seed: 1}) // or https://api.stripe.com
	defer srv.Close()
	st := stripe.New(srv.URL, &stripe.Config{APIKey: "sk_test_example"})
	ctx := context.Background()
	pi, err := st.PaymentIntents.Create(ctx, "order-7-payment", stripe.PaymentIntentParams{
		Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
	})
	if err != nil {
		panic(err)
	}

	refund := client.Tool{
		Name: "refund_order",
		Identity: []client.Field{
			{Path: "paymentIntent", Norm: client.String},
			{Path: "amount", Norm: client.Integer},
		},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			// Bind reads the values the key was made of: "1000" and 1000.0
			// arrive as 1000, and field names match exactly.
			var in struct {
				PaymentIntent string `json:"paymentIntent"`
				Amount        int64  `json:"amount"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err // permanent: nothing was done
			}
			re, err := st.Refunds.Create(ctx, inv.DownstreamKey, stripe.RefundParams{PaymentIntent: in.PaymentIntent, Amount: in.Amount})
			if err != nil {
				return client.Effect{}, err // a *providers.ProviderError knows its class
			}
			return client.Effect{Summary: fmt.Sprintf("refunded %d cents (replayed by Stripe: %v)", re.Amount, re.Replayed), Ref: re.ID}, nil
		},
		// After an ambiguous outcome, look the refund up before acting again.
		Reconciler: reconcile.New(st.Refunds, nil),
	}
	call := func(amount string) client.Call {
		return client.Call{Tool: "refund_order", Input: json.RawMessage(fmt.Sprintf(`{"paymentIntent": %q, "amount": %s}`, pi.ID, amount))}
	}

	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(refund); err != nil {
		panic(err)
	}
	for _, amount := range []string{`1000`, `"1000"`} { // the model's type drift
		res, err := exec.Execute(ctx, "run-1", call(amount))
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}

	other := client.New(ledgermem.New(nil), nil) // the record is gone
	if err := other.Register(refund); err != nil {
		panic(err)
	}
	res, err := other.Execute(ctx, "run-1", call(`1000.0`))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("refunds:", len(fakes.Filter(srv.Journal(), fakes.KindRefund, "")))
	// Output:
	// Done: refunded 1000 cents (replayed by Stripe: false)
	// Already done earlier in this run: refunded 1000 cents (replayed by Stripe: false). Do not repeat it.
	// Done: refunded 1000 cents (replayed by Stripe: true)
	// refunds: 1
}

// Lookup finds a PaymentIntent by the downstream key its create carried,
// even before Stripe's search index shows it.
func ExamplePaymentIntents_Lookup() {
	srv := stripefake.NewServer(&stripefake.Config{Seed: 1})
	defer srv.Close()
	st := stripe.New(srv.URL, &stripe.Config{APIKey: "sk_test_example"})
	ctx := context.Background()
	pi, err := st.PaymentIntents.Create(ctx, "k-42", stripe.PaymentIntentParams{Amount: 990, Currency: "usd"})
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"k-42", "k-43"} {
		res, err := st.PaymentIntents.Lookup(ctx, key)
		if err != nil {
			panic(err)
		}
		fmt.Println(key, res.Status, res.Ref == pi.ID)
	}
	// Output:
	// k-42 found true
	// k-43 not found false
}
