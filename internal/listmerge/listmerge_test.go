package listmerge_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/listmerge"
	"github.com/oncely/oncely/ledger"
)

// Sources of every shape (empty, skewed, filtering, many ties) merge into
// the first limit records after the cursor, in cursor order, each once.
func TestMerge(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 1))
		sources := 1 + rng.IntN(20)
		var all []ledger.Record
		src := make([][]ledger.Record, sources)
		for i := range rng.IntN(300) {
			s := rng.IntN(sources)
			if rng.IntN(2) == 0 {
				s = 0 // skew: half the records in one source
			}
			r := ledger.Record{Key: fmt.Sprintf("k%04d", i), LeaseUntil: t0.Add(time.Duration(rng.IntN(50)) * time.Millisecond)}
			src[s] = append(src[s], r)
			all = append(all, r)
		}
		order := func(a, b ledger.Record) int { return ledger.CursorOf(&a).Compare(ledger.CursorOf(&b)) }
		for _, s := range src {
			slices.SortFunc(s, order)
		}
		slices.SortFunc(all, order)
		after := ledger.Cursor{}
		if len(all) > 0 && rng.IntN(2) == 0 {
			after = ledger.CursorOf(&all[rng.IntN(len(all))])
		}
		limit := 1 + rng.IntN(120)
		fetch := func(ctx context.Context, reqs []listmerge.Request) ([]listmerge.Reply, error) {
			out := make([]listmerge.Reply, len(reqs))
			for i, r := range reqs {
				// A source reads at most 2n entries and returns those that
				// pass a filter dropping every third key.
				rep := listmerge.Reply{Next: r.After, Done: true}
				read := 0
				for _, rec := range src[r.Source] {
					if !r.After.Before(&rec) {
						continue
					}
					if len(rep.Records) == r.N || read == 2*r.N {
						rep.Done = false
						break
					}
					read++
					rep.Next = ledger.CursorOf(&rec)
					if rec.Key[len(rec.Key)-1]%3 != 0 {
						rep.Records = append(rep.Records, rec)
					}
				}
				out[i] = rep
			}
			return out, nil
		}
		got, err := listmerge.Merge(context.Background(), sources, after, limit, fetch)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range all {
			if after.Before(&all[i]) && all[i].Key[len(all[i].Key)-1]%3 != 0 && len(want) < limit {
				want = append(want, all[i].Key)
			}
		}
		var keys []string
		for _, r := range got {
			keys = append(keys, r.Key)
		}
		if !slices.Equal(keys, want) {
			t.Fatalf("seed %d, %d sources, limit %d: got %v, want %v", seed, sources, limit, keys, want)
		}
	}
}
