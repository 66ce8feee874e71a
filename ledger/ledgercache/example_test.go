package ledgercache_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgercache"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// A cache in front of the ledger answers repeats of actions this process
// has seen done without a ledger request. In a Lambda function, create it
// once per execution environment (outside the handler) in front of the
// DynamoDB store.
func Example() {
	ctx := context.Background()
	store := ledgercache.New(ledgermem.New(nil), &ledgercache.Config{Size: 1024})
	exec := client.New(store, nil)
	err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.Integer}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "reply sent on ticket 42", Ref: "msg_1"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Printf("%+v\n", store.Stats())
	// Output:
	// Done: reply sent on ticket 42
	// Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// {Hits:2 Misses:1}
}
