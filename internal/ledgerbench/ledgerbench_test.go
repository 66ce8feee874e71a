package ledgerbench_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/ledgerbench"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgermem"
)

// The bodies run on the memory ledger, do not fail (a tool run twice, a
// wrong outcome) and report their metrics.
func TestBodies(t *testing.T) {
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
			if p50, p99 := r.Extra["p50-ns"], r.Extra["p99-ns"]; p50 <= 0 || p99 < p50 {
				t.Errorf("p50 %v, p99 %v", p50, p99)
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
