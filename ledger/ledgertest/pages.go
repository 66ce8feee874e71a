package ledgertest

import (
	"fmt"
	"slices"
	"time"

	"github.com/oncely/oncely/ledger"
)

// pagesLedger writes 60 records: 20 pending (10 of them sharing one lease
// end, so that keys break the tie), 20 done, 10 failed and 10 uncertain,
// over two runs, settled at different times. It returns the keys by
// state.
func pagesLedger(h *h) map[ledger.State][]string {
	byState := map[ledger.State][]string{}
	for i := range 60 {
		key := fmt.Sprintf("page-%02d", (i*37)%60) // keys out of lease order
		p := h.params(key, "owner-"+key)
		p.RunID = []string{"run-a", "run-b"}[i%2]
		if i < 10 {
			p.LeaseUntil = t0.Add(time.Minute) // a tie
		} else {
			p.LeaseUntil = t0.Add(time.Duration(i) * time.Second)
		}
		h.mustClaim(p)
		state := ledger.StatePending
		switch {
		case i >= 40 && i%2 == 0:
			h.complete(key, p.Owner, ledger.Completion{Summary: "ok"})
			state = ledger.StateDone
		case i >= 40 && i%4 == 1:
			h.fail(key, p.Owner, ledger.Failure{Definite: true, Reason: "no"})
			state = ledger.StateFailed
		case i >= 40:
			h.fail(key, p.Owner, ledger.Failure{Reason: "maybe"})
			state = ledger.StateUncertain
		case i >= 20 && i%2 == 0:
			h.complete(key, p.Owner, ledger.Completion{Summary: "ok"})
			state = ledger.StateDone
		}
		byState[state] = append(byState[state], key)
		h.clock.Advance(7 * time.Millisecond)
	}
	return byState
}

// walk pages through f with pages of limit records, calling between(n)
// after the n-th page. It fails the test unless the positions it sees
// strictly ascend (so no record comes twice at one position) and every page
// but the last is full.
func (h *h) walk(f ledger.Filter, limit int, between func(page int)) []ledger.Record {
	h.Helper()
	f.Limit = limit
	var all []ledger.Record
	for page := 1; ; page++ {
		got := h.list(f)
		for i := range got {
			if !f.After.Before(&got[i]) {
				h.Fatalf("List(%+v) page %d: record %s at %s is not after the cursor %s at %s",
					f, page, got[i].Key, got[i].LeaseUntil, f.After.Key, f.After.LeaseUntil)
			}
			f.After = ledger.CursorOf(&got[i])
		}
		all = append(all, got...)
		if len(got) < limit {
			return all
		}
		if page > 1000 {
			h.Fatalf("List(%+v): more than 1000 pages", f)
		}
		if between != nil {
			between(page)
		}
	}
}

func keysOf(recs []ledger.Record) []string {
	keys := make([]string, len(recs))
	for i := range recs {
		keys[i] = recs[i].Key
	}
	return keys
}

// testListPages: keyset pagination in (LeaseUntil, Key) order returns every
// record a filter selects exactly once, ties in LeaseUntil included.
func testListPages(h *h) {
	byState := pagesLedger(h)
	every := slices.Concat(byState[ledger.StatePending], byState[ledger.StateDone],
		byState[ledger.StateFailed], byState[ledger.StateUncertain])
	one := h.list(ledger.Filter{Limit: 100})
	if !slices.IsSortedFunc(one, func(a, b ledger.Record) int { return ledger.CursorOf(&a).Compare(ledger.CursorOf(&b)) }) {
		h.Errorf("List(Limit 100) is not in (LeaseUntil, Key) order: %v", keysOf(one))
	}
	for _, tc := range []struct {
		f    ledger.Filter
		want []string
	}{
		{ledger.Filter{}, every},
		{ledger.Filter{State: ledger.StatePending}, byState[ledger.StatePending]},
		{ledger.Filter{State: ledger.StateDone}, byState[ledger.StateDone]},
		{ledger.Filter{State: ledger.StateFailed}, byState[ledger.StateFailed]},
		{ledger.Filter{State: ledger.StateUncertain}, byState[ledger.StateUncertain]},
		{ledger.Filter{State: ledger.StatePending, LeaseBefore: t0.Add(time.Minute + time.Millisecond)},
			byState[ledger.StatePending]},
		{ledger.Filter{State: ledger.StatePending, LeaseBefore: t0.Add(time.Minute)}, // ties excluded
			byState[ledger.StatePending][10:]},
	} {
		for _, limit := range []int{1, 3, 7, 100} {
			got := keysOf(h.walk(tc.f, limit, nil))
			if len(got) != len(tc.want) {
				h.Errorf("walk %+v in pages of %d: %d records, want %d", tc.f, limit, len(got), len(tc.want))
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if !slices.Equal(got, want) {
				h.Errorf("walk %+v in pages of %d = %v, want %v", tc.f, limit, got, want)
			}
		}
	}
	var runA []string
	for _, r := range h.walk(ledger.Filter{RunID: "run-a"}, 4, nil) {
		if r.RunID != "run-a" {
			h.Errorf("walk of run-a returned %s of %s", r.Key, r.RunID)
		}
		runA = append(runA, r.Key)
	}
	if len(runA) != 30 {
		h.Errorf("walk of run-a returned %d records, want 30", len(runA))
	}
}

// testListPagesWhileWriting: while a walk goes on, other callers claim new
// records, settle pending ones and renew leases. Every record that exists
// unchanged for the whole walk is returned exactly once, and no record
// twice at one position.
func testListPagesWhileWriting(h *h) {
	byState := pagesLedger(h)
	pending := byState[ledger.StatePending]
	for _, f := range []ledger.Filter{{}, {State: ledger.StatePending}, {State: ledger.StateUncertain}} {
		unchanged := map[string]*ledger.Record{}
		for _, r := range h.walk(f, 1000, nil) {
			unchanged[r.Key] = &r
		}
		changed := map[string]bool{}
		n := 0
		got := h.walk(f, 4, func(page int) {
			h.clock.Advance(time.Millisecond)
			// A new record, sorting before and after the walk's position.
			for _, lease := range []time.Time{t0.Add(-time.Hour), h.clock.Now().Add(time.Hour)} {
				n++
				p := h.params(fmt.Sprintf("new-%s-%03d", f.State, n), "o")
				p.LeaseUntil = lease
				h.mustClaim(p)
				if page%2 == 0 {
					h.fail(p.Key, "o", ledger.Failure{Reason: "maybe"})
				}
			}
			// A pending record settles or renews its lease: it moves.
			if page <= len(pending) {
				key := pending[len(pending)-page]
				if _, ok := unchanged[key]; ok && !changed[key] {
					changed[key] = true
					if page%2 == 0 {
						h.complete(key, "owner-"+key, ledger.Completion{Summary: "late"})
					} else if err := h.s.Extend(h.ctx, key, "owner-"+key, h.clock.Now().Add(2*time.Hour)); err != nil {
						h.Fatalf("Extend(%s): %v", key, err)
					}
				}
			}
		})
		seen := map[string]int{}
		for _, r := range got {
			seen[r.Key]++
		}
		for key := range unchanged {
			if !changed[key] && seen[key] != 1 {
				h.Errorf("walk %+v while writing returned unchanged record %s %d times, want once", f, key, seen[key])
			}
		}
		if len(changed) == 0 && f.State != ledger.StateUncertain {
			h.Errorf("walk %+v: the test changed no record while walking", f)
		}
	}
}
