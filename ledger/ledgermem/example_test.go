package ledgermem_test

import (
	"context"
	"fmt"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// A claim, its completion, and a repeat that is answered from the record.
func Example() {
	ctx := context.Background()
	store := ledgermem.New(nil)
	now := time.Now()
	claim := ledger.ClaimParams{
		Key:         "send_reply/ticket-42",
		Tool:        "send_reply",
		RunID:       "run-1",
		Owner:       "owner-1",
		LeaseUntil:  now.Add(time.Minute),
		Fingerprint: "fp",
		ExpiresAt:   now.Add(24 * time.Hour),
	}

	res, err := store.Claim(ctx, claim)
	if err != nil {
		panic(err)
	}
	fmt.Println("claimed:", res.Claimed, "attempt:", res.Attempt)

	// ... send the reply, then record what happened.
	if err := store.Complete(ctx, claim.Key, claim.Owner, ledger.Completion{Summary: "reply sent", Ref: "msg_1"}); err != nil {
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
	// claimed: false previous: done reply sent msg_1
}
