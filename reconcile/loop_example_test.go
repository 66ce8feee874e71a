package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/reconcile"
)

// A sidecar process runs the sweeper in a loop next to the executors. A
// record left uncertain (the answer to the send was lost) is settled on
// the first sweep: the provider has the message.
func ExampleSweeper_Run() {
	mail := &mailbox{sent: map[string]string{}}
	store := ledgermem.New(nil)
	ctx := context.Background()
	now := time.Now()
	// What a call left behind: claimed, sent, then the answer was lost.
	if _, err := store.Claim(ctx, ledger.ClaimParams{Key: "key-1", Tool: "send_reply", RunID: "run-1", Owner: "worker-7",
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		panic(err)
	}
	mail.send("key-1")
	if err := store.Fail(ctx, "key-1", "worker-7", ledger.Failure{Reason: "timeout after the request was sent"}); err != nil {
		panic(err)
	}

	sweeper := reconcile.NewSweeper(store, []client.Tool{{Name: "send_reply", Reconciler: reconcile.New(mail, nil)}}, nil)
	ctx, stop := context.WithCancel(ctx) // in a real process: signal.NotifyContext
	err := sweeper.Run(ctx, time.Minute, func(rep reconcile.Report, err error) {
		fmt.Printf("examined %d, done %d, error %v\n", rep.Examined, rep.Done, err)
		stop()
	})
	fmt.Println("stopped:", errors.Is(err, context.Canceled))
	rec, _ := store.Get(context.Background(), "key-1")
	fmt.Println(rec.State, rec.Ref)
	// Output:
	// examined 1, done 1, error <nil>
	// stopped: true
	// done msg_1
}
