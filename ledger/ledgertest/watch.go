package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// watchDeadline bounds the wait for a signal in RunWatch. It is generous
// (a signal arrives in milliseconds): the subtests fail on a signal that
// never comes, not on a slow one.
const watchDeadline = 30 * time.Second

// RunWatch runs the conformance suite of ledger.Watcher. newStores returns
// two Stores on one new, empty ledger, reading time from clock, as two
// processes would open it (their own connections, their own files
// handles); the first must be a ledger.Watcher. Stores with a Close
// method are closed at the end of each subtest.
//
// What it requires: a watch of a key receives a signal after a Complete,
// a definite Fail and an ambiguous Fail of that key by the other Store,
// and by the watching Store itself; several watches of one key and of
// other keys each receive theirs; a Watch with a cancelled context
// returns an error; stop is safe to call twice.
//
// A subtest never asserts that a signal did not come (a store may signal
// more than it must) and never times a signal: it waits for it with a
// deadline of 30 s, so that a store that relies on polling for its signals
// fails only if its polls are slower than that.
func RunWatch(t *testing.T, newStores func(t *testing.T, clock clock.Clock) (watcher, other ledger.Store)) {
	t.Helper()
	for _, c := range watchCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(t0)
			a, b := newStores(t, clk)
			if a == nil || b == nil {
				t.Fatal("newStores returned nil")
			}
			for _, s := range []ledger.Store{b, a} {
				switch c := s.(type) {
				case interface{ Close() error }:
					t.Cleanup(func() {
						if err := c.Close(); err != nil {
							t.Errorf("Close: %v", err)
						}
					})
				case interface{ Close() }:
					t.Cleanup(c.Close)
				}
			}
			w, ok := a.(ledger.Watcher)
			if !ok {
				t.Fatalf("%T is not a ledger.Watcher", a)
			}
			c.fn(&wh{h: &h{T: t, s: b, clock: clk, ctx: context.Background()}, w: w, self: &h{T: t, s: a, clock: clk, ctx: context.Background()}})
		})
	}
}

// wh is the harness of a watch subtest: h writes through the other Store,
// self through the watching one.
type wh struct {
	*h
	w    ledger.Watcher
	self *h
}

func (w *wh) watch(key string) (<-chan struct{}, func()) {
	w.Helper()
	ch, stop, err := w.w.Watch(w.ctx, key)
	if err != nil {
		w.Fatalf("Watch(%s): %v", key, err)
	}
	if ch == nil || stop == nil {
		w.Fatalf("Watch(%s) returned a nil channel or stop function and no error", key)
	}
	w.Cleanup(stop)
	return ch, stop
}

// signalled fails the test unless ch receives within watchDeadline.
func (w *wh) signalled(what string, ch <-chan struct{}) {
	w.Helper()
	t := time.NewTimer(watchDeadline)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
		w.Fatalf("%s: no signal within %v", what, watchDeadline)
	}
}

var watchCases = []struct {
	name string
	fn   func(*wh)
}{
	{"WatchSettledElsewhere", testWatchSettledElsewhere},
	{"WatchSettledHere", testWatchSettledHere},
	{"WatchManyKeys", testWatchManyKeys},
	{"WatchCancelled", testWatchCancelled},
}

// settles are the writes that settle a claimed record.
var settles = []struct {
	name string
	fn   func(h *h, key, owner string)
}{
	{"done", func(h *h, key, owner string) { h.complete(key, owner, ledger.Completion{Summary: "ok", Ref: "r1"}) }},
	{"failed", func(h *h, key, owner string) { h.fail(key, owner, ledger.Failure{Definite: true, Reason: "declined"}) }},
	{"uncertain", func(h *h, key, owner string) { h.fail(key, owner, ledger.Failure{Reason: "timeout"}) }},
}

func testWatchSettledElsewhere(w *wh) {
	for _, s := range settles {
		p := w.params("k-watch-elsewhere-"+s.name, "owner-a")
		w.mustClaim(p)
		ch, stop := w.watch(p.Key)
		w.clock.Advance(time.Second)
		s.fn(w.h, p.Key, p.Owner)
		w.signalled("a watch of a record "+s.name+" by the other Store", ch)
		if r := w.self.get(p.Key); r.State == ledger.StatePending {
			w.Errorf("signalled, but the watching Store reads the record still pending")
		}
		stop()
	}
}

func testWatchSettledHere(w *wh) {
	for _, s := range settles {
		p := w.self.params("k-watch-here-"+s.name, "owner-a")
		w.self.mustClaim(p)
		ch, _ := w.watch(p.Key)
		w.clock.Advance(time.Second)
		s.fn(w.self, p.Key, p.Owner)
		w.signalled("a watch of a record "+s.name+" by the watching Store", ch)
	}
}

func testWatchManyKeys(w *wh) {
	const n = 4
	type watched struct {
		p   ledger.ClaimParams
		chs []<-chan struct{}
	}
	var ws []watched
	for i := range n {
		p := w.params("k-watch-many-"+string(rune('a'+i)), "owner-a")
		w.mustClaim(p)
		a, _ := w.watch(p.Key)
		b, _ := w.watch(p.Key)
		ws = append(ws, watched{p, []<-chan struct{}{a, b}})
	}
	w.clock.Advance(time.Second)
	for i := n - 1; i >= 0; i-- {
		w.complete(ws[i].p.Key, ws[i].p.Owner, ledger.Completion{Summary: "ok"})
	}
	for _, x := range ws {
		for _, ch := range x.chs {
			w.signalled("one of two watches of "+x.p.Key+" among "+string(rune('0'+n))+" keys", ch)
		}
	}
}

func testWatchCancelled(w *wh) {
	ctx, cancel := context.WithCancel(w.ctx)
	cancel()
	ch, stop, err := w.w.Watch(ctx, "k-watch-cancelled")
	if err == nil {
		stop()
		w.Fatalf("Watch with a cancelled context: channel %v, no error", ch)
	}
	if !errors.Is(err, context.Canceled) {
		w.Errorf("Watch with a cancelled context: err = %v, want one wrapping context.Canceled", err)
	}
}
