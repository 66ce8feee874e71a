package ledgersqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// A claim, its completion, and a repeat answered from the file, as another
// process sharing it would see it.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ledger")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	store, err := ledgersqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	now := time.Now()
	claim := ledger.ClaimParams{
		Key:         "refund_order/order-7",
		Tool:        "refund_order",
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

// Claims from many goroutines share commits: those that arrive while a
// commit is running are written together, with one disk sync, and each
// caller still gets its own answer.
func ExampleStore_Stats() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ledger")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := ledgersqlite.Open(ctx, filepath.Join(dir, "ledger.db"), nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()

	var wg sync.WaitGroup
	claimed := make([]bool, 16)
	for i := range claimed {
		wg.Go(func() {
			now := time.Now()
			res, err := store.Claim(ctx, ledger.ClaimParams{
				Key: fmt.Sprintf("send_reply/ticket-%d", i), Tool: "send_reply", RunID: "run-1",
				Owner: fmt.Sprintf("owner-%d", i), LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour),
			})
			if err != nil {
				panic(err)
			}
			claimed[i] = res.Claimed
		})
	}
	wg.Wait()
	st := store.Stats()
	fmt.Println("all claimed:", !slices.Contains(claimed, false))
	fmt.Println("writes:", st.Writes, "in no more commits:", st.Commits <= st.Writes)
	// Output:
	// all claimed: true
	// writes: 16 in no more commits: true
}
