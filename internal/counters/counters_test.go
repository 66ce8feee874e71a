package counters_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// countersIn returns the counter records of s, decoded.
func countersIn(t *testing.T, s ledger.Store) []counters.Counts {
	t.Helper()
	recs, err := s.List(context.Background(), ledger.Filter{RunID: ledger.CountersRun})
	if err != nil {
		t.Fatal(err)
	}
	var out []counters.Counts
	for i := range recs {
		c, ok := counters.Decode(&recs[i])
		if !ok {
			t.Fatalf("record %s does not decode", recs[i].Key)
		}
		out = append(out, c)
	}
	return out
}

// Counts added are written by the timer the first one started, one record
// per tool with their sums, and nothing is written before it fires.
func TestRecorderWritesOnTimer(t *testing.T) {
	s := ledgermem.New(nil)
	r := counters.New(s, clock.System{}, 20*time.Millisecond)
	for range 3 {
		r.Add(counters.Counts{Tool: "a", Replayed: 1})
	}
	r.Add(counters.Counts{Tool: "b", Executed: 2, Reconciled: 1})
	r.Add(counters.Counts{Tool: "b"}) // nothing to count
	deadline := time.Now().Add(30 * time.Second)
	var got []counters.Counts
	for len(got) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling for the timer's write
		got = countersIn(t, s)
	}
	sums := map[string]counters.Counts{}
	for _, c := range got {
		sums[c.Tool] = c
	}
	if len(got) != 2 || sums["a"] != (counters.Counts{Tool: "a", Replayed: 3}) ||
		sums["b"] != (counters.Counts{Tool: "b", Executed: 2, Reconciled: 1}) {
		t.Errorf("counter records: %+v", got)
	}
}

// A write that fails keeps its counts for the next one.
func TestRecorderKeepsCountsOnError(t *testing.T) {
	s := &flaky{Store: ledgermem.New(nil)}
	s.down.Store(true)
	r := counters.New(s, clock.System{}, time.Hour)
	r.Add(counters.Counts{Tool: "a", Merged: 2})
	if err := r.Flush(context.Background()); err == nil {
		t.Fatal("Flush on a store that is down: no error")
	}
	s.down.Store(false)
	r.Add(counters.Counts{Tool: "a", Merged: 1})
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := countersIn(t, s); len(got) != 1 || got[0].Merged != 3 {
		t.Errorf("counter records: %+v, want one with the 3 merges", got)
	}
}

// flaky is a store whose claims fail while it is down.
type flaky struct {
	ledger.Store
	down atomic.Bool
}

func (f *flaky) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if f.down.Load() {
		return ledger.ClaimResult{}, ledger.ErrUnavailable
	}
	return f.Store.Claim(ctx, p)
}
