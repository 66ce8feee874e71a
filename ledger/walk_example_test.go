package ledger_test

import (
	"context"
	"fmt"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// Walk pages through every uncertain record, oldest first, a page of
// Limit records at a time; a listing of your own pages the same way by
// passing the cursor of a page's last record as the next Filter.After.
func ExampleWalk() {
	ctx := context.Background()
	store := ledgermem.New(nil)
	now := time.Now()
	for i := range 5 {
		key := fmt.Sprintf("k%d", i)
		_, _ = store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "send_reply", Owner: "o", Fingerprint: "fp",
			LeaseUntil: now.Add(time.Duration(i+1) * time.Minute), ExpiresAt: now.Add(time.Hour)})
		_ = store.Fail(ctx, key, "o", ledger.Failure{Reason: "timeout"})
	}
	err := ledger.Walk(ctx, store, ledger.Filter{State: ledger.StateUncertain, Limit: 2}, func(r *ledger.Record) error {
		fmt.Println(r.Key, r.State)
		return nil
	})
	fmt.Println("error:", err)
	// Output:
	// k0 uncertain
	// k1 uncertain
	// k2 uncertain
	// k3 uncertain
	// k4 uncertain
	// error: <nil>
}
