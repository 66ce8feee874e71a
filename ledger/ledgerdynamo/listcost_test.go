package ledgerdynamo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sync/errgroup"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// readCounter passes requests to a real server and counts what List
// reads: Queries and the index entries they read (ScannedCount, what
// DynamoDB bills a Query for, filtered or not), BatchGetItem requests and
// the records they read.
type readCounter struct {
	*dynamodb.Client
	mu                               sync.Mutex
	queries, scanned, batches, items int
}

func (r *readCounter) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := r.Client.Query(ctx, in, opts...)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queries++
	if err == nil {
		r.scanned += int(out.ScannedCount)
	}
	return out, err
}

func (r *readCounter) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	r.mu.Lock()
	r.batches++
	for _, ka := range in.RequestItems {
		r.items += len(ka.Keys)
	}
	r.mu.Unlock()
	return r.Client.BatchGetItem(ctx, in, opts...)
}

// take returns "queries/entries/batches/records" since the last take.
func (r *readCounter) take() (queries, scanned, batches, items int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	queries, scanned, batches, items = r.queries, r.scanned, r.batches, r.items
	r.queries, r.scanned, r.batches, r.items = 0, 0, 0, 0
	return queries, scanned, batches, items
}

// fill claims the keys k-from to k-(to-1), each with its own LeaseUntil
// (t0 + 30 s + i ms) unless tied, when they all share one.
func fill(t *testing.T, s *ledgerdynamo.Store, from, to int, tied bool) {
	t.Helper()
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := from; i < to; i++ {
		g.Go(func() error {
			p := params(fmt.Sprintf("k-%06d", i), "o")
			if !tied {
				p.LeaseUntil = p.LeaseUntil.Add(time.Duration(i) * time.Millisecond)
			}
			_, err := s.Claim(ctx, p)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// A page of 100 on the default (sharded) layout reads a bounded number of
// index entries whatever the ledger holds: at most each shard's chunk
// (four times its share of the page, plus 8, and one more), one Query per shard and one
// BatchGetItem of the page's 100 records, the same at 1,500 pending
// records as at 4,500; listing all states likewise. Counted, not timed.
func TestListReadsBounded(t *testing.T) {
	t.Parallel()
	api := &readCounter{Client: newClient(dynalitetest.Endpoint(t), nil)}
	table := dynalitetest.NewTable(t, api.Client)
	s := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock.NewFake(t0)})
	const page = 100
	type cost struct{ queries, scanned, batches, items int }
	costs := map[string][]cost{}
	have := 0
	for _, n := range []int{1500, 4500} {
		fill(t, s, have, n, false)
		have = n
		for _, tc := range []struct {
			name  string
			f     ledger.Filter
			parts int
		}{
			{"pending", ledger.Filter{State: ledger.StatePending, LeaseBefore: t0.Add(time.Hour), Limit: page}, ledgerdynamo.DefaultShards},
			{"all states", ledger.Filter{Limit: page}, 4 * ledgerdynamo.DefaultShards},
		} {
			api.take()
			recs, err := s.List(context.Background(), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != page || recs[0].Key != "k-000000" || recs[page-1].Key != fmt.Sprintf("k-%06d", page-1) {
				t.Fatalf("%s among %d: %d records, want k-000000 to k-%06d", tc.name, n, len(recs), page-1)
			}
			var c cost
			c.queries, c.scanned, c.batches, c.items = api.take()
			t.Logf("%s, a page of %d among %d records: %d Queries reading %d index entries, %d BatchGetItem of %d records",
				tc.name, page, n, c.queries, c.scanned, c.batches, c.items)
			chunk := min(page, 4*page/tc.parts+8)
			if c.queries != tc.parts || c.scanned > tc.parts*(chunk+1) || c.batches != 1 || c.items != page {
				t.Errorf("%s among %d: %+v; want %d Queries reading at most %d entries and one BatchGetItem of %d",
					tc.name, n, c, tc.parts, tc.parts*(chunk+1), page)
			}
			costs[tc.name] = append(costs[tc.name], c)
		}
	}
	for name, c := range costs {
		if c[1].scanned > c[0].scanned || c[1].queries != c[0].queries {
			t.Errorf("%s: reads grew with the ledger: %+v at 1,500, %+v at 4,500", name, c[0], c[1])
		}
	}
}

// Records that share one LeaseUntil millisecond cost one Query more per
// 1,000 of them, not one each: 300 ties listed 100 at a time, on the
// unsharded index and on the default sharded one, every record once.
func TestListTiesQueries(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	for _, tc := range []struct {
		name   string
		layout ledgerdynamo.Layout
		first  int // Queries of the first page
		all    int // Queries of the three pages and the empty fourth
	}{
		// A page: one Query for its records and one more, one for the
		// other ties of its last LeaseUntil (a later page reads the ties
		// before its cursor, up to 1,000 a Query).
		{"unsharded", ledgerdynamo.Layout{Shards: ledgerdynamo.Unsharded}, 2, 8},
		{"sharded", ledgerdynamo.Layout{}, ledgerdynamo.DefaultShards, 4 * ledgerdynamo.DefaultShards},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &readCounter{Client: newClient(endpoint, nil)}
			table := dynalitetest.NewTableWith(t, api.Client, &ledgerdynamo.TableOptions{Layout: tc.layout})
			s := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock.NewFake(t0), Layout: tc.layout})
			fill(t, s, 0, 300, true)
			api.take()
			seen := map[string]bool{}
			f := ledger.Filter{State: ledger.StatePending, Limit: 100}
			var queries []int
			for {
				recs, err := s.List(context.Background(), f)
				if err != nil {
					t.Fatal(err)
				}
				q, _, _, _ := api.take()
				queries = append(queries, q)
				for _, r := range recs {
					if seen[r.Key] {
						t.Fatalf("%s listed twice", r.Key)
					}
					seen[r.Key] = true
				}
				if len(recs) == 0 {
					break
				}
				f.After = ledger.CursorOf(&recs[len(recs)-1])
			}
			total := 0
			for _, q := range queries {
				total += q
			}
			t.Logf("300 ties, pages of 100: Queries per page %v", queries)
			if len(seen) != 300 || queries[0] > tc.first || total > tc.all {
				t.Errorf("%d records listed; Queries per page %v, want at most %d for the first, %d in all", len(seen), queries, tc.first, tc.all)
			}
		})
	}
}
