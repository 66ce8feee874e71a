package mail_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
)

// A reply tool on an email API without idempotency. The model sends the
// reply twice, rephrased: one email. A second process whose ledger lost
// the record sends it again: the search by reference finds the first one.
func Example() {
	srv := mailfake.NewServer(&mailfake.Config{Seed: 1})
	defer srv.Close()
	mailer := mail.New(srv.URL, &mail.Config{IndexLag: 0})

	reply := client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				TicketID string `json:"ticketId"` // 42 or "42" from the model: "42"
				Text     string `json:"text"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			m, err := mailer.Send(ctx, inv.DownstreamKey, mail.Message{
				From: "support@example.com", To: "ada@example.com",
				Subject: fmt.Sprint("About ticket ", in.TicketID), Text: in.Text,
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: fmt.Sprintf("reply on ticket %s (found already sent: %v)", in.TicketID, m.Existing), Ref: m.ID}, nil
		},
		Reconciler: reconcile.New(mailer, nil),
	}
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(reply); err != nil {
		panic(err)
	}
	for _, input := range []string{
		`{"ticketId": 42, "text": "Your refund is on its way."}`,
		`{"ticketId": "42", "text": "We have issued your refund!"}`,
	} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}

	other := client.New(ledgermem.New(nil), nil)
	if err := other.Register(reply); err != nil {
		panic(err)
	}
	res, err := other.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42, "text": "Refund issued."}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("emails sent:", len(srv.Journal()))
	// Output:
	// Done: reply on ticket 42 (found already sent: false)
	// Already done earlier in this run: reply on ticket 42 (found already sent: false). Do not repeat it.
	// Done: reply on ticket 42 (found already sent: true)
	// emails sent: 1
}
