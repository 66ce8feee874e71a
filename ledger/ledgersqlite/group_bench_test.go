package ledgersqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// Fresh actions (a claim and a completion) written at once by many
// goroutines of one process through one Store with SyncFull, beside
// the raw single-caller floors measured in the same run: the two statements
// on one connection with synchronous=FULL and with NORMAL. ns/op is the
// time per action in every sub-benchmark, so their ratios compare directly.
func BenchmarkConcurrentFresh(b *testing.B) {
	ctx := context.Background()
	var seq atomic.Int64 // fresh keys across sub-benchmarks and -count runs
	result := []byte(`{"id":"msg_1"}`)
	for _, synchronous := range []string{"FULL", "NORMAL"} {
		b.Run("raw-"+synchronous+"-1", func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "raw.db")
			open(b, path, nil).Close()
			raw := openRaw(b, path, synchronous)
			for b.Loop() {
				key, now := actionKey(int(seq.Add(1))), time.Now()
				if _, err := raw.insert.ExecContext(ctx, key, "send_reply", "run-1", "owner", now.Add(time.Minute).UnixMilli(), now.Add(time.Hour).UnixMilli(), "fp", now.UnixMilli()); err != nil {
					b.Fatal(err)
				}
				if _, err := raw.update.ExecContext(ctx, key, "owner", "sent", "msg_1", result, false, time.Now().UnixMilli()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: result}
	action := func(b *testing.B, s ledger.Store) {
		now := time.Now()
		p := ledger.ClaimParams{Key: actionKey(int(seq.Add(1))), Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatalf("Claim = %+v, %v", res, err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
			b.Fatal(err)
		}
	}
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("store-FULL-%d", callers), func(b *testing.B) {
			s := open(b, filepath.Join(b.TempDir(), "store.db"), nil)
			defer s.Close()
			defer func() {
				st := s.Stats()
				b.ReportMetric(float64(st.Writes)/float64(max(st.Commits, 1)), "writes/commit")
				b.ReportMetric(float64(st.Writes)/float64(max(st.Syncs, 1)), "writes/sync")
			}()
			if callers == 1 {
				for b.Loop() {
					action(b, s)
				}
				return
			}
			b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					action(b, s)
				}
			})
		})
	}
}
