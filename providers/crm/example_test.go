package crm_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/crmfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/crm"
	"github.com/oncely/oncely/reconcile"
)

// A tool that records a lead in the CRM: the downstream key is the
// contact's external id, so even a repeat the ledger does not see (a
// second process) converges on the same contact.
func Example() {
	srv := crmfake.NewServer(&crmfake.Config{Seed: 1})
	defer srv.Close()
	contacts := crm.New(srv.URL, nil)

	addLead := client.Tool{
		Name:     "add_lead",
		Identity: []client.Field{{Path: "email", Norm: client.Email}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				Email string `json:"email"` // normalized: "ada@example.com"
				Name  string `json:"name"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			ct, err := contacts.Upsert(ctx, inv.DownstreamKey, crm.ContactInput{Email: in.Email, Name: in.Name})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: fmt.Sprintf("lead %s recorded (new: %v)", ct.Email, ct.Created), Ref: ct.ID}, nil
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
