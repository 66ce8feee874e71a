package hubspot_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/hubspotfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/hubspot"
	"github.com/oncely/oncely/reconcile"
)

// A tool that records a lead as a HubSpot contact: the downstream key is
// the value of the unique property oncely_key, so even a repeat the ledger
// does not see (a second process) converges on the same contact.
func Example() {
	srv := hubspotfake.NewServer(nil) // HubSpot in tests; omit BaseURL in production
	defer srv.Close()
	contacts := hubspot.New(&hubspot.Config{BaseURL: srv.URL, AccessToken: "pat-...", ObjectType: hubspot.Contacts})

	addLead := client.Tool{
		Name:     "add_lead",
		Identity: []client.Field{{Path: "email", Norm: client.Email}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				Email string `json:"email"`
				Name  string `json:"name"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			rec, err := contacts.Upsert(ctx, inv.DownstreamKey, map[string]string{"email": in.Email, "firstname": in.Name})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: fmt.Sprintf("lead %s recorded (new: %v)", in.Email, rec.New), Ref: rec.ID}, nil
		},
		Reconciler: reconcile.New(contacts, nil),
	}
	call := client.Call{Tool: "add_lead", Input: json.RawMessage(`{"email": "Ada@Example.com", "name": "Ada"}`)}
	for range 2 {
		exec := client.New(ledgermem.New(nil), nil) // a new process each time
		if err := exec.Register(addLead); err != nil {
			panic(err)
		}
		res, err := exec.Execute(context.Background(), "run-1", call)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("contacts written:", len(srv.Journal()))
	// Output:
	// Done: lead ada@example.com recorded (new: true)
	// Done: lead ada@example.com recorded (new: false)
	// contacts written: 1
}
