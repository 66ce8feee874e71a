// Command quickstart is the README's Quick start: a tool that sends a
// reply, called twice by the model with rephrased text and a drifted id
// type, on the memory ledger. The reply is sent once. The README quotes
// this file whole; main_test.go runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"syscall"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

func main() {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil) // or SQLite, PostgreSQL, Redis, DynamoDB

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
		log.Fatal(err)
	}

	// The model calls the tool twice: the text rephrased, the id's type drifted.
	for _, input := range []string{
		`{"ticketId": 42, "text": "Your refund is on its way."}`,
		`{"ticketId": "42", "text": "We have issued your refund!"}`,
	} {
		// The run id names one conversation (see docs/concepts.md, Scope).
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(input), ID: "toolu_01"})
		if err != nil {
			log.Fatal(err) // the ledger failed, or the program passed a bad run id
		}
		fmt.Println(res.Text)
	}
	fmt.Println("replies sent:", sent)
	// It prints:
	// Done: reply sent on ticket 42
	// Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// replies sent: 1
}
