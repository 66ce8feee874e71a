// Package ledgerbench holds benchmark bodies that every ledger backend runs
// the same way on the backend's Store: through client.Executor, many
// callers of fresh actions at once and many callers of one action at once;
// on the Store itself, claims on a small and a large ledger, and claims
// beside a purge. Each backend's bench_test.go calls them with its own
// Store.
package ledgerbench

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
)

// seq numbers tickets across benchmarks and -count runs of one binary.
var seq atomic.Int64

// executor returns an executor on s with a send_reply tool keyed by
// ticketId that sleeps for took and counts its runs in runs.
func executor(b *testing.B, s ledger.Store, took time.Duration, runs *atomic.Int64) *client.Executor {
	exec := client.New(s, nil)
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, _ client.Invocation) (client.Effect, error) {
			runs.Add(1)
			if took > 0 {
				t := time.NewTimer(took)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return client.Effect{}, ctx.Err()
				}
			}
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		b.Fatal(err)
	}
	return exec
}

// call is a send_reply call for ticket.
func call(ticket string) client.Call {
	return client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `","text":"Your refund is on its way."}`)}
}

// ParallelFresh runs fresh actions (a new ticket each: claim, a tool that
// does nothing, record) through one executor on s from callers goroutines
// at once. ns/op is the wall time per action, so 1e9/ns/op is the
// throughput; p50-ns and p99-ns are the latencies of single calls.
func ParallelFresh(b *testing.B, s ledger.Store, callers int) {
	ctx := context.Background()
	var runs atomic.Int64
	exec := executor(b, s, 0, &runs)
	run := "run-" + strconv.FormatInt(seq.Add(1), 10)
	var (
		mu  sync.Mutex
		lat []time.Duration
	)
	b.SetParallelism((callers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			r, err := exec.Execute(ctx, run, call(strconv.FormatInt(seq.Add(1), 10)))
			mine = append(mine, time.Since(t0))
			if err != nil || r.Outcome != client.Executed {
				b.Errorf("Execute = %v, %v", r.Outcome, err)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportLatency(b, lat)
}

// Contention has callers, each with its own executor on a store from
// store (as separate processes would be: no merging of duplicates inside
// one executor; store may return one shared Store or a new one per call), make
// the same call at once, for a new ticket in every iteration, with a tool
// that takes took. Exactly one of them may run the tool; the others must
// be answered with its result. ns/op is the time until all are answered;
// p50-ns and p99-ns are the callers' latencies, and p99/tool compares the
// slowest answers with the tool's own time (1 is the floor: nobody can be
// answered before the tool has finished). in-progress/op counts the
// callers that gave up waiting.
func Contention(b *testing.B, store func() ledger.Store, callers int, took time.Duration) {
	ctx := context.Background()
	var runs atomic.Int64
	execs := make([]*client.Executor, callers)
	for i := range execs {
		execs[i] = executor(b, store(), took, &runs)
	}
	run := "run-" + strconv.FormatInt(seq.Add(1), 10)
	// round has every executor make one call at once and returns the
	// callers' latencies and how many of them gave up waiting.
	round := func() (answered []time.Duration, inProgress int) {
		c := call("contended-" + strconv.FormatInt(seq.Add(1), 10))
		start := make(chan struct{})
		answered = make([]time.Duration, callers)
		outcomes := make([]client.Outcome, callers)
		var wg sync.WaitGroup
		for i, exec := range execs {
			wg.Go(func() {
				<-start
				t0 := time.Now()
				r, err := exec.Execute(ctx, run, c)
				answered[i] = time.Since(t0)
				if err != nil {
					b.Error(err)
				}
				outcomes[i] = r.Outcome
			})
		}
		before := runs.Load()
		close(start)
		wg.Wait()
		if n := runs.Load() - before; n != 1 {
			b.Fatalf("the tool ran %d times for one action", n)
		}
		for _, o := range outcomes {
			switch o {
			case client.Executed, client.AlreadyDone:
			case client.InProgress:
				inProgress++
			default:
				b.Fatalf("outcome %v", o)
			}
		}
		return answered, inProgress
	}
	// One round first, untimed and unreported: the stores' connections
	// (pools, readers) are opened there, once.
	round()
	var (
		lat        []time.Duration
		inProgress int
	)
	b.ResetTimer()
	for b.Loop() {
		answered, n := round()
		lat = append(lat, answered...)
		inProgress += n
	}
	b.StopTimer()
	reportLatency(b, lat)
	if len(lat) > 0 && took > 0 {
		b.ReportMetric(float64(Quantile(lat, 0.99))/float64(took), "p99/tool")
	}
	b.ReportMetric(float64(inProgress)/float64(b.N), "in-progress/op")
}

// reportLatency reports the median and 99th percentile of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	b.ReportMetric(float64(Quantile(lat, 0.50)), "p50-ns")
	b.ReportMetric(float64(Quantile(lat, 0.99)), "p99-ns")
}

// Quantile is the q-quantile of d (nearest rank); d must not be empty.
func Quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Scale measures claim latency on two stores that differ only in how many
// records they hold (sizes), paired: every iteration makes the same claim
// on both, so that drift of the machine cancels out of the ratio. replay
// claims a done key, replayKey(size, i), which must name one of the
// store's done records; fresh claims and completes a new key, freshKey(size).
// It reports small-ns/op, large-ns/op and large/small (near 1: flat).
func Scale(b *testing.B, sizes [2]int, stores [2]ledger.Store, replayKey func(size, i int) string, freshKey func(size int) string) {
	ctx := context.Background()
	params := func(key string) ledger.ClaimParams {
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	paired := func(b *testing.B, action func(b *testing.B, s ledger.Store, size, i int)) {
		var took [2]time.Duration
		i := 0
		for b.Loop() {
			i++
			for j, s := range stores {
				t0 := time.Now()
				action(b, s, sizes[j], i)
				took[j] += time.Since(t0)
			}
		}
		n := float64(b.N)
		b.ReportMetric(float64(took[0])/n, "small-ns/op")
		b.ReportMetric(float64(took[1])/n, "large-ns/op")
		b.ReportMetric(float64(took[1])/float64(took[0]), "large/small")
	}
	b.Run("replay", func(b *testing.B) {
		paired(b, func(b *testing.B, s ledger.Store, size, i int) {
			res, err := s.Claim(ctx, params(replayKey(size, i)))
			if err != nil || res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
		})
	})
	b.Run("fresh", func(b *testing.B) {
		paired(b, func(b *testing.B, s ledger.Store, size, _ int) {
			p := params(freshKey(size))
			if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
			if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent"}); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// PurgeBlocking measures fresh actions (claim and completion, one caller)
// on s while s purges expired records, beside as many fresh actions with
// no purge running, paired in every iteration. Each iteration first calls
// fill (untimed), which must add expired records to s's ledger and return
// how many. It reports purging-ns/op and alone-ns/op (mean latencies),
// purging/alone, their p99s and their maxima: what a claim waits behind a
// purge.
func PurgeBlocking(b *testing.B, s interface {
	ledger.Store
	ledger.Purger
}, fill func(round int) int) {
	ctx := context.Background()
	run := "run-" + strconv.FormatInt(seq.Add(1), 10)
	fresh := func(lat *[]time.Duration) {
		now := time.Now()
		p := ledger.ClaimParams{Key: "purge-fresh-" + strconv.FormatInt(seq.Add(1), 10), Tool: "send_reply", RunID: run, Owner: "owner",
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatalf("Claim = %+v, %v", res, err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent"}); err != nil {
			b.Fatal(err)
		}
		*lat = append(*lat, time.Since(now))
	}
	var purging, alone []time.Duration
	round := 0
	for b.Loop() {
		b.StopTimer()
		expired := fill(round)
		round++
		b.StartTimer()
		done := make(chan error, 1)
		go func() {
			n, err := s.Purge(ctx, time.Now())
			if err == nil && n < expired {
				err = fmt.Errorf("Purge deleted %d records, want at least %d", n, expired)
			}
			done <- err
		}()
		during := len(purging)
	claiming:
		for {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				break claiming
			default:
				fresh(&purging)
			}
		}
		for range len(purging) - during {
			fresh(&alone)
		}
	}
	b.StopTimer()
	mean := func(d []time.Duration) float64 {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return float64(sum) / float64(len(d))
	}
	b.ReportMetric(mean(purging), "purging-ns/op")
	b.ReportMetric(mean(alone), "alone-ns/op")
	b.ReportMetric(mean(purging)/mean(alone), "purging/alone")
	b.ReportMetric(float64(Quantile(purging, 0.99)), "purging-p99-ns")
	b.ReportMetric(float64(Quantile(alone, 0.99)), "alone-p99-ns")
	b.ReportMetric(float64(Quantile(purging, 1)), "purging-max-ns")
	b.ReportMetric(float64(Quantile(alone, 1)), "alone-max-ns")
}

// Stuck is how many stuck records the stores of SweepListing hold, and
// StuckKey names them: uncertain records of tool send_reply settled a
// millisecond apart, oldest first.
const Stuck = 1000

// StuckKey is the key of the i-th stuck record of SweepListing's stores.
func StuckKey(i int) string { return fmt.Sprintf("stuck-%04d", i) }

// AddStuck writes the Stuck stuck records to s through the Store API,
// settled from at on, and returns the time after the last.
func AddStuck(b *testing.B, s ledger.Store, at time.Time) time.Time {
	ctx := context.Background()
	for i := range Stuck {
		at = at.Add(time.Millisecond)
		p := ledger.ClaimParams{Key: StuckKey(i), Tool: "send_reply", RunID: "run-stuck", Owner: "owner",
			LeaseUntil: at, Fingerprint: "fp", ExpiresAt: at.Add(24 * time.Hour)}
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatalf("Claim(%s) = %+v, %v", p.Key, res, err)
		}
		if err := s.Fail(ctx, p.Key, p.Owner, ledger.Failure{Reason: "timeout"}); err != nil {
			b.Fatal(err)
		}
	}
	return at
}

// SweepListing measures what one sweep of reconcile.Sweeper lists (the
// abandoned pending records, then the uncertain ones, 100 of each from
// the sweep's cursor) on two stores that hold the same Stuck uncertain
// records (StuckKey) among sizes[0] and sizes[1] records in all, paired:
// every iteration lists from the same cursor on both, the cursor going
// round the stuck records as sweeps do. It reports small-ns/op,
// large-ns/op and large/small (near 1: the listing costs the stuck
// records, not the ledger).
func SweepListing(b *testing.B, sizes [2]int, stores [2]ledger.Store) {
	ctx := context.Background()
	const limit = 100
	var cursors []ledger.Cursor // of the stuck records, in order
	err := ledger.Walk(ctx, stores[0], ledger.Filter{State: ledger.StateUncertain, Limit: limit}, func(r *ledger.Record) error {
		cursors = append(cursors, ledger.CursorOf(r))
		return nil
	})
	if err != nil || len(cursors) != Stuck {
		b.Fatalf("the small store holds %d uncertain records (%v), want %d", len(cursors), err, Stuck)
	}
	for _, s := range stores { // untimed: connections, a store's first-use work
		if _, err := s.List(ctx, ledger.Filter{State: ledger.StateUncertain, Limit: limit}); err != nil {
			b.Fatal(err)
		}
	}
	var took [2]time.Duration
	i := 0
	for b.Loop() {
		after := ledger.Cursor{}
		if k := (i * limit) % Stuck; k > 0 {
			after = cursors[k-1]
		}
		i++
		now := time.Now()
		for j, s := range stores {
			t0 := time.Now()
			if _, err := s.List(ctx, ledger.Filter{State: ledger.StatePending, LeaseBefore: now, Limit: limit}); err != nil {
				b.Fatal(err)
			}
			recs, err := s.List(ctx, ledger.Filter{State: ledger.StateUncertain, After: after, Limit: limit})
			took[j] += time.Since(t0)
			if err != nil || len(recs) != limit {
				b.Fatalf("List of %d records: %d records, %v; want %d", sizes[j], len(recs), err, limit)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0])/n, "small-ns/op")
	b.ReportMetric(float64(took[1])/n, "large-ns/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "large/small")
}
