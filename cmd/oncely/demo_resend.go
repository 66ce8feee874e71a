package main

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/resend"
)

// demoResendKey is the API key the demo sends to the fake Resend.
const demoResendKey = "re_oncely_demo"

// The email row: an order confirmation through Resend, keyed by
// Idempotency-Key. A plain client sends without a key, so its retries and
// the model's repeats send again.
func init() {
	scenarios = append(scenarios, &scenario{
		label: "resend emails", fake: "resend", kinds: []string{resendfake.KindEmail}, route: "POST /emails",
		tool:     "email_confirmation",
		identity: []client.Field{{Path: "orderId", Norm: client.String}, {Path: "to", Norm: client.Email}},
		input: func(n int, _ string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"orderId": "%d", "to": " Buyer%d@Example.com", "note": %q}`, n, n, text)
			}
			return jsonf(`{"orderId": %d, "to": "buyer%d@example.com", "note": %q}`, n, n, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			// The model's note is not sent: Resend refuses a repeat of a key
			// with another payload.
			sent, err := k.resend.Send(ctx, key, resend.Email{
				From: "Acme <orders@acme.test>", To: []string{strings.ToLower(strings.TrimSpace(a.str("to")))},
				Subject: "Order " + a.str("orderId") + " confirmed", Text: "Thank you for your order.",
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: sent.Summary(), Ref: sent.ID}, nil
		},
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			return n.json(ctx, "/emails", "", map[string]any{
				"from": "Acme <orders@acme.test>", "to": strings.ToLower(strings.TrimSpace(a.str("to"))),
				"subject": "Order " + a.str("orderId") + " confirmed", "text": "Thank you for your order.",
				"tags": []map[string]string{{"name": metaAction, "value": tagSafe(action)}},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.resend },
	})
}

// tagSafe is the action id ("demo-1-3/4") as a Resend tag value, which
// holds only letters, digits, _ and -: the / becomes _. actionFromTag
// reverses it.
func tagSafe(action string) string { return strings.Replace(action, "/", "_", 1) }

// actionFromTag returns the action id a naive email's tag carries ("" for
// none).
func actionFromTag(v string) string { return strings.Replace(v, "_", "/", 1) }
