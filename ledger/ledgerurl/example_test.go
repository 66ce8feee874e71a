package ledgerurl_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgerurl"
)

// A program lets its operator choose the ledger with one URL, here from
// the environment, with the embedded SQLite file as the fallback.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "ledgerurl-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	url := os.Getenv("EXAMPLE_LEDGER") // e.g. dynamodb://oncely-ledger?region=eu-west-1
	if url == "" {
		url = "sqlite://" + filepath.Join(dir, "oncely.db")
	}
	ctx := context.Background()
	l, err := ledgerurl.Open(ctx, url, &ledgerurl.Config{Create: true})
	if err != nil {
		panic(err)
	}
	defer l.Close()
	if _, err := l.Init(ctx); err != nil { // creates a DynamoDB table; a no-op for SQLite
		panic(err)
	}
	exec := client.New(l, nil)
	err = exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "reply sent on ticket 42", Ref: "msg_1"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	for _, input := range []string{`{"ticketId": 42}`, `{"ticketId": "42"}`} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	// Output:
	// Done: reply sent on ticket 42
	// Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
}
