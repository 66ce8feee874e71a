package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/providers/stripe"
)

// The model asks for the same refund in two turns; Lambda delivers the
// second turn twice. One refund is made, and every answer says what
// happened.
func ExampleHandler_Handle() {
	ctx := context.Background()
	// The deployment: a ledger table, and Stripe (here a fake with a paid
	// PaymentIntent pi_2DqmYZJqvqgRxgNdfVf1qtXj).
	api, table := dynalitetest.ForExamples()
	if err := ledgerdynamo.CreateTable(ctx, api, table, nil); err != nil {
		log.Fatal(err)
	}
	srv := stripefake.NewServer(&stripefake.Config{Seed: 1})
	defer srv.Close()
	pi, err := stripe.New(srv.URL, &stripe.Config{APIKey: apiKey}).PaymentIntents.Create(ctx, "setup",
		stripe.PaymentIntentParams{Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true})
	if err != nil {
		log.Fatal(err)
	}

	// The cold start, from the function's environment.
	env, err := EnvFrom(environ{
		"ONCELY_TABLE":      table,
		"DYNAMODB_ENDPOINT": aws.ToString(api.Options().BaseEndpoint),
		"STRIPE_BASE_URL":   srv.URL,
		"STRIPE_API_KEY":    apiKey,
	}.get)
	if err != nil {
		log.Fatal(err)
	}
	h, err := New(ctx, env, &Options{AWS: testAWS(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		log.Fatal(err)
	}

	for i, event := range []string{
		`{"run_id": "run-7", "tool_calls": [{"type": "tool_use", "id": "toolu_01", "name": "refund_payment",
		  "input": {"payment_intent": "` + pi.ID + `", "amount": 1000, "reason": "requested_by_customer"}}]}`,
		`{"run_id": "run-7", "tool_calls": [{"type": "tool_use", "id": "toolu_02", "name": "refund_payment",
		  "input": {"payment_intent": "` + pi.ID + `", "amount": "1000", "reason": "Requested by customer", "note": "the customer asked twice"}}]}`,
		`{"run_id": "run-7", "tool_calls": [{"type": "tool_use", "id": "toolu_02", "name": "refund_payment",
		  "input": {"payment_intent": "` + pi.ID + `", "amount": "1000", "reason": "Requested by customer", "note": "the customer asked twice"}}]}`,
	} {
		var ev Event
		if err := json.Unmarshal([]byte(event), &ev); err != nil {
			log.Fatal(err)
		}
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second) // the function's timeout
		res, err := h.Handle(ictx, ev)
		cancel()
		if err != nil {
			log.Fatal(err)
		}
		out, _ := json.Marshal(res)
		fmt.Printf("invocation %d: %s\n", i+1, out)
	}
	// Output:
	// invocation 1: {"tool_results":[{"tool_use_id":"toolu_01","is_error":false,"content":[{"text":"Done: refund re_M8smCIePdmwEfxZoDdnA13iA of EUR 10.00 for pi_2DqmYZJqvqgRxgNdfVf1qtXj (succeeded)","type":"text"}],"type":"tool_result"}]}
	// invocation 2: {"tool_results":[{"tool_use_id":"toolu_02","is_error":false,"content":[{"text":"Already done earlier in this run: refund re_M8smCIePdmwEfxZoDdnA13iA of EUR 10.00 for pi_2DqmYZJqvqgRxgNdfVf1qtXj (succeeded). Do not repeat it.","type":"text"}],"type":"tool_result"}]}
	// invocation 3: {"tool_results":[{"tool_use_id":"toolu_02","is_error":false,"content":[{"text":"Already done earlier in this run: refund re_M8smCIePdmwEfxZoDdnA13iA of EUR 10.00 for pi_2DqmYZJqvqgRxgNdfVf1qtXj (succeeded). Do not repeat it.","type":"text"}],"type":"tool_result"}]}
}
