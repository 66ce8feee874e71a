package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

// shop is a provider on a fake clock holding effects by downstream key.
type shop struct {
	caps    providers.Capabilities
	clock   *clock.Fake
	mu      sync.Mutex
	effects map[string]string // downstream key -> ref
	lookups atomic.Int64
	fail    error
}

func newShop(clock *clock.Fake, caps providers.Capabilities) *shop {
	return &shop{caps: caps, clock: clock, effects: map[string]string{}}
}

func (s *shop) Capabilities() providers.Capabilities { return s.caps }

func (s *shop) Lookup(ctx context.Context, key string) (providers.LookupResult, error) {
	s.lookups.Add(1)
	if s.fail != nil {
		return providers.LookupResult{}, s.fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ref, ok := s.effects[key]; ok {
		return providers.LookupResult{Status: providers.Found, Ref: ref, Summary: "order " + ref}, nil
	}
	if s.caps.Lookup == providers.Eventual {
		return providers.LookupResult{Status: providers.Inconclusive}, nil
	}
	return providers.LookupResult{Status: providers.NotFound}, nil
}

func (s *shop) create(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ref := fmt.Sprintf("ord_%d", len(s.effects)+1)
	s.effects[key] = ref
	return ref
}

// world is a store, a fake clock and a tool "order" over a shop.
type world struct {
	clock *clock.Fake
	store ledger.Store
	shop  *shop
	tool  client.Tool
}

func newWorld(t *testing.T, store func(clock.Clock) ledger.Store, caps providers.Capabilities) *world {
	clock := clock.NewFake(t0)
	w := &world{clock: clock, store: store(clock), shop: newShop(clock, caps)}
	w.tool = client.Tool{
		Name:     "order",
		Identity: []client.Field{{Path: "id", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			ref := w.shop.create(inv.DownstreamKey)
			return client.Effect{Summary: "order " + ref, Ref: ref}, nil
		},
		Reconciler: reconcile.New(w.shop, fakeTime(clock)),
	}
	return w
}

func memStore(c clock.Clock) ledger.Store { return ledgermem.New(&ledgermem.Config{Clock: c}) }

// sqliteFile returns a store func that opens a SQLite ledger in a file,
// and a function that opens another handle on the same file, as another
// process would.
func sqliteFile(t *testing.T) (func(clock.Clock) ledger.Store, func() ledger.Store) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	var clk clock.Clock
	open := func(c clock.Clock) ledger.Store {
		clk = c
		s, err := ledgersqlite.Open(context.Background(), path, &ledgersqlite.Config{Clock: c})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open, func() ledger.Store { return open(clk) }
}

// stuck writes a record left behind in state (pending with a lapsed lease,
// or uncertain), as of an hour before the world's clock.
func (w *world) stuck(t *testing.T, key string, state ledger.State) {
	t.Helper()
	ctx := context.Background()
	then := w.clock.Now().Add(-time.Hour)
	cr, err := w.store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "order", RunID: "run-1", Owner: "crashed-" + key,
		LeaseUntil: then.Add(time.Minute), Fingerprint: "fp", ExpiresAt: then.Add(24 * time.Hour)})
	if err != nil || !cr.Claimed {
		t.Fatalf("claim %s: %+v, %v", key, cr, err)
	}
	if state == ledger.StateUncertain {
		if err := w.store.Fail(ctx, key, "crashed-"+key, ledger.Failure{Reason: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *world) state(t *testing.T, key string) *ledger.Record {
	t.Helper()
	r, err := w.store.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return r
}

func (w *world) sweeper(cfg *reconcile.SweeperConfig, tools ...client.Tool) *reconcile.Sweeper {
	c := reconcile.SweeperConfig{Clock: w.clock}
	if cfg != nil {
		c = *cfg
		c.Clock = w.clock
	}
	if len(tools) == 0 {
		tools = []client.Tool{w.tool}
	}
	return reconcile.NewSweeper(w.store, tools, &c)
}

func TestSweeperSettles(t *testing.T) {
	t.Parallel()
	consistent := providers.Capabilities{Lookup: providers.Consistent}
	tests := []struct {
		name   string
		caps   providers.Capabilities
		state  ledger.State
		effect bool
		fail   error
		want   ledger.State
		report reconcile.Report
		reason string
	}{
		{name: "abandoned pending with effect", caps: consistent, state: ledger.StatePending, effect: true,
			want: ledger.StateDone, report: reconcile.Report{Examined: 1, Done: 1}},
		{name: "uncertain with effect", caps: consistent, state: ledger.StateUncertain, effect: true,
			want: ledger.StateDone, report: reconcile.Report{Examined: 1, Done: 1}},
		{name: "uncertain, conclusively absent", caps: consistent, state: ledger.StateUncertain,
			want: ledger.StateFailed, report: reconcile.Report{Examined: 1, Failed: 1}, reason: "no such effect"},
		{name: "abandoned pending, conclusively absent", caps: consistent, state: ledger.StatePending,
			want: ledger.StateFailed, report: reconcile.Report{Examined: 1, Failed: 1}},
		{name: "an upsert is looked up, not resent",
			caps: providers.Capabilities{Lookup: providers.Consistent, Upsert: true}, state: ledger.StatePending,
			want: ledger.StateFailed, report: reconcile.Report{Examined: 1, Failed: 1}, reason: "no such effect"},
		// A pass that learns nothing writes nothing: the record keeps its
		// reason and the lease end its in-flight bound rests on.
		{name: "only a resend could tell", caps: providers.Capabilities{DedupWindow: 24 * time.Hour}, state: ledger.StateUncertain,
			want: ledger.StateUncertain, report: reconcile.Report{Examined: 1, Uncertain: 1}, reason: "timeout"},
		{name: "index lag longer than the wait", caps: providers.Capabilities{Lookup: providers.Eventual, IndexLag: time.Hour},
			state: ledger.StateUncertain, want: ledger.StateUncertain, report: reconcile.Report{Examined: 1, Uncertain: 1}, reason: "timeout"},
		{name: "abandoned pending inside the index lag", caps: providers.Capabilities{Lookup: providers.Eventual, IndexLag: time.Hour},
			state: ledger.StatePending, want: ledger.StatePending, report: reconcile.Report{Examined: 1, Uncertain: 1}},
		{name: "lookup fails", caps: consistent, state: ledger.StateUncertain, fail: errors.New("provider down"),
			want: ledger.StateUncertain, report: reconcile.Report{Examined: 1, Uncertain: 1, Errors: 1}, reason: "timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, memStore, tc.caps)
			w.shop.fail = tc.fail
			w.stuck(t, "k1", tc.state)
			if tc.effect {
				w.shop.create("k1")
			}
			before := w.state(t, "k1")
			rep, err := w.sweeper(nil).Sweep(context.Background())
			if (err != nil) != (tc.fail != nil) || (tc.fail != nil && !strings.Contains(err.Error(), tc.fail.Error())) {
				t.Fatalf("Sweep error %v", err)
			}
			if r := w.state(t, "k1"); tc.want == tc.state && (r.Owner != before.Owner || !r.LeaseUntil.Equal(before.LeaseUntil)) {
				t.Errorf("an inconclusive pass wrote the record: %+v, was %+v", r, before)
			}
			if rep != tc.report {
				t.Errorf("report %+v, want %+v", rep, tc.report)
			}
			r := w.state(t, "k1")
			if r.State != tc.want || !strings.Contains(r.Reason, tc.reason) {
				t.Errorf("record %s (%q), want %s containing %q", r.State, r.Reason, tc.want, tc.reason)
			}
			if r.State == ledger.StateDone && (r.Ref != "ord_1" || r.Summary != "order ord_1") {
				t.Errorf("done record %+v", r)
			}
		})
	}
}

func TestSweeperLeavesOthersAlone(t *testing.T) {
	t.Parallel()
	w := newWorld(t, memStore, providers.Capabilities{Lookup: providers.Consistent})
	ctx := context.Background()
	now := w.clock.Now()
	// A live claim, a done record, and records of tools the sweeper does
	// not know or cannot reconcile.
	if _, err := w.store.Claim(ctx, ledger.ClaimParams{Key: "live", Tool: "order", Owner: "o", Fingerprint: "fp",
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	w.stuck(t, "other-tool", ledger.StateUncertain)
	w.stuck(t, "blind-pending", ledger.StatePending)
	w.stuck(t, "blind-uncertain", ledger.StateUncertain)
	blind := client.Tool{Name: "order"} // no reconciler
	rep, err := w.sweeper(nil, blind).Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (reconcile.Report{Examined: 3, Uncertain: 3}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	if r := w.state(t, "live"); r.State != ledger.StatePending || r.Owner != "o" {
		t.Errorf("live claim touched: %+v", r)
	}
	if r := w.state(t, "blind-pending"); r.State != ledger.StateUncertain || !strings.Contains(r.Reason, "no reconciler") {
		t.Errorf("abandoned claim without reconciler: %s %q, want uncertain", r.State, r.Reason)
	}
	rep, err = w.sweeper(nil, client.Tool{Name: "mail"}).Sweep(ctx)
	if err != nil || rep != (reconcile.Report{Examined: 3, Skipped: 3}) {
		t.Errorf("unknown tool: %+v, %v; want all skipped", rep, err)
	}
	if n := w.shop.lookups.Load(); n != 0 {
		t.Errorf("%d lookups", n)
	}
}

// A call whose process died right after the provider call leaves a
// pending record. The sweeper finds the effect; the resumed call is told it
// was already done. A record the sweeper fails is run again by the next
// call, with a new downstream key.
func TestSweeperThenResume(t *testing.T) {
	t.Parallel()
	w := newWorld(t, memStore, providers.Capabilities{Lookup: providers.Consistent})
	ctx := context.Background()
	crash := true
	tool := w.tool
	run := tool.Run
	tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		eff, err := run(ctx, inv)
		if crash {
			runtime.Goexit() // the process dies before the record is written
		}
		return eff, err
	}
	exec := client.New(w.store, &client.Config{Clock: w.clock, Liveness: time.Minute, Wait: -1})
	if err := exec.Register(tool); err != nil {
		t.Fatal(err)
	}
	call := client.Call{Tool: "order", Input: json.RawMessage(`{"id": 7}`)}
	crashed := make(chan struct{})
	go func() {
		defer close(crashed)
		_, _ = exec.Execute(ctx, "run-1", call)
	}()
	<-crashed
	crash = false

	w.clock.Advance(2 * time.Minute)
	rep, err := w.sweeper(nil).Sweep(ctx)
	if err != nil || rep != (reconcile.Report{Examined: 1, Done: 1}) {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	res, err := exec.Execute(ctx, "run-1", call)
	if err != nil || res.Outcome != client.AlreadyDone || res.Ref != "ord_1" {
		t.Fatalf("resume: %+v, %v", res, err)
	}

	// Another action: the process dies before the provider call. The sweeper
	// proves nothing happened and fails the record; the next call runs it.
	w.shop.mu.Lock()
	w.shop.effects = map[string]string{}
	w.shop.mu.Unlock()
	tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		runtime.Goexit()
		return client.Effect{}, nil
	}
	exec2 := client.New(w.store, &client.Config{Clock: w.clock, Liveness: time.Minute, Wait: -1})
	if err := exec2.Register(tool); err != nil {
		t.Fatal(err)
	}
	call2 := client.Call{Tool: "order", Input: json.RawMessage(`{"id": 8}`)}
	crashed = make(chan struct{})
	go func() {
		defer close(crashed)
		_, _ = exec2.Execute(ctx, "run-1", call2)
	}()
	<-crashed
	w.clock.Advance(2 * time.Minute)
	rep, err = w.sweeper(nil).Sweep(ctx)
	if err != nil || rep != (reconcile.Report{Examined: 1, Failed: 1}) {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	res, err = exec.Execute(ctx, "run-1", call2)
	if err != nil || res.Outcome != client.Executed || res.Attempt != 2 {
		t.Fatalf("next call: %+v, %v; want executed as attempt 2", res, err)
	}
	if n := len(w.shop.effects); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// Sweepers in several processes claim before writing: each stuck record is
// settled once, whoever gets it.
func TestSweepersRace(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := memStore
			var handle func() ledger.Store // another process's view of the ledger
			if name == "sqlite" {
				store, handle = sqliteFile(t)
			}
			w := newWorld(t, store, providers.Capabilities{Lookup: providers.Consistent})
			if handle == nil {
				handle = func() ledger.Store { return w.store }
			}
			const n = 40
			for i := range n {
				key := fmt.Sprintf("k%02d", i)
				state := ledger.StatePending
				if i%2 == 1 {
					state = ledger.StateUncertain
				}
				w.stuck(t, key, state)
				w.shop.create(key)
			}
			sweepers := []*reconcile.Sweeper{
				reconcile.NewSweeper(handle(), []client.Tool{w.tool}, &reconcile.SweeperConfig{Clock: w.clock, Concurrency: 8}),
				reconcile.NewSweeper(handle(), []client.Tool{w.tool}, &reconcile.SweeperConfig{Clock: w.clock, Concurrency: 8}),
			}
			var total reconcile.Report
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, sw := range sweepers {
				wg.Go(func() {
					rep, err := sw.Sweep(context.Background())
					if err != nil {
						t.Error(err)
					}
					mu.Lock()
					defer mu.Unlock()
					total.Examined += rep.Examined
					total.Done += rep.Done
					total.Skipped += rep.Skipped
					total.Failed += rep.Failed + rep.Uncertain + rep.Errors
				})
			}
			wg.Wait()
			if total.Done != n || total.Failed != 0 || total.Done+total.Skipped != total.Examined {
				t.Errorf("reports add up to %+v, want %d done and the rest skipped", total, n)
			}
			for i := range n {
				if r := w.state(t, fmt.Sprintf("k%02d", i)); r.State != ledger.StateDone {
					t.Errorf("%s: %s", r.Key, r.State)
				}
			}
		})
	}
}

// A record the sweeper settles is kept for the retention from the
// settlement, however old the uncertain record was: a repeat of the action
// after that is answered from it, never run again.
func TestSweeperSettledRecordKeptForRetention(t *testing.T) {
	t.Parallel()
	w := newWorld(t, memStore, providers.Capabilities{Lookup: providers.Consistent})
	w.stuck(t, "k-old", ledger.StateUncertain)
	w.shop.create(client.DownstreamKey("k-old", 1))
	w.clock.Advance(30 * 24 * time.Hour) // a month past the claim's retention
	if rep, err := w.sweeper(&reconcile.SweeperConfig{Retention: 48 * time.Hour}).Sweep(context.Background()); err != nil || rep.Done != 1 {
		t.Fatalf("sweep: %+v, %v; want the record done", rep, err)
	}
	rec := w.state(t, "k-old")
	if want := w.clock.Now().Add(48 * time.Hour); rec.State != ledger.StateDone || !rec.ExpiresAt.Equal(want) {
		t.Fatalf("settled record %+v: want done, kept until %v", rec, want)
	}
	w.clock.Advance(47 * time.Hour)
	if rec := w.state(t, "k-old"); rec.State != ledger.StateDone {
		t.Fatalf("settled record two days later: %+v", rec)
	}
}
