package ledgertest

import (
	"fmt"
	"slices"
	"time"

	"github.com/oncely/oncely/ledger"
)

func testList(h *h) {
	type spec struct {
		key, run string
		lease    time.Duration
	}
	specs := []spec{
		{"k1", "run-a", 10 * time.Second}, // pending
		{"k2", "run-b", 40 * time.Second}, // pending
		{"k3", "run-a", lease},            // done at t0+1s
		{"k4", "run-b", lease},            // failed at t0+2s
		{"k5", "run-a", lease},            // uncertain at t0+3s
		{"k6", "run-a", 2 * time.Second},  // done at t0+1s, expires at t0+4s
	}
	for _, s := range specs {
		p := h.params(s.key, "owner-"+s.key)
		p.RunID, p.LeaseUntil = s.run, t0.Add(s.lease)
		if s.key == "k6" {
			p.ExpiresAt = t0.Add(4 * time.Second)
		}
		h.mustClaim(p)
	}
	h.clock.Advance(time.Second)
	h.complete("k3", "owner-k3", ledger.Completion{Summary: "ok", Result: []byte("r")})
	h.complete("k6", "owner-k6", ledger.Completion{Summary: "ok"})
	h.clock.Advance(time.Second)
	h.fail("k4", "owner-k4", ledger.Failure{Definite: true, Reason: "no"})
	h.clock.Advance(time.Second)
	h.fail("k5", "owner-k5", ledger.Failure{Reason: "maybe"})
	h.clock.Advance(2 * time.Second)

	byKey := map[string]*ledger.Record{}
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5"} {
		byKey[k] = h.get(k)
	}
	check := func(f ledger.Filter, want ...string) {
		h.Helper()
		got := h.list(f)
		var keys []string
		for i := range got {
			keys = append(keys, got[i].Key)
			if w := byKey[got[i].Key]; w != nil {
				h.same(fmt.Sprintf("List(%+v) record %s", f, got[i].Key), &got[i], w)
			}
		}
		slices.Sort(keys)
		if !slices.Equal(keys, want) {
			h.Errorf("List(%+v) = %v, want %v", f, keys, want)
		}
	}
	check(ledger.Filter{}, "k1", "k2", "k3", "k4", "k5")
	check(ledger.Filter{State: ledger.StatePending}, "k1", "k2")
	check(ledger.Filter{State: ledger.StateDone}, "k3")
	check(ledger.Filter{State: ledger.StateFailed}, "k4")
	check(ledger.Filter{State: ledger.StateUncertain}, "k5")
	check(ledger.Filter{RunID: "run-a"}, "k1", "k3", "k5")
	check(ledger.Filter{RunID: "run-b", State: ledger.StateFailed}, "k4")
	check(ledger.Filter{RunID: "run-b", State: ledger.StateDone})
	check(ledger.Filter{RunID: "run-none"})
	check(ledger.Filter{LeaseBefore: t0.Add(10 * time.Second)}, "k3", "k4", "k5")
	check(ledger.Filter{LeaseBefore: t0.Add(2 * time.Second)}, "k3")
	check(ledger.Filter{State: ledger.StatePending, LeaseBefore: t0.Add(10*time.Second + time.Millisecond)}, "k1")
	check(ledger.Filter{State: ledger.StatePending, LeaseBefore: t0.Add(41 * time.Second)}, "k1", "k2")
	check(ledger.Filter{State: ledger.StatePending, RunID: "run-a", LeaseBefore: t0.Add(time.Hour)}, "k1")

	for _, limit := range []int{1, 2, 4} {
		got := h.list(ledger.Filter{Limit: limit})
		if len(got) != limit {
			h.Errorf("List(Limit %d) returned %d records", limit, len(got))
		}
		seen := map[string]bool{}
		for _, r := range got {
			if byKey[r.Key] == nil || seen[r.Key] {
				h.Errorf("List(Limit %d) returned %s (unknown, expired or twice)", limit, r.Key)
			}
			seen[r.Key] = true
		}
	}
	if got := h.list(ledger.Filter{State: ledger.StatePending, Limit: 10}); len(got) != 2 {
		h.Errorf("List(pending, Limit 10) returned %d records, want 2", len(got))
	}
}

func testListDefaultLimit(h *h) {
	const n = 120
	for i := range n {
		h.mustClaim(h.params(fmt.Sprintf("k-many-%03d", i), "owner-a"))
	}
	got := h.list(ledger.Filter{})
	if len(got) < 100 || len(got) > n {
		h.Errorf("List with Limit 0 over %d records returned %d, want at least 100", n, len(got))
	}
}

// testListCounters: the counter records (run ledger.CountersRun, which a
// store may index apart) are listed by run, state and time like any
// run's, in the order of Cursor, and apart from the actions settled
// between them.
func testListCounters(h *h) {
	var want []string
	for i := range 6 {
		key := fmt.Sprintf("c%d", i)
		p := h.params(key, "owner-"+key)
		if i%2 == 0 {
			p.Tool, p.RunID, p.Fingerprint = ledger.CountersRun, ledger.CountersRun, ledger.CountersRun
		}
		h.mustClaim(p)
		h.complete(key, p.Owner, ledger.Completion{Summary: "n", Result: []byte(`{"tool":"t"}`)})
		if i%2 == 0 && i > 0 {
			want = append(want, key)
		}
		h.clock.Advance(time.Second)
	}
	first := h.get("c0")
	for _, f := range []ledger.Filter{
		{State: ledger.StateDone, RunID: ledger.CountersRun, After: ledger.CursorOf(first)},
		{State: ledger.StateDone, RunID: ledger.CountersRun, After: ledger.Cursor{LeaseUntil: first.LeaseUntil.Add(time.Millisecond)}, LeaseBefore: h.clock.Now()},
	} {
		var keys []string
		for _, r := range h.list(f) {
			keys = append(keys, r.Key)
		}
		if !slices.Equal(keys, want) {
			h.Errorf("List(%+v) = %v, want %v in order", f, keys, want)
		}
	}
}
