package ledgersqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// A SQLite ledger keeps expired records until they are purged (oncely
// ledger purge, oncely reconcile --purge, or Purge on a schedule). An
// expired record already reads as absent; purging reclaims the space.
func ExampleStore_Purge() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ledger")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	clk := clock.NewFake(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	store, err := ledgersqlite.Open(ctx, filepath.Join(dir, "ledger.db"), &ledgersqlite.Config{Clock: clk})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	exec := client.New(store, &client.Config{Clock: clk, Retention: 24 * time.Hour, NoCounters: true})
	err = exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "reply sent"}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	for _, ticket := range []string{"1", "2", "3"} {
		if _, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": ` + ticket + `}`)}); err != nil {
			panic(err)
		}
	}

	n, err := store.Purge(ctx, clk.Now())
	if err != nil {
		panic(err)
	}
	fmt.Println("purged at once:", n)
	clk.Advance(25 * time.Hour)
	n, err = store.Purge(ctx, clk.Now())
	if err != nil {
		panic(err)
	}
	fmt.Println("purged after the retention:", n)
	// Output:
	// purged at once: 0
	// purged after the retention: 3
}
