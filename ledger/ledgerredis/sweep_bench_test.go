package ledgerredis_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// One sweep's listing with 10^3 stuck records among 10^3 and among 10^6
// records (the rest done), paired; see ledgerbench.SweepListing.
func BenchmarkSweepListing(b *testing.B) {
	ctx := context.Background()
	sizes := [2]int{ledgerbench.Stuck, 1_000_000}
	at := time.Now().Add(-time.Hour)
	url := redistest.URL(b)
	var stores [2]ledger.Store
	for i, n := range sizes {
		s := ledgerredis.New(redistest.NewClient(b, url), &ledgerredis.Config{Prefix: redistest.Prefix(b, url)})
		keys := make([]string, n-ledgerbench.Stuck)
		for j := range keys {
			keys[j] = fmt.Sprintf("done-%07d", j)
		}
		if err := ledgerredis.FillDone(ctx, s, keys, at.Add(-time.Hour)); err != nil {
			b.Fatal(err)
		}
		ledgerbench.AddStuck(b, s, at)
		stores[i] = s
	}
	ledgerbench.SweepListing(b, sizes, stores)
}
