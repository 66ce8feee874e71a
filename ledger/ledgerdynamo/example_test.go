package ledgerdynamo_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// Create the table once, then claim before acting and record the outcome;
// a repeat of the action finds it done.
func Example() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the application: dynamodb.NewFromConfig(cfg), "oncely-ledger"
	if err := ledgerdynamo.CreateTable(ctx, client, table, nil); err != nil {
		log.Fatal(err)
	}
	// Open checks the table with one DescribeTable (New makes no request).
	store, err := ledgerdynamo.Open(ctx, client, table, nil)
	if err != nil {
		log.Fatal(err)
	}

	now := time.Now()
	claim := ledger.ClaimParams{
		Key:         "3f1c...e9", // the action key
		Tool:        "send_reply",
		RunID:       "run-1",
		Owner:       "owner-1", // random per claim
		LeaseUntil:  now.Add(30 * time.Second),
		Fingerprint: "fp-ticket-42",
		ExpiresAt:   now.Add(7 * 24 * time.Hour),
	}
	res, err := store.Claim(ctx, claim)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first call: claimed", res.Claimed, "attempt", res.Attempt)

	// ... send the reply, then:
	if err := store.Complete(ctx, claim.Key, claim.Owner, ledger.Completion{Summary: "replied to ticket 42", Ref: "msg_7"}); err != nil {
		log.Fatal(err)
	}

	// The model calls the tool again.
	claim.Owner = "owner-2"
	res, err = store.Claim(ctx, claim)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("repeat: claimed", res.Claimed, "-", res.Previous.State+":", res.Previous.Summary)
	// Output:
	// first call: claimed true attempt 1
	// repeat: claimed false - done: replied to ticket 42
}

// A sweeper lists the pending claims whose lease has lapsed.
func ExampleStore_List() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the application: dynamodb.NewFromConfig(cfg), "oncely-ledger"
	if err := ledgerdynamo.CreateTable(ctx, client, table, nil); err != nil {
		log.Fatal(err)
	}
	store := ledgerdynamo.New(client, table, nil)

	now := time.Now()
	for key, lease := range map[string]time.Duration{"short-lease": time.Second, "long-lease": time.Hour} {
		_, err := store.Claim(ctx, ledger.ClaimParams{Key: key, Owner: "owner-" + key,
			LeaseUntil: now.Add(lease), ExpiresAt: now.Add(24 * time.Hour)})
		if err != nil {
			log.Fatal(err)
		}
	}

	// As the sweeper runs a minute later:
	recs, err := store.List(ctx, ledger.Filter{State: ledger.StatePending, LeaseBefore: now.Add(time.Minute)})
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println("abandoned:", r.Key)
	}
	// Output:
	// abandoned: short-lease
}
