package ledgerredis_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
)

// A claim, its completion, and a repeat answered from Redis, as another
// process sharing the server would see it.
func Example() {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv("ONCELY_REDIS_URL")) // redis://127.0.0.1:6379/0
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	store := ledgerredis.New(rdb, &ledgerredis.Config{Prefix: fmt.Sprintf("example-%d", time.Now().UnixNano())})

	now := time.Now()
	claim := ledger.ClaimParams{
		Key:         "refund_order/order-7",
		Tool:        "refund_order",
		RunID:       "run-1",
		Owner:       "owner-1",
		LeaseUntil:  now.Add(time.Minute),
		Fingerprint: "fp",
		ExpiresAt:   now.Add(2 * time.Minute),
	}
	res, err := store.Claim(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed:", res.Claimed, "attempt:", res.Attempt)

	// ... refund the order, then record what happened.
	if err := store.Complete(ctx, claim.Key, claim.Owner, ledger.Completion{Summary: "refunded 10.00 EUR", Ref: "re_1"}); err != nil {
		panic(err)
	}

	// The same action again, from a retry with a new owner token.
	claim.Owner = "owner-2"
	res, err = store.Claim(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed:", res.Claimed, "previous:", res.Previous.State, res.Previous.Summary, res.Previous.Ref)
	// Output:
	// claimed: true attempt: 1
	// claimed: false previous: done refunded 10.00 EUR re_1
}

// A ledger chosen by URL: the prefix of its keys and the replicas every
// write waits for are URL parameters. List finds the stuck claims a
// sweeper reconciles.
func ExampleOpenURL() {
	ctx := context.Background()
	url := fmt.Sprintf("%s?prefix=example-%d&wait=0", os.Getenv("ONCELY_REDIS_URL"), time.Now().UnixNano())
	// Abandoned claims are kept a minute past their retention (default: a week).
	store, err := ledgerredis.OpenURL(ctx, url, &ledgerredis.Config{PendingGrace: time.Minute})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	now := time.Now()
	for _, key := range []string{"send_reply/ticket-1", "send_reply/ticket-2"} {
		if _, err := store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "crashed-worker",
			LeaseUntil: now.Add(time.Second), Fingerprint: "fp", ExpiresAt: now.Add(time.Minute)}); err != nil {
			panic(err)
		}
	}
	stuck, err := store.List(ctx, ledger.Filter{State: ledger.StatePending, LeaseBefore: now.Add(time.Hour)})
	if err != nil {
		panic(err)
	}
	fmt.Println("pending claims whose lease ends within the hour:", len(stuck))
	// Output:
	// pending claims whose lease ends within the hour: 2
}
