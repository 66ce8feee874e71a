package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/hubspotfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/hubspot"
)

// HubSpot: an upsert of a contact by the unique property oncely_key, a
// consistent lookup by it.
func init() {
	const token = "pat-integration"
	extraProviders["hubspot"] = extraProvider{
		start: func(opt kitOptions) (http.Handler, server) {
			f := hubspotfake.NewHandler(&hubspotfake.Config{Seed: opt.seed, Clock: opt.clock, Token: token})
			return f, server{faults: f.Faults, journal: f.Journal}
		},
		build: func(k *kit, _ kitOptions, url string, cfg providers.Config) {
			k.extra["hubspot"] = hubspot.New(&hubspot.Config{BaseURL: url, AccessToken: token, ObjectType: hubspot.Contacts, HTTP: cfg})
		},
	}
	providerNames = append(providerNames, "hubspot")
	scenarios = append(scenarios, scenario{
		name: "hubspot_upsert", provider: "hubspot", kind: hubspotfake.KindUpsert, route: "POST /crm/v3/objects/{type}/batch/upsert",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			contacts := k.extra["hubspot"].(*hubspot.Client)
			return client.Tool{
				Name:      "record_lead",
				Identity:  []client.Field{{Path: "email", Norm: client.Email}},
				Validated: []client.Field{{Path: "name", Norm: client.String}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						Email string `json:"email"`
						Name  string `json:"name"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's note is not written: a repeat of the upsert
					// must converge on the same record.
					rec, err := contacts.Upsert(ctx, inv.DownstreamKey, map[string]string{
						"email": strings.ToLower(in.Email), "firstname": in.Name, "lifecyclestage": "lead",
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: contacts.Summary(rec), Ref: rec.ID}, nil
				},
				Reconciler: policy(contacts),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"email": "Hub%d@Example.com", "name": "Lead %d", "note": %q}`, n, n, text)
		},
	})
}
