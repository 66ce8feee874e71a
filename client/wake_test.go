package client

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// waiting returns how many callers wait for key's settle signal.
func (w *wakeups) waiting(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if u := w.m[key]; u != nil {
		return u.n
	}
	return 0
}

// countingStore counts Get calls.
type countingStore struct {
	ledger.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// A caller waiting for a duplicate that a run in this process (here, of
// another Executor on the same ledger) is performing is answered by the
// settle signal: its polls are an hour apart, so no poll can answer it.
// Nothing settled between its claim and the start of its wait, so it
// reads nothing before the signal. The signal hands it the done record
// when both Executors use one Store; through another Store on the same
// ledger it reads the record once. The Executors share signals of their
// own, which no other test's settles touch.
func TestWaiterWokenBySettleNotByPoll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		sameStore bool
		gets      int64
	}{
		{"one Store", true, 0},
		{"two Stores", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := ledgermem.New(nil)
			holderStore, store := &countingStore{Store: mem}, &countingStore{Store: mem}
			if tc.sameStore {
				holderStore = store
			}
			wokenBySettle(t, holderStore, store, tc.gets)
		})
	}
}

func wokenBySettle(t *testing.T, holderStore ledger.Store, store *countingStore, gets int64) {
	started, finish := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	tool := Tool{
		Name:     "send_reply",
		Identity: []Field{{Path: "ticketId", Norm: String}},
		Run: func(ctx context.Context, inv Invocation) (Effect, error) {
			if runs.Add(1) == 1 {
				close(started)
				<-finish
			}
			return Effect{Summary: "sent once", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}
	first := New(holderStore, nil)
	waiter := New(store, &Config{Wait: time.Hour})
	waiter.poll = time.Hour
	wakes := newWakeups()
	first.wakes, waiter.wakes = wakes, wakes
	for _, e := range []*Executor{first, waiter} {
		if err := e.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	call := Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"wake-1"}`)}
	key, err := tool.Key("run", call, 0)
	if err != nil {
		t.Fatal(err)
	}
	firstDone := make(chan Result, 1)
	go func() {
		r, _ := first.Execute(context.Background(), "run", call)
		firstDone <- r
	}()
	<-started
	waited := make(chan Result, 1)
	go func() {
		r, _ := waiter.Execute(context.Background(), "run", call)
		waited <- r
	}()
	for deadline := time.Now().Add(10 * time.Second); wakes.waiting(key) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second caller never started waiting")
		}
	}
	close(finish)
	select {
	case r := <-waited:
		if r.Outcome != AlreadyDone || r.Summary != "sent once" || r.Ref != "msg_1" || string(r.Payload) != `{"id":"msg_1"}` || r.Attempt != 1 {
			t.Fatalf("waiter got %v %q (ref %q, payload %s, attempt %d), want AlreadyDone with the first run's effect", r.Outcome, r.Text, r.Ref, r.Payload, r.Attempt)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter was not woken when the first run settled")
	}
	if r := <-firstDone; r.Outcome != Executed {
		t.Fatalf("first caller got %v %q", r.Outcome, r.Text)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	if n := store.gets.Load(); n != gets {
		t.Fatalf("the waiter read the record %d times, want %d", n, gets)
	}
	if n := wakes.waiting(key); n != 0 {
		t.Fatalf("%d waiters still registered", n)
	}
}

// heldElsewhere returns an Executor on store that waits up to an hour for a
// duplicate in flight, with send_reply registered, and a call of it whose
// record holder has claimed in ledgerStore (an hour's lease), as a
// process elsewhere would have.
func heldElsewhere(t *testing.T, store, ledgerStore ledger.Store, ticket, holder string) (*Executor, Call, string) {
	t.Helper()
	tool := Tool{Name: "send_reply", Identity: []Field{{Path: "ticketId", Norm: String}},
		Run: func(context.Context, Invocation) (Effect, error) { return Effect{Summary: "again"}, nil }}
	e := New(store, &Config{Wait: time.Hour})
	if err := e.Register(tool); err != nil {
		t.Fatal(err)
	}
	call := Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `"}`)}
	key, err := tool.Key("run", call, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := ledgerStore.Claim(context.Background(), ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run", Owner: holder,
		LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return e, call, key
}

// A holder in another process settles the record without a signal here:
// the waiter finds out by polling.
func TestWaiterPollsForAnotherProcess(t *testing.T) {
	t.Parallel()
	store := ledgermem.New(nil)
	// countingStore hides the memory ledger's Watch: no signal comes.
	e, call, key := heldElsewhere(t, &countingStore{Store: store}, store, "poll-1", "elsewhere")
	ctx := context.Background()
	waited := make(chan Result, 1)
	go func() {
		r, _ := e.Execute(ctx, "run", call)
		waited <- r
	}()
	for deadline := time.Now().Add(10 * time.Second); settles.waiting(key) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the caller never started waiting")
		}
	}
	if err := store.Complete(ctx, key, "elsewhere", ledger.Completion{Summary: "sent elsewhere"}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-waited:
		if r.Outcome != AlreadyDone || r.Summary != "sent elsewhere" {
			t.Fatalf("waiter got %v %q, want AlreadyDone", r.Outcome, r.Text)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter never saw the record settle")
	}
}

// settlingStore completes the record its Claim found pending, as the
// holder elsewhere in this process, and signals the settle before the
// claim returns: before the caller has started waiting.
type settlingStore struct {
	ledger.Store
	holder string
}

func (s *settlingStore) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, p)
	if err == nil && !res.Claimed && res.Previous != nil && res.Previous.Owner == s.holder {
		if err := s.Store.Complete(ctx, p.Key, s.holder, ledger.Completion{Summary: "sent by the holder"}); err != nil {
			return res, err
		}
		settles.wake(p.Key, nil)
	}
	return res, err
}

// A settle signalled between the claim that found the record pending and
// the start of the wait is not lost: the caller looks at the record as it
// starts waiting, and its polls (an hour apart) cannot be what answers it.
func TestWaiterSeesSettleBeforeItWaits(t *testing.T) {
	t.Parallel()
	mem := ledgermem.New(nil)
	e, call, _ := heldElsewhere(t, &settlingStore{Store: mem, holder: "holder"}, mem, "early-settle", "holder")
	e.poll = time.Hour
	ctx := context.Background()
	waited := make(chan Result, 1)
	go func() {
		r, _ := e.Execute(ctx, "run", call)
		waited <- r
	}()
	select {
	case r := <-waited:
		if r.Outcome != AlreadyDone || r.Summary != "sent by the holder" {
			t.Fatalf("caller got %v %q, want AlreadyDone", r.Outcome, r.Text)
		}
	case <-time.After(time.Minute):
		t.Fatal("the caller missed the settle that came before it started waiting")
	}
}

// valueStore is a Store held by value, and not comparable.
type valueStore struct {
	ledger.Store
	tags map[string]string
}

// Only one Store pointer is the same Store; values are never compared
// (comparing this one would panic), so their waiters read.
func TestSameStore(t *testing.T) {
	t.Parallel()
	a, b := ledgermem.New(nil), ledgermem.New(nil)
	v := valueStore{Store: a}
	for _, tc := range []struct {
		name string
		x, y ledger.Store
		want bool
	}{
		{"one pointer", a, a, true},
		{"two pointers", a, b, false},
		{"a value", v, v, false},
		{"a value and its pointer", v, a, false},
	} {
		if got := sameStore(tc.x, tc.y); got != tc.want {
			t.Errorf("%s: sameStore = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// watchingStore is a Store of a ledger shared with other processes: it
// has no settle signal of this process but watches the ledger, counting
// the watches.
type watchingStore struct {
	*ledgermem.Store
	watches, stops atomic.Int64
	// before, if set, runs in Watch before the watch is registered.
	before func()
}

func (s *watchingStore) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if s.before != nil {
		s.before()
	}
	s.watches.Add(1)
	ch, stop, err := s.Store.Watch(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	return ch, func() { s.stops.Add(1); stop() }, nil
}

// A caller waiting for a duplicate that a process elsewhere performs
// (another Executor with signals of its own, on the same ledger) is woken
// by the ledger's watch when the holder settles: its polls are an hour
// apart, so no poll can answer it, and no signal of this process reaches
// it. It stops its watch once answered.
func TestWaiterWokenByLedgerWatch(t *testing.T) {
	t.Parallel()
	mem := ledgermem.New(nil)
	store := &watchingStore{Store: mem}
	wokenByWatch(t, mem, store, func() int64 { return store.watches.Load() }, func() int64 { return store.stops.Load() })
}

// The same through two SQLite Stores on one file, as two processes open
// it: the waiter is woken through the ledger's signal file.
func TestWaiterWokenBySQLiteWatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ledger.db")
	holder, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close() })
	waiter, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { waiter.Close() })
	store := &watchingSQLite{Store: waiter}
	wokenByWatch(t, holder, store, func() int64 { return store.watches.Load() }, func() int64 { return 1 })
}

// watchingSQLite counts the watches of a SQLite Store.
type watchingSQLite struct {
	*ledgersqlite.Store
	watches atomic.Int64
}

func (s *watchingSQLite) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	s.watches.Add(1)
	return s.Store.Watch(ctx, key)
}

// wokenByWatch runs a call whose tool waits in an Executor on holderStore
// and the same call in another, on store, with signals of their own and
// polls an hour apart, and checks that the second is answered with the
// first's effect once the first settles: only store's watch can wake it.
// watches and stops count the watches of store.
func wokenByWatch(t *testing.T, holderStore, store ledger.Store, watches, stops func() int64) {
	started, finish := make(chan struct{}), make(chan struct{})
	var runs atomic.Int64
	tool := Tool{
		Name:     "send_reply",
		Identity: []Field{{Path: "ticketId", Norm: String}},
		Run: func(ctx context.Context, inv Invocation) (Effect, error) {
			if runs.Add(1) == 1 {
				close(started)
				<-finish
			}
			return Effect{Summary: "sent once", Ref: "msg_1"}, nil
		},
	}
	holder := New(holderStore, nil)
	waiter := New(store, &Config{Wait: time.Hour})
	waiter.poll = time.Hour
	holder.wakes, waiter.wakes = newWakeups(), newWakeups()
	for _, e := range []*Executor{holder, waiter} {
		if err := e.Register(tool); err != nil {
			t.Fatal(err)
		}
	}
	call := Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"watch-1"}`)}
	key, err := tool.Key("run", call, 0)
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan Result, 1)
	go func() {
		r, _ := holder.Execute(context.Background(), "run", call)
		held <- r
	}()
	<-started
	waited := make(chan Result, 1)
	go func() {
		r, _ := waiter.Execute(context.Background(), "run", call)
		waited <- r
	}()
	for deadline := time.Now().Add(10 * time.Second); waiter.wakes.waiting(key) == 0 || watches() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second caller never started watching")
		}
	}
	close(finish)
	select {
	case r := <-waited:
		if r.Outcome != AlreadyDone || r.Summary != "sent once" || r.Ref != "msg_1" {
			t.Fatalf("waiter got %v %q (ref %q), want AlreadyDone with the first run's effect", r.Outcome, r.Text, r.Ref)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter was not woken by the ledger when the holder settled")
	}
	if r := <-held; r.Outcome != Executed {
		t.Fatalf("holder got %v %q", r.Outcome, r.Text)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	if w, s := watches(), stops(); w != 1 || s != 1 {
		t.Fatalf("%d watches, %d stopped; want 1 and 1", w, s)
	}
}

// A holder elsewhere that settles after the waiter's claim read the record
// pending but before its watch began signals nobody: the waiter reads the
// record once it watches, and its polls (an hour apart) cannot be what
// answers it.
func TestWaiterReadsOnceItWatches(t *testing.T) {
	t.Parallel()
	mem := ledgermem.New(nil)
	store := &watchingStore{Store: mem}
	e, call, key := heldElsewhere(t, store, mem, "watch-early", "elsewhere")
	e.poll = time.Hour
	e.wakes = newWakeups()
	store.before = func() {
		if err := mem.Complete(context.Background(), key, "elsewhere", ledger.Completion{Summary: "sent elsewhere"}); err != nil {
			t.Error(err)
		}
	}
	waited := make(chan Result, 1)
	go func() {
		r, _ := e.Execute(context.Background(), "run", call)
		waited <- r
	}()
	select {
	case r := <-waited:
		if r.Outcome != AlreadyDone || r.Summary != "sent elsewhere" {
			t.Fatalf("caller got %v %q, want AlreadyDone", r.Outcome, r.Text)
		}
	case <-time.After(time.Minute):
		t.Fatal("the caller missed the settle that came before its watch began")
	}
}
