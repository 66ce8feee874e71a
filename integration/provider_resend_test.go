package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/resend"
)

// Resend joins the kit: its fake, its adapter, and a scenario that the
// failure cases (TestFailureCases/<ledger>/resend_email/...) and the chaos
// run include.
func init() {
	extraProviders["resend"] = extraProvider{
		start: func(opt kitOptions) (http.Handler, server) {
			f := resendfake.NewHandler(&resendfake.Config{Seed: opt.seed, Clock: opt.clock})
			return f, server{faults: f.Faults, journal: f.Journal}
		},
		build: func(k *kit, _ kitOptions, url string, cfg providers.Config) {
			k.extra["resend"] = resend.New(url, &resend.Config{APIKey: "re_test_integration", HTTP: cfg})
		},
	}
	providerNames = append(providerNames, "resend")
	scenarios = append(scenarios, scenario{
		name: "resend_email", provider: "resend", kind: resendfake.KindEmail, route: "POST /emails",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			mailer := k.extra["resend"].(*resend.Client)
			return client.Tool{
				Name:     "email_confirmation",
				Identity: []client.Field{{Path: "orderId", Norm: client.Integer}, {Path: "to", Norm: client.Email}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						OrderID int64  `json:"orderId"`
						To      string `json:"to"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's note is not sent: Resend refuses a repeat of
					// a key with another payload.
					sent, err := mailer.Send(ctx, inv.DownstreamKey, resend.Email{
						From: "Acme <orders@acme.test>", To: []string{in.To},
						Subject: fmt.Sprintf("Order %d confirmed", in.OrderID), Text: "Thank you for your order.",
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: sent.Summary(), Ref: sent.ID}, nil
				},
				Reconciler: policy(mailer),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"orderId": %d, "to": "Buyer%d@Example.com", "note": %q}`, n, n, text)
		},
	})
}
