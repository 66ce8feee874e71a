package ledgersqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

// Fresh actions (a claim and a completion) written at once by many
// goroutines of one process through one Store with SyncFull, beside
// the raw single-caller floors measured in the same run: the two statements
// on one connection with synchronous=FULL and with NORMAL. ns/op is the
// time per action in every sub-benchmark, so their ratios compare directly.
func BenchmarkConcurrentFresh(b *testing.B) {
	ctx := context.Background()
	var seq atomic.Int64 // fresh keys across sub-benchmarks and -count runs
	for _, synchronous := range []string{"FULL", "NORMAL"} {
		b.Run("raw-"+synchronous+"-1", func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "raw.db")
			open(b, path, nil).Close()
			raw := openRaw(b, path, synchronous)
			for b.Loop() {
				if err := raw.fresh(ctx, actionKey(int(seq.Add(1))), "fp"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	action := func(b *testing.B, s ledger.Store) {
		if err := storeFresh(ctx, s, actionKey(int(seq.Add(1)))); err != nil {
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

// BenchmarkConcurrentFreshPaired is BenchmarkConcurrentFresh's 16-caller
// store beside its raw NORMAL single-caller floor, paired: every iteration
// is a round of the same number of fresh actions on each, one after the
// other, so that drift of the machine (of its disk's syncs above all)
// cancels out of the ratio. raw-ns/op and store-ns/op are per action.
// Between the two the floor's unsynced writes are written back, untimed:
// otherwise the store's first syncs would write them.
func BenchmarkConcurrentFreshPaired(b *testing.B) {
	const callers, perCaller = 16, 64
	ctx := context.Background()
	dir := b.TempDir()
	rawPath := filepath.Join(dir, "raw.db")
	open(b, rawPath, nil).Close()
	raw := openRaw(b, rawPath, "NORMAL")
	s := open(b, filepath.Join(dir, "store.db"), nil)
	defer s.Close()
	var seq atomic.Int64
	var tRaw, tStore time.Duration
	for b.Loop() {
		t0 := time.Now()
		for range callers * perCaller {
			if err := raw.fresh(ctx, actionKey(int(seq.Add(1))), "fp"); err != nil {
				b.Fatal(err)
			}
		}
		// The floor leaves its writes for the kernel to write back; that is
		// done here, untimed, so that the store's syncs do not pay for it.
		for _, name := range []string{rawPath, rawPath + "-wal"} {
			if err := syncFile(name); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				for range perCaller {
					if err := storeFresh(ctx, s, actionKey(int(seq.Add(1)))); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		tRaw, tStore = tRaw+t1.Sub(t0), tStore+time.Since(t1)
	}
	n := float64(b.N * callers * perCaller)
	b.ReportMetric(float64(tRaw)/n, "raw-ns/op")
	b.ReportMetric(float64(tStore)/n, "store-ns/op")
	b.ReportMetric(float64(tStore)/float64(tRaw), "store/raw")
	st := s.Stats()
	b.ReportMetric(float64(st.Writes)/float64(max(st.Commits, 1)), "writes/commit")
	b.ReportMetric(float64(st.Writes)/float64(max(st.Syncs, 1)), "writes/sync")
}

// storeFresh makes one fresh action through s: a claim and a completion.
func storeFresh(ctx context.Context, s ledger.Store, key string) error {
	now := time.Now()
	p := ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner",
		LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
		return fmt.Errorf("Claim = %+v, %v", res, err)
	}
	return s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)})
}

// syncFile flushes the file at path to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
