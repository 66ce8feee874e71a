package ledgerbench_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// The bodies run on the memory ledger, do not fail (a tool run twice, a
// wrong outcome) and report their metrics. Each runs 20 iterations: with
// the default benchtime, the untimed part of PurgeBlocking (its fill)
// would run for as many iterations as fit its short timed part in 1 s.
func TestBodies(t *testing.T) {
	if err := flag.Set("test.benchtime", "20x"); err != nil {
		t.Fatal(err)
	}
	t.Parallel()
	for _, bc := range []struct {
		name    string
		run     func(b *testing.B)
		metrics []string
	}{
		{"ParallelFresh", func(b *testing.B) { ledgerbench.ParallelFresh(b, ledgermem.New(nil), 16) }, []string{"p50-ns", "p99-ns"}},
		{"Contention", func(b *testing.B) {
			s := ledgermem.New(nil)
			ledgerbench.Contention(b, func() ledger.Store { return s }, 8, time.Millisecond)
		},
			[]string{"p50-ns", "p99-ns", "p99/tool", "in-progress/op"}},
		{"PurgeBlocking", func(b *testing.B) {
			clock := clock.NewFake(time.Now())
			s := ledgermem.New(&ledgermem.Config{Clock: clock})
			ledgerbench.PurgeBlocking(b, s, func(round int) int {
				// Records settled two days ago, kept for an hour.
				clock.Set(time.Now().Add(-48 * time.Hour))
				for i := range 100 {
					p := ledger.ClaimParams{Key: fmt.Sprintf("expired-%d-%d", round, i), Tool: "t", RunID: "r", Owner: "o",
						LeaseUntil: clock.Now().Add(time.Minute), ExpiresAt: clock.Now().Add(time.Hour)}
					if _, err := s.Claim(context.Background(), p); err != nil {
						b.Fatal(err)
					}
					if err := s.Complete(context.Background(), p.Key, p.Owner, ledger.Completion{Summary: "sent"}); err != nil {
						b.Fatal(err)
					}
				}
				clock.Set(time.Now())
				return 100
			})
		},
			[]string{"purging-ns/op", "alone-ns/op", "purging/alone", "purging-p99-ns", "alone-p99-ns", "purging-max-ns", "alone-max-ns"}},
		{"SweepListing", func(b *testing.B) {
			var stores [2]ledger.Store
			at := time.Now().Add(-time.Hour)
			for i := range stores {
				stores[i] = ledgermem.New(nil)
				ledgerbench.AddStuck(b, stores[i], at)
			}
			ledgerbench.SweepListing(b, [2]int{ledgerbench.Stuck, ledgerbench.Stuck}, stores)
		}, []string{"small-ns/op", "large-ns/op", "large/small"}},
	} {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			var failed atomic.Bool
			r := testing.Benchmark(func(b *testing.B) {
				bc.run(b)
				if b.Failed() {
					failed.Store(true)
				}
			})
			if r.N == 0 || failed.Load() {
				t.Fatal("the benchmark failed")
			}
			for _, m := range bc.metrics {
				if _, ok := r.Extra[m]; !ok {
					t.Errorf("no %s in %v", m, r.Extra)
				}
			}
			for _, q := range [][2]string{{"p50-ns", "p99-ns"}, {"purging-p99-ns", "purging-max-ns"}, {"alone-p99-ns", "alone-max-ns"}} {
				if lo, hi, ok := r.Extra[q[0]], r.Extra[q[1]], slices.Contains(bc.metrics, q[0]); ok && (lo <= 0 || hi < lo) {
					t.Errorf("%s %v, %s %v", q[0], lo, q[1], hi)
				}
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	d := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 3}, {0.99, 5}, {1, 5}} {
		if got := ledgerbench.Quantile(d, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if d[0] != 5 {
		t.Error("Quantile sorted its argument")
	}
}
