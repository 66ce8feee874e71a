// Package ledgertest is the conformance suite every ledger.Store must pass.
//
// A backend's test calls Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
//			return mystore.New(..., &mystore.Config{Clock: clock})
//		})
//	}
//
// Each subtest gets a fresh, empty store built on its own Clock, and runs in
// parallel with the others. When the store has a Close method (Close() or
// Close() error) the suite closes it at the end of the subtest; the
// constructor must not close it itself.
//
// What the suite requires beyond the ledger.Store documentation:
//
//   - Times come back at millisecond precision and compare equal with
//     time.Equal to what was written (their location does not matter).
//     ExpiresAt may be truncated to whole seconds; the suite only writes
//     whole-second expiries.
//   - The boundaries of ledger.Record.Expired and LeaseExpired hold exactly:
//     a settled record is absent from the instant its ExpiresAt is reached,
//     and a pending claim lapses at the instant of its LeaseUntil.
//   - A pending record never expires. Its retention running out changes
//     nothing: with a live lease it blocks claims; with a lapsed one a claim
//     with the same fingerprint takes it over and gets it in Previous
//     (ClaimResult.MustReconcile), and Get, List and Purge keep it.
//   - Extend raises ExpiresAt to at least the new lease end (a store that
//     keeps whole seconds rounds up, at most one second), and never lowers
//     it.
//   - A claim over an expired record behaves as over an absent one: Claimed,
//     Previous nil, Attempt at least 1 (resetting it to 1 or keeping the old
//     number are both accepted).
//   - ledger.Resolve works on the store: it settles uncertain and abandoned
//     pending records, refuses the others, and loses to a claim that comes
//     between its read and its claim.
//   - A claim that takes over a failed record stores the new claim's
//     fingerprint, owner, lease and expiry and keeps the attempt number.
//   - Record.AttemptAt is either zero in every record (not tracked) or
//     exact: the time of the first claim, reset by a definite failure, kept
//     by every other write, and reported in Previous on a takeover.
//   - Complete, Fail and Extend with an empty key or owner, Extend with a
//     zero time, and Get with an empty key return an error wrapping
//     ledger.ErrInvalid.
//   - A call with a cancelled context returns an error wrapping
//     context.Canceled and writes nothing.
//   - A claim that is not claimed returns the stored record, every field
//     of it (the Result of a done record included), in Previous.
//   - Concurrent claims (64 goroutines on one key, 32 on a takeover) all
//     return without error: a backend that throttles retries internally.
//   - List returns records in (LeaseUntil, Key) order, after Filter.After;
//     Limit 0 returns at least 100. Paging with the cursor of each page's
//     last record returns every record a filter selects once, ties in
//     LeaseUntil included, also while other records are written.
//   - Result slices are not aliased: changing a slice passed to Complete or
//     returned by Get, List or Claim does not change the stored record.
//   - Purge (when the store is a ledger.Purger) deletes exactly the records
//     expired at the given time, that is whose ExpiresAt is not after it.
//     Stores that are not Purgers must hide expired records from Get and
//     List instead (the Purge subtest checks that).
package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/ledger"
)

// t0 is where every subtest's clock starts.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// Default claim parameters relative to the clock.
const (
	lease     = 30 * time.Second
	retention = 24 * time.Hour
)

// Run runs the conformance suite against the stores newStore returns. Each
// call of newStore must return a new, empty store that reads time from
// clock.
func Run(t *testing.T, newStore func(t *testing.T, clock clock.Clock) ledger.Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := clock.NewFake(t0)
			s := newStore(t, clock)
			if s == nil {
				t.Fatal("newStore returned nil")
			}
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
			c.fn(&h{T: t, s: s, clock: clock, ctx: context.Background()})
		})
	}
}

var cases = []struct {
	name string
	fn   func(*h)
}{
	{"ClaimAbsent", testClaimAbsent},
	{"ClaimRepeatPending", testClaimRepeatPending},
	{"ClaimRepeatOwn", testClaimRepeatOwn},
	{"SettledRetention", testSettledRetention},
	{"ClaimRepeatDone", testClaimRepeatDone},
	{"ConcurrentClaims", testConcurrentClaims},
	{"ConcurrentTakeovers", testConcurrentTakeovers},
	{"WrongOwner", testWrongOwner},
	{"SettledIsFinal", testSettledIsFinal},
	{"AbsentKeyNotOwner", testAbsentKeyNotOwner},
	{"TakeoverAfterLease", testTakeoverAfterLease},
	{"FailedClaimable", testFailedClaimable},
	{"UncertainClaimable", testUncertainClaimable},
	{"AbandonedOtherFingerprint", testAbandonedOtherFingerprint},
	{"AttemptNumbers", testAttemptNumbers},
	{"CompleteStores", testCompleteStores},
	{"NoAliasing", testNoAliasing},
	{"Extend", testExtend},
	{"Expiry", testExpiry},
	{"Purge", testPurge},
	{"List", testList},
	{"ListDefaultLimit", testListDefaultLimit},
	{"ListPages", testListPages},
	{"ListPagesWhileWriting", testListPagesWhileWriting},
	{"TooLarge", testTooLarge},
	{"Invalid", testInvalid},
	{"CancelledContext", testCancelledContext},
	{"RenewedClaimOutlivesRetention", testRenewedClaimOutlivesRetention},
	{"ExtendRaisesExpiry", testExtendRaisesExpiry},
	{"AbandonedPastRetention", testAbandonedPastRetention},
	{"ResolveSettles", testResolveSettles},
	{"ResolveRefuses", testResolveRefuses},
	{"ResolveLosesToClaim", testResolveLosesToClaim},
}

// h is one subtest's harness.
type h struct {
	*testing.T
	s     ledger.Store
	clock *clock.Fake
	ctx   context.Context
	// tracksAttemptAt: whether the store keeps Record.AttemptAt (the
	// contract lets it leave it zero); 0 until the first record is checked.
	tracksAttemptAt int
}

// params returns claim parameters for key and owner with the default tool,
// run, fingerprint, lease and retention.
func (h *h) params(key, owner string) ledger.ClaimParams {
	now := h.clock.Now()
	return ledger.ClaimParams{
		Key:         key,
		Tool:        "send_reply",
		RunID:       "run-1",
		Owner:       owner,
		LeaseUntil:  now.Add(lease),
		Fingerprint: "fp-1",
		ExpiresAt:   now.Add(retention),
	}
}

func (h *h) claim(p ledger.ClaimParams) ledger.ClaimResult {
	h.Helper()
	res, err := h.s.Claim(h.ctx, p)
	if err != nil {
		h.Fatalf("Claim(%s, owner %s): %v", p.Key, p.Owner, err)
	}
	return res
}

// mustClaim claims and fails the test unless the claim succeeded.
func (h *h) mustClaim(p ledger.ClaimParams) ledger.ClaimResult {
	h.Helper()
	res := h.claim(p)
	if !res.Claimed {
		h.Fatalf("Claim(%s, owner %s): not claimed, previous %+v", p.Key, p.Owner, res.Previous)
	}
	return res
}

// mustNotClaim claims and fails the test if the claim succeeded. It returns
// the blocking record.
func (h *h) mustNotClaim(p ledger.ClaimParams) *ledger.Record {
	h.Helper()
	res := h.claim(p)
	if res.Claimed {
		h.Fatalf("Claim(%s, owner %s): claimed (attempt %d, previous %+v), want blocked", p.Key, p.Owner, res.Attempt, res.Previous)
	}
	if res.Previous == nil {
		h.Fatalf("Claim(%s, owner %s): not claimed and no Previous record", p.Key, p.Owner)
	}
	return res.Previous
}

func (h *h) get(key string) *ledger.Record {
	h.Helper()
	r, err := h.s.Get(h.ctx, key)
	if err != nil {
		h.Fatalf("Get(%s): %v", key, err)
	}
	if r == nil {
		h.Fatalf("Get(%s): nil record and nil error", key)
	}
	return r
}

func (h *h) absent(key string) {
	h.Helper()
	r, err := h.s.Get(h.ctx, key)
	if !errors.Is(err, ledger.ErrNotFound) {
		h.Fatalf("Get(%s) = %+v, %v; want ledger.ErrNotFound", key, r, err)
	}
}

func (h *h) complete(key, owner string, c ledger.Completion) {
	h.Helper()
	if err := h.s.Complete(h.ctx, key, owner, c); err != nil {
		h.Fatalf("Complete(%s, %s): %v", key, owner, err)
	}
}

func (h *h) fail(key, owner string, f ledger.Failure) {
	h.Helper()
	if err := h.s.Fail(h.ctx, key, owner, f); err != nil {
		h.Fatalf("Fail(%s, %s, %+v): %v", key, owner, f, err)
	}
}

func (h *h) list(f ledger.Filter) []ledger.Record {
	h.Helper()
	rs, err := h.s.List(h.ctx, f)
	if err != nil {
		h.Fatalf("List(%+v): %v", f, err)
	}
	return rs
}

// wantErr fails unless err wraps target.
func (h *h) wantErr(what string, err, target error) {
	h.Helper()
	if !errors.Is(err, target) {
		h.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

// same fails unless got equals want field by field.
func (h *h) same(what string, got, want *ledger.Record) {
	h.Helper()
	d := diff(got, want)
	if got != nil && want != nil {
		if a := h.diffAttemptAt(got.AttemptAt, want.AttemptAt); a != "" {
			d = append(d, a)
		}
	}
	if len(d) > 0 {
		h.Errorf("%s: record differs: %s", what, strings.Join(d, "; "))
	}
}

// diffAttemptAt compares AttemptAt: a store either leaves it zero in every
// record or keeps it exactly.
func (h *h) diffAttemptAt(got, want time.Time) string {
	tracked := !got.IsZero()
	switch {
	case h.tracksAttemptAt == 0 && tracked:
		h.tracksAttemptAt = 1
	case h.tracksAttemptAt == 0:
		h.tracksAttemptAt = -1
	case tracked != (h.tracksAttemptAt == 1):
		return fmt.Sprintf("AttemptAt = %v, but other records of this store do (not) carry it", got)
	}
	if tracked && !got.Equal(want) {
		return fmt.Sprintf("AttemptAt = %v, want %v", got, want)
	}
	return ""
}

// attemptAt fails unless r carries the attempt time want.
func (h *h) attemptAt(what string, r *ledger.Record, want time.Time) {
	h.Helper()
	if d := h.diffAttemptAt(r.AttemptAt, want); d != "" {
		h.Errorf("%s: %s", what, d)
	}
}

// unchanged fails unless the stored record under want.Key equals want.
func (h *h) unchanged(what string, want *ledger.Record) {
	h.Helper()
	h.same(what+": stored record", h.get(want.Key), want)
}

// diff lists how got differs from want, AttemptAt aside. Times compare
// with time.Equal; ExpiresAt at whole seconds; nil and empty results are
// equal.
func diff(got, want *ledger.Record) []string {
	if got == nil || want == nil {
		if got == want {
			return nil
		}
		return []string{fmt.Sprintf("got %+v, want %+v", got, want)}
	}
	var d []string
	field := func(name string, ok bool, g, w any) {
		if !ok {
			d = append(d, fmt.Sprintf("%s = %v, want %v", name, g, w))
		}
	}
	field("Key", got.Key == want.Key, got.Key, want.Key)
	field("Tool", got.Tool == want.Tool, got.Tool, want.Tool)
	field("RunID", got.RunID == want.RunID, got.RunID, want.RunID)
	field("State", got.State == want.State, got.State, want.State)
	field("Owner", got.Owner == want.Owner, got.Owner, want.Owner)
	field("LeaseUntil", got.LeaseUntil.Equal(want.LeaseUntil), got.LeaseUntil, want.LeaseUntil)
	// An uncertain record never expires, and a store may keep no expiry
	// for it (DynamoDB drops its TTL attribute).
	field("ExpiresAt", got.ExpiresAt.Truncate(time.Second).Equal(want.ExpiresAt.Truncate(time.Second)) ||
		got.State == ledger.StateUncertain && got.ExpiresAt.IsZero(), got.ExpiresAt, want.ExpiresAt)
	field("Fingerprint", got.Fingerprint == want.Fingerprint, got.Fingerprint, want.Fingerprint)
	field("Attempt", got.Attempt == want.Attempt, got.Attempt, want.Attempt)
	field("Summary", got.Summary == want.Summary, short(got.Summary), short(want.Summary))
	field("Ref", got.Ref == want.Ref, short(got.Ref), short(want.Ref))
	field("Result", bytes.Equal(got.Result, want.Result), short(string(got.Result)), short(string(want.Result)))
	field("Truncated", got.Truncated == want.Truncated, got.Truncated, want.Truncated)
	field("Reason", got.Reason == want.Reason, short(got.Reason), short(want.Reason))
	field("UpdatedAt", got.UpdatedAt.Equal(want.UpdatedAt), got.UpdatedAt, want.UpdatedAt)
	return d
}

func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", s[:40], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// pendingRecord is the record a claim with p at now should store.
func pendingRecord(p ledger.ClaimParams, attempt int, attemptAt, now time.Time) *ledger.Record {
	return &ledger.Record{
		Key: p.Key, Tool: p.Tool, RunID: p.RunID, State: ledger.StatePending, Owner: p.Owner,
		LeaseUntil: p.LeaseUntil, ExpiresAt: p.ExpiresAt, Fingerprint: p.Fingerprint,
		Attempt: attempt, AttemptAt: attemptAt, UpdatedAt: now,
	}
}

func testClaimAbsent(h *h) {
	p := h.params("k-absent", "owner-a")
	res := h.mustClaim(p)
	if res.Attempt != 1 || res.Previous != nil || res.MustReconcile() {
		h.Errorf("Claim on an absent key = %+v, want Attempt 1, Previous nil", res)
	}
	h.same("Get after claim", h.get(p.Key), pendingRecord(p, 1, t0, t0))
}

func testClaimRepeatPending(h *h) {
	p := h.params("k-repeat", "owner-a")
	h.mustClaim(p)
	want := pendingRecord(p, 1, t0, t0)
	h.clock.Advance(time.Second)

	for _, q := range []ledger.ClaimParams{
		{Key: p.Key, Tool: p.Tool, RunID: p.RunID, Owner: "owner-b", LeaseUntil: h.clock.Now().Add(lease), Fingerprint: p.Fingerprint, ExpiresAt: h.clock.Now().Add(retention)},
		{Key: p.Key, Tool: p.Tool, RunID: "run-2", Owner: "owner-c", LeaseUntil: h.clock.Now().Add(lease), Fingerprint: "fp-other", ExpiresAt: h.clock.Now().Add(retention)},
	} {
		prev := h.mustNotClaim(q)
		h.same("Previous of a repeat claim by "+q.Owner, prev, want)
	}
	h.unchanged("after repeats", want)
}

// A claim is safe to repeat with the same owner token (a driver's retry, a
// reply lost after the write applied): the repeat has claimed the record,
// changes nothing, and reports what the record proves of the first
// delivery (ledger.Reclaimed).
func testClaimRepeatOwn(h *h) {
	// The first delivery created the record: nothing to reconcile.
	p := h.params("k-repeat-own", "owner-a")
	h.mustClaim(p)
	want := pendingRecord(p, 1, t0, t0)
	h.clock.Advance(time.Second)
	res, err := h.s.Claim(h.ctx, p)
	if err != nil || !res.Claimed || res.Attempt != 1 || res.Previous != nil || res.MustReconcile() {
		h.Errorf("repeated claim of a record it created = %+v, %v; want claimed, attempt 1, Previous nil", res, err)
	}
	h.unchanged("after a repeated claim", want)

	// The first delivery took over an uncertain record: the repeat must
	// reconcile, up to the time of the takeover.
	q := h.params("k-repeat-own-over", "owner-a")
	h.mustClaim(q)
	h.fail(q.Key, q.Owner, ledger.Failure{Reason: "timeout"})
	h.clock.Advance(time.Second)
	takeover := h.clock.Now()
	q.Owner, q.LeaseUntil, q.ExpiresAt = "owner-b", takeover.Add(lease), takeover.Add(retention)
	if first := h.mustClaim(q); !first.MustReconcile() {
		h.Fatalf("takeover of an uncertain record = %+v, want MustReconcile", first)
	}
	h.clock.Advance(time.Second)
	res, err = h.s.Claim(h.ctx, q)
	if err != nil || !res.Claimed || !res.MustReconcile() || res.Previous.State != ledger.StateUncertain ||
		!res.Previous.LeaseUntil.Equal(takeover) || res.Attempt != 1 {
		h.Errorf("repeated takeover = %+v (previous %+v), %v; want claimed, MustReconcile, an uncertain Previous sent by %v",
			res, res.Previous, err, takeover)
	}
	if got := h.get(q.Key); got.Owner != "owner-b" || got.State != ledger.StatePending || !got.UpdatedAt.Equal(takeover) {
		h.Errorf("record after a repeated takeover = %+v, want it as the takeover left it", got)
	}

	// The first delivery took over a failed record: it began the next
	// attempt, which nobody else held, so nothing to reconcile.
	f := h.params("k-repeat-own-failed", "owner-a")
	h.clock.Advance(time.Second)
	f.LeaseUntil, f.ExpiresAt = h.clock.Now().Add(lease), h.clock.Now().Add(retention)
	h.mustClaim(f)
	h.fail(f.Key, f.Owner, ledger.Failure{Definite: true, Reason: "declined"})
	h.clock.Advance(time.Second)
	f.Owner, f.LeaseUntil, f.ExpiresAt = "owner-b", h.clock.Now().Add(lease), h.clock.Now().Add(retention)
	h.mustClaim(f)
	h.clock.Advance(time.Second)
	res, err = h.s.Claim(h.ctx, f)
	if err != nil || !res.Claimed || res.MustReconcile() || res.Attempt != 2 {
		h.Errorf("repeated takeover of a failed record = %+v, %v; want claimed, attempt 2, no reconcile", res, err)
	}
}

func testClaimRepeatDone(h *h) {
	p := h.params("k-done", "owner-a")
	h.mustClaim(p)
	h.clock.Advance(2 * time.Second)
	h.complete(p.Key, p.Owner, ledger.Completion{Summary: "sent reply 7", Ref: "msg_7", Result: []byte(`{"id":"msg_7"}`), Truncated: true})
	want := h.get(p.Key)

	h.clock.Advance(time.Hour) // the lease of the first claim is long over
	for _, fp := range []string{p.Fingerprint, "fp-other"} {
		q := h.params(p.Key, "owner-b")
		q.Fingerprint = fp
		res := h.claim(q)
		if res.Claimed || res.MustReconcile() {
			h.Fatalf("Claim on a done record with fingerprint %s = %+v, want not claimed", fp, res)
		}
		h.same("Previous of a claim on a done record", res.Previous, want)
	}
	h.unchanged("after repeats", want)
}

func testConcurrentClaims(h *h) {
	const goroutines, rounds = 64, 20
	for round := range rounds {
		key := fmt.Sprintf("k-race-%d", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]ledger.ClaimResult, goroutines)
			errs    = make([]error, goroutines)
		)
		for i := range goroutines {
			wg.Go(func() {
				<-start
				results[i], errs[i] = h.s.Claim(h.ctx, h.params(key, fmt.Sprintf("owner-%d", i)))
			})
		}
		close(start)
		wg.Wait()
		checkOneWinner(h, key, results, errs)
	}
}

// checkOneWinner checks that exactly one of the racing claims on key won and
// that every loser was shown the winner's pending record.
func checkOneWinner(h *h, key string, results []ledger.ClaimResult, errs []error) {
	h.Helper()
	winner := ""
	for i, res := range results {
		switch {
		case errs[i] != nil:
			h.Errorf("%s: claim by owner-%d: %v", key, i, errs[i])
		case res.Claimed && winner != "":
			h.Errorf("%s: two winners: %s and owner-%d", key, winner, i)
		case res.Claimed:
			winner = fmt.Sprintf("owner-%d", i)
		}
	}
	if winner == "" {
		h.Fatalf("%s: no claim won", key)
	}
	rec := h.get(key)
	if rec.Owner != winner || rec.State != ledger.StatePending {
		h.Errorf("%s: stored owner %s state %s, want %s pending", key, rec.Owner, rec.State, winner)
	}
	for i, res := range results {
		if errs[i] == nil && !res.Claimed && (res.Previous == nil || res.Previous.Owner != winner || res.Previous.State != ledger.StatePending) {
			h.Errorf("%s: losing claim by owner-%d saw %+v, want the winner's pending record", key, i, res.Previous)
		}
	}
}

func testConcurrentTakeovers(h *h) {
	const goroutines, rounds = 32, 6
	for round := range rounds {
		key := fmt.Sprintf("k-takeover-%d", round)
		first := h.params(key, "first")
		h.mustClaim(first)
		// Alternate between a failed record and an abandoned pending one.
		if round%2 == 0 {
			h.fail(key, first.Owner, ledger.Failure{Definite: true, Reason: "declined"})
		} else {
			h.clock.Advance(lease)
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]ledger.ClaimResult, goroutines)
			errs    = make([]error, goroutines)
		)
		for i := range goroutines {
			wg.Go(func() {
				<-start
				results[i], errs[i] = h.s.Claim(h.ctx, h.params(key, fmt.Sprintf("owner-%d", i)))
			})
		}
		close(start)
		wg.Wait()
		checkOneWinner(h, key, results, errs)
		for i, res := range results {
			if res.Claimed && (res.Previous == nil || res.Previous.Owner != first.Owner) {
				h.Errorf("%s: winning takeover by owner-%d reported previous %+v, want the record of %s", key, i, res.Previous, first.Owner)
			}
		}
	}
}

func testWrongOwner(h *h) {
	p := h.params("k-wrong-owner", "owner-a")
	h.mustClaim(p)
	want := pendingRecord(p, 1, t0, t0)
	h.clock.Advance(time.Second)
	h.wantErr("Complete by another owner", h.s.Complete(h.ctx, p.Key, "owner-b", ledger.Completion{Summary: "x"}), ledger.ErrNotOwner)
	h.wantErr("Fail(definite) by another owner", h.s.Fail(h.ctx, p.Key, "owner-b", ledger.Failure{Definite: true, Reason: "x"}), ledger.ErrNotOwner)
	h.wantErr("Fail(ambiguous) by another owner", h.s.Fail(h.ctx, p.Key, "owner-b", ledger.Failure{Reason: "x"}), ledger.ErrNotOwner)
	h.wantErr("Extend by another owner", h.s.Extend(h.ctx, p.Key, "owner-b", h.clock.Now().Add(time.Hour)), ledger.ErrNotOwner)
	h.unchanged("after writes by another owner", want)
}

func testSettledIsFinal(h *h) {
	for _, settle := range []struct {
		name string
		fn   func(key, owner string)
	}{
		{"done", func(key, owner string) { h.complete(key, owner, ledger.Completion{Summary: "ok", Ref: "r1"}) }},
		{"failed", func(key, owner string) { h.fail(key, owner, ledger.Failure{Definite: true, Reason: "declined"}) }},
		{"uncertain", func(key, owner string) { h.fail(key, owner, ledger.Failure{Reason: "timeout"}) }},
	} {
		p := h.params("k-settled-"+settle.name, "owner-a")
		h.mustClaim(p)
		h.clock.Advance(time.Second)
		settle.fn(p.Key, p.Owner)
		want := h.get(p.Key)
		h.clock.Advance(time.Second)
		h.wantErr("Complete on a "+settle.name+" record", h.s.Complete(h.ctx, p.Key, p.Owner, ledger.Completion{Summary: "again"}), ledger.ErrNotOwner)
		h.wantErr("Fail(definite) on a "+settle.name+" record", h.s.Fail(h.ctx, p.Key, p.Owner, ledger.Failure{Definite: true, Reason: "again"}), ledger.ErrNotOwner)
		h.wantErr("Fail(ambiguous) on a "+settle.name+" record", h.s.Fail(h.ctx, p.Key, p.Owner, ledger.Failure{Reason: "again"}), ledger.ErrNotOwner)
		h.wantErr("Extend on a "+settle.name+" record", h.s.Extend(h.ctx, p.Key, p.Owner, h.clock.Now().Add(time.Hour)), ledger.ErrNotOwner)
		h.unchanged("after writes on a "+settle.name+" record", want)
	}
}

func testAbsentKeyNotOwner(h *h) {
	h.wantErr("Complete on an absent key", h.s.Complete(h.ctx, "k-none", "owner-a", ledger.Completion{Summary: "x"}), ledger.ErrNotOwner)
	h.wantErr("Fail on an absent key", h.s.Fail(h.ctx, "k-none", "owner-a", ledger.Failure{Definite: true}), ledger.ErrNotOwner)
	h.wantErr("Extend on an absent key", h.s.Extend(h.ctx, "k-none", "owner-a", h.clock.Now().Add(time.Hour)), ledger.ErrNotOwner)
	h.absent("k-none")
}

func testTakeoverAfterLease(h *h) {
	p := h.params("k-takeover", "owner-a")
	h.mustClaim(p)
	abandoned := pendingRecord(p, 1, t0, t0)

	h.clock.Set(p.LeaseUntil.Add(-time.Millisecond))
	q := h.params(p.Key, "owner-b")
	h.same("Previous before the lease lapsed", h.mustNotClaim(q), abandoned)

	h.clock.Set(p.LeaseUntil)
	q = h.params(p.Key, "owner-b")
	res := h.mustClaim(q)
	if res.Attempt != 1 || !res.MustReconcile() {
		h.Errorf("takeover of an abandoned claim = %+v, want Attempt 1 and MustReconcile", res)
	}
	h.same("Previous of a takeover", res.Previous, abandoned)
	h.same("Get after takeover", h.get(p.Key), pendingRecord(q, 1, t0, p.LeaseUntil))

	// The first owner is fenced off; the second one settles.
	h.wantErr("Complete by the old owner", h.s.Complete(h.ctx, p.Key, p.Owner, ledger.Completion{Summary: "late"}), ledger.ErrNotOwner)
	h.wantErr("Fail by the old owner", h.s.Fail(h.ctx, p.Key, p.Owner, ledger.Failure{Reason: "late"}), ledger.ErrNotOwner)
	h.wantErr("Extend by the old owner", h.s.Extend(h.ctx, p.Key, p.Owner, h.clock.Now().Add(time.Hour)), ledger.ErrNotOwner)
	h.complete(p.Key, q.Owner, ledger.Completion{Summary: "done by b"})
	if r := h.get(p.Key); r.State != ledger.StateDone || r.Owner != q.Owner || r.Summary != "done by b" {
		h.Errorf("after the new owner completed: %+v", r)
	}
}

func testFailedClaimable(h *h) {
	p := h.params("k-failed", "owner-a")
	h.mustClaim(p)
	h.clock.Advance(time.Second)
	h.fail(p.Key, p.Owner, ledger.Failure{Definite: true, Reason: "card declined"})
	failed := h.get(p.Key)
	want := pendingRecord(p, 2, t0.Add(time.Second), t0.Add(time.Second))
	want.State, want.LeaseUntil, want.Reason = ledger.StateFailed, t0.Add(time.Second), "card declined"
	h.same("failed record", failed, want)

	// A failed record is taken over even with another fingerprint, at once.
	h.clock.Advance(time.Second)
	q := h.params(p.Key, "owner-b")
	q.Fingerprint, q.RunID = "fp-other", "run-2"
	res := h.mustClaim(q)
	if res.Attempt != 2 || res.MustReconcile() {
		h.Errorf("claim over a failed record = %+v, want Attempt 2 and no reconcile", res)
	}
	h.same("Previous of a claim over a failed record", res.Previous, failed)
	// Its attempt begins with this claim (AttemptAt the claim's time).
	h.same("Get after a claim over a failed record", h.get(p.Key), pendingRecord(q, 2, h.clock.Now(), h.clock.Now()))
}

func testUncertainClaimable(h *h) {
	p := h.params("k-uncertain", "owner-a")
	h.mustClaim(p)
	h.clock.Advance(time.Second)
	h.fail(p.Key, p.Owner, ledger.Failure{Reason: "timeout after send"})
	uncertain := h.get(p.Key)
	want := pendingRecord(p, 1, t0, t0)
	want.State, want.LeaseUntil, want.UpdatedAt, want.Reason = ledger.StateUncertain, t0.Add(time.Second), t0.Add(time.Second), "timeout after send"
	h.same("uncertain record", uncertain, want)

	// Another action under the same key does not take it over.
	h.clock.Advance(time.Second)
	other := h.params(p.Key, "owner-b")
	other.Fingerprint = "fp-other"
	h.same("Previous of a claim with another fingerprint", h.mustNotClaim(other), uncertain)

	q := h.params(p.Key, "owner-c")
	res := h.mustClaim(q)
	if res.Attempt != 1 || !res.MustReconcile() {
		h.Errorf("claim over an uncertain record = %+v, want Attempt 1 and MustReconcile", res)
	}
	h.same("Previous of a claim over an uncertain record", res.Previous, uncertain)
	if r := h.get(p.Key); r.State != ledger.StatePending || r.Owner != q.Owner || r.Attempt != 1 || r.Fingerprint != q.Fingerprint {
		h.Errorf("after the takeover: %+v", r)
	}
}

func testAbandonedOtherFingerprint(h *h) {
	p := h.params("k-abandoned", "owner-a")
	h.mustClaim(p)
	abandoned := pendingRecord(p, 1, t0, t0)
	h.clock.Set(p.LeaseUntil.Add(time.Minute))
	other := h.params(p.Key, "owner-b")
	other.Fingerprint = "fp-other"
	h.same("Previous of a claim with another fingerprint", h.mustNotClaim(other), abandoned)
	h.unchanged("after the refused takeover", abandoned)
}

func testAttemptNumbers(h *h) {
	key := "k-attempts"
	steps := []struct {
		claim   int            // attempt the claim must report
		failure ledger.Failure // how the attempt ends
		after   int            // attempt stored after it
	}{
		{1, ledger.Failure{Definite: true, Reason: "declined"}, 2},
		{2, ledger.Failure{Reason: "timeout"}, 2},
		{2, ledger.Failure{Reason: "reset"}, 2},
		{2, ledger.Failure{Definite: true, Reason: "rejected"}, 3},
	}
	// AttemptAt: when the first claim, the latest definite failure, or the
	// claim after it was.
	attemptAt := h.clock.Now()
	afterFailure := false
	for i, st := range steps {
		p := h.params(key, fmt.Sprintf("owner-%d", i))
		if afterFailure {
			attemptAt = h.clock.Now()
		}
		if res := h.mustClaim(p); res.Attempt != st.claim {
			h.Errorf("step %d: claim Attempt = %d, want %d", i, res.Attempt, st.claim)
		}
		r := h.get(key)
		if r.Attempt != st.claim {
			h.Errorf("step %d: stored Attempt after claim = %d, want %d", i, r.Attempt, st.claim)
		}
		h.attemptAt(fmt.Sprintf("step %d: after claim", i), r, attemptAt)
		h.clock.Advance(time.Second)
		h.fail(key, p.Owner, st.failure)
		if afterFailure = st.failure.Definite; afterFailure {
			attemptAt = h.clock.Now()
		}
		r = h.get(key)
		if r.Attempt != st.after {
			h.Errorf("step %d: stored Attempt after %+v = %d, want %d", i, st.failure, r.Attempt, st.after)
		}
		h.attemptAt(fmt.Sprintf("step %d: after %+v", i, st.failure), r, attemptAt)
		h.clock.Advance(time.Second)
	}
	// A claim over an abandoned pending record keeps the attempt too.
	p := h.params(key, "owner-x")
	attemptAt = h.clock.Now() // the claim over the failed record
	h.mustClaim(p)
	h.clock.Set(p.LeaseUntil)
	res := h.mustClaim(h.params(key, "owner-y"))
	if res.Attempt != 3 {
		h.Errorf("takeover of an abandoned claim: Attempt = %d, want 3", res.Attempt)
	}
	h.attemptAt("takeover of an abandoned claim: Previous", res.Previous, attemptAt)
	h.attemptAt("after the takeover of an abandoned claim", h.get(key), attemptAt)
	h.complete(key, "owner-y", ledger.Completion{Summary: "ok"})
	if r := h.get(key); r.Attempt != 3 || r.State != ledger.StateDone {
		h.Errorf("after completion: state %s attempt %d, want done 3", r.State, r.Attempt)
	}
}

func testCompleteStores(h *h) {
	cases := []ledger.Completion{
		{Summary: "refunded 10.00 EUR", Ref: "re_123", Result: []byte(`{"id":"re_123","amount":1000}`)},
		{Summary: "ok", Truncated: true, Result: []byte{0, 1, 2, 0xff}},
		{},
		{
			Summary:   strings.Repeat("s", ledger.MaxSummaryBytes),
			Ref:       strings.Repeat("r", ledger.MaxRefBytes),
			Result:    bytes.Repeat([]byte{'x'}, ledger.MaxResultBytes),
			Truncated: true,
		},
	}
	for i, c := range cases {
		p := h.params(fmt.Sprintf("k-complete-%d", i), "owner-a")
		p.Fingerprint = fmt.Sprintf("fp-%d", i)
		claimedAt := h.clock.Now()
		h.mustClaim(p)
		h.clock.Advance(1500 * time.Millisecond)
		h.complete(p.Key, p.Owner, c)
		want := pendingRecord(p, 1, claimedAt, h.clock.Now())
		want.State, want.LeaseUntil = ledger.StateDone, h.clock.Now()
		want.Summary, want.Ref, want.Result, want.Truncated = c.Summary, c.Ref, c.Result, c.Truncated
		h.same(fmt.Sprintf("completion %d", i), h.get(p.Key), want)
	}
}

func testNoAliasing(h *h) {
	p := h.params("k-alias", "owner-a")
	h.mustClaim(p)
	in := []byte("payload")
	h.complete(p.Key, p.Owner, ledger.Completion{Summary: "ok", Result: in})
	in[0] = 'X'
	got := h.get(p.Key)
	if string(got.Result) != "payload" {
		h.Fatalf("Result after changing the caller's slice = %q, want %q", got.Result, "payload")
	}
	got.Result[0] = 'Y'
	if r := h.list(ledger.Filter{}); len(r) != 1 || string(r[0].Result) != "payload" {
		h.Fatalf("List after changing a Get result = %+v, want one record with Result %q", r, "payload")
	} else {
		r[0].Result[0] = 'Z'
	}
	prev := h.mustNotClaim(h.params(p.Key, "owner-b"))
	if string(prev.Result) != "payload" {
		h.Fatalf("Claim Previous.Result after changing a List result = %q, want %q", prev.Result, "payload")
	}
	prev.Result[0] = 'W'
	if r := h.get(p.Key); string(r.Result) != "payload" {
		h.Fatalf("Result after changing a Claim result = %q, want %q", r.Result, "payload")
	}
}

func testExtend(h *h) {
	p := h.params("k-extend", "owner-a")
	h.mustClaim(p)
	h.clock.Advance(10 * time.Second)
	newLease := h.clock.Now().Add(time.Minute)
	if err := h.s.Extend(h.ctx, p.Key, p.Owner, newLease); err != nil {
		h.Fatalf("Extend: %v", err)
	}
	want := pendingRecord(p, 1, t0, h.clock.Now())
	want.LeaseUntil = newLease
	h.same("after Extend", h.get(p.Key), want)

	// The old lease has run out, the new one has not.
	h.clock.Set(newLease.Add(-time.Millisecond))
	h.same("Previous of a claim within the extended lease", h.mustNotClaim(h.params(p.Key, "owner-b")), want)
	h.clock.Set(newLease)
	if res := h.mustClaim(h.params(p.Key, "owner-b")); !res.MustReconcile() {
		h.Errorf("takeover after the extended lease = %+v, want MustReconcile", res)
	}
	// Extend by the owner that lost the record.
	h.wantErr("Extend by the old owner", h.s.Extend(h.ctx, p.Key, p.Owner, h.clock.Now().Add(time.Hour)), ledger.ErrNotOwner)
}

func testExpiry(h *h) {
	expires := t0.Add(time.Minute)
	type rec struct {
		key    string
		settle func(key, owner string)
	}
	recs := []rec{
		{"k-exp-done", func(k, o string) { h.complete(k, o, ledger.Completion{Summary: "ok"}) }},
		{"k-exp-failed", func(k, o string) { h.fail(k, o, ledger.Failure{Definite: true, Reason: "no"}) }},
	}
	// An uncertain record never expires: its effect may exist.
	uncertain := h.params("k-exp-uncertain", "owner-a")
	uncertain.LeaseUntil, uncertain.ExpiresAt = expires.Add(-time.Second), expires
	h.mustClaim(uncertain)
	h.fail(uncertain.Key, uncertain.Owner, ledger.Failure{Reason: "maybe"})
	for _, r := range recs {
		p := h.params(r.key, "owner-a")
		p.LeaseUntil, p.ExpiresAt = expires.Add(-time.Second), expires
		h.mustClaim(p)
		r.settle(p.Key, p.Owner)
	}
	h.clock.Set(expires.Add(-time.Millisecond))
	for _, r := range recs {
		h.get(r.key)
	}
	if got := h.list(ledger.Filter{}); len(got) != len(recs)+1 {
		h.Fatalf("List just before expiry: %d records, want %d", len(got), len(recs)+1)
	}

	h.clock.Set(expires)
	for _, r := range recs {
		h.absent(r.key)
	}
	if got := h.list(ledger.Filter{}); len(got) != 1 || got[0].Key != uncertain.Key {
		h.Errorf("List after expiry = %+v, want only the uncertain record", got)
	}
	h.clock.Set(expires.Add(30 * 24 * time.Hour))
	if got := h.get(uncertain.Key); got.State != ledger.StateUncertain {
		h.Errorf("uncertain record a month past its retention = %+v", got)
	}
	if got := h.list(ledger.Filter{State: ledger.StateUncertain}); len(got) != 1 {
		h.Errorf("List of uncertain records a month past the retention = %+v, want the record", got)
	}
	other := h.params(uncertain.Key, "owner-c")
	other.Fingerprint = "fp-other"
	other.LeaseUntil, other.ExpiresAt = h.clock.Now().Add(lease), h.clock.Now().Add(retention)
	if prev := h.mustNotClaim(other); prev.State != ledger.StateUncertain {
		h.Errorf("claim of another action over an old uncertain record: blocked by %+v, want the uncertain record", prev)
	}
	other.Owner, other.Fingerprint = "owner-d", uncertain.Fingerprint
	if res := h.mustClaim(other); !res.MustReconcile() || res.Previous.State != ledger.StateUncertain {
		h.Errorf("claim over an old uncertain record = %+v, want a takeover that reconciles", res)
	}
	h.clock.Set(expires)
	for _, r := range recs {
		q := h.params(r.key, "owner-b")
		q.Fingerprint = "fp-other"
		res := h.mustClaim(q)
		if res.Previous != nil || res.MustReconcile() || res.Attempt < 1 {
			h.Errorf("claim over expired %s = %+v, want Previous nil and Attempt >= 1", r.key, res)
		}
		got := h.get(r.key)
		if got.State != ledger.StatePending || got.Owner != q.Owner || got.Fingerprint != q.Fingerprint || got.Attempt != res.Attempt ||
			!got.ExpiresAt.Truncate(time.Second).Equal(q.ExpiresAt) || !got.LeaseUntil.Equal(q.LeaseUntil) {
			h.Errorf("record after a claim over expired %s = %+v", r.key, got)
		}
	}
}

func testPurge(h *h) {
	pg, ok := h.s.(ledger.Purger)
	if !ok {
		// A store without Purge (DynamoDB deletes through its TTL) must
		// still hide expired records from every read until they are gone.
		p := h.params("k-purge-ttl", "owner-a")
		p.LeaseUntil, p.ExpiresAt = t0.Add(time.Second), t0.Add(10*time.Second)
		h.mustClaim(p)
		h.complete(p.Key, p.Owner, ledger.Completion{Summary: "ok"})
		h.clock.Set(t0.Add(11 * time.Second))
		if _, err := h.s.Get(h.ctx, p.Key); !errors.Is(err, ledger.ErrNotFound) {
			h.Errorf("Get of an expired record without purge: %v, want ErrNotFound", err)
		}
		if recs, err := h.s.List(h.ctx, ledger.Filter{}); err != nil || len(recs) != 0 {
			h.Errorf("List with only an expired record = %v, %v; want none", recs, err)
		}
		return
	}
	for i := 1; i <= 4; i++ {
		p := h.params(fmt.Sprintf("k-purge-%d", i), "owner-a")
		p.LeaseUntil, p.ExpiresAt = t0.Add(time.Second), t0.Add(time.Duration(i)*10*time.Second)
		h.mustClaim(p)
		if i%2 == 0 {
			h.complete(p.Key, p.Owner, ledger.Completion{Summary: "ok"})
		} else {
			h.fail(p.Key, p.Owner, ledger.Failure{Definite: true, Reason: "declined"})
		}
	}
	// Nor is an uncertain record, whatever its retention.
	uncertain := h.params("k-purge-uncertain", "owner-a")
	uncertain.LeaseUntil, uncertain.ExpiresAt = t0.Add(time.Second), t0.Add(5*time.Second)
	h.mustClaim(uncertain)
	h.fail(uncertain.Key, uncertain.Owner, ledger.Failure{Reason: "maybe"})
	// An abandoned claim whose retention has run out is not purged: its
	// effect may exist, and only a takeover that reconciles may drop it.
	abandoned := h.params("k-purge-pending", "owner-a")
	abandoned.LeaseUntil, abandoned.ExpiresAt = t0.Add(time.Second), t0.Add(5*time.Second)
	h.mustClaim(abandoned)
	h.clock.Set(t0.Add(25 * time.Second))
	n, err := pg.Purge(h.ctx, t0.Add(20*time.Second))
	if err != nil || n != 2 {
		h.Fatalf("Purge(t0+20s) = %d, %v; want 2 records (expired at t0+10s and t0+20s; not the pending or uncertain one)", n, err)
	}
	if n, err := pg.Purge(h.ctx, t0.Add(20*time.Second)); err != nil || n != 0 {
		h.Errorf("second Purge(t0+20s) = %d, %v; want 0", n, err)
	}
	// Back before any expiry: purged records are gone, the others are there.
	h.clock.Set(t0)
	h.absent("k-purge-1")
	h.absent("k-purge-2")
	h.get("k-purge-3")
	h.get("k-purge-4")
	h.same("abandoned claim after Purge", h.get(abandoned.Key), pendingRecord(abandoned, 1, t0, t0))
	if got := h.get(uncertain.Key); got.State != ledger.StateUncertain {
		h.Errorf("uncertain record after Purge = %+v", got)
	}
	if got := h.list(ledger.Filter{}); len(got) != 4 {
		h.Errorf("List after Purge: %d records, want 4", len(got))
	}
}

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

func testTooLarge(h *h) {
	long := strings.Repeat("k", ledger.MaxKeyBytes+1)
	for _, mod := range []struct {
		field string
		fn    func(*ledger.ClaimParams)
	}{
		{"Key", func(p *ledger.ClaimParams) { p.Key = long }},
		{"Tool", func(p *ledger.ClaimParams) { p.Tool = long }},
		{"RunID", func(p *ledger.ClaimParams) { p.RunID = long }},
		{"Owner", func(p *ledger.ClaimParams) { p.Owner = long }},
		{"Fingerprint", func(p *ledger.ClaimParams) { p.Fingerprint = long }},
	} {
		p := h.params("k-large-claim", "owner-a")
		mod.fn(&p)
		_, err := h.s.Claim(h.ctx, p)
		h.wantErr("Claim with an oversized "+mod.field, err, ledger.ErrTooLarge)
	}
	if got := h.list(ledger.Filter{}); len(got) != 0 {
		h.Fatalf("oversized claims wrote %d records", len(got))
	}
	// At the limit a key is fine.
	p := h.params(strings.Repeat("k", ledger.MaxKeyBytes), "owner-a")
	h.mustClaim(p)
	want := pendingRecord(p, 1, t0, t0)
	for _, c := range []struct {
		field string
		c     ledger.Completion
	}{
		{"Summary", ledger.Completion{Summary: strings.Repeat("s", ledger.MaxSummaryBytes+1)}},
		{"Ref", ledger.Completion{Ref: strings.Repeat("r", ledger.MaxRefBytes+1)}},
		{"Result", ledger.Completion{Result: make([]byte, ledger.MaxResultBytes+1)}},
	} {
		h.wantErr("Complete with an oversized "+c.field, h.s.Complete(h.ctx, p.Key, p.Owner, c.c), ledger.ErrTooLarge)
	}
	for _, definite := range []bool{true, false} {
		err := h.s.Fail(h.ctx, p.Key, p.Owner, ledger.Failure{Definite: definite, Reason: strings.Repeat("x", ledger.MaxReasonBytes+1)})
		h.wantErr("Fail with an oversized Reason", err, ledger.ErrTooLarge)
	}
	h.unchanged("after oversized writes", want)
}

func testInvalid(h *h) {
	now := h.clock.Now()
	for _, mod := range []struct {
		what string
		fn   func(*ledger.ClaimParams)
	}{
		{"empty key", func(p *ledger.ClaimParams) { p.Key = "" }},
		{"empty owner", func(p *ledger.ClaimParams) { p.Owner = "" }},
		{"zero lease", func(p *ledger.ClaimParams) { p.LeaseUntil = time.Time{} }},
		{"zero expiry", func(p *ledger.ClaimParams) { p.ExpiresAt = time.Time{} }},
		{"expiry at the lease", func(p *ledger.ClaimParams) { p.ExpiresAt = p.LeaseUntil }},
		{"expiry before the lease", func(p *ledger.ClaimParams) { p.ExpiresAt = now }},
	} {
		p := h.params("k-invalid", "owner-a")
		mod.fn(&p)
		_, err := h.s.Claim(h.ctx, p)
		h.wantErr("Claim with "+mod.what, err, ledger.ErrInvalid)
	}
	if got := h.list(ledger.Filter{}); len(got) != 0 {
		h.Fatalf("invalid claims wrote %d records", len(got))
	}

	p := h.params("k-invalid", "owner-a")
	h.mustClaim(p)
	want := pendingRecord(p, 1, t0, t0)
	for _, ko := range [][2]string{{"", p.Owner}, {p.Key, ""}} {
		key, owner := ko[0], ko[1]
		what := fmt.Sprintf("(key %q, owner %q)", short(key), owner)
		h.wantErr("Complete"+what, h.s.Complete(h.ctx, key, owner, ledger.Completion{Summary: "x"}), ledger.ErrInvalid)
		h.wantErr("Fail"+what, h.s.Fail(h.ctx, key, owner, ledger.Failure{Definite: true}), ledger.ErrInvalid)
		h.wantErr("Extend"+what, h.s.Extend(h.ctx, key, owner, now.Add(time.Hour)), ledger.ErrInvalid)
	}
	h.wantErr("Extend to the zero time", h.s.Extend(h.ctx, p.Key, p.Owner, time.Time{}), ledger.ErrInvalid)
	_, err := h.s.Get(h.ctx, "")
	h.wantErr("Get with an empty key", err, ledger.ErrInvalid)
	h.unchanged("after invalid writes", want)
}

func testCancelledContext(h *h) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	p := h.params("k-cancel", "owner-a")
	_, err := h.s.Claim(ctx, p)
	h.wantErr("Claim with a cancelled context", err, context.Canceled)
	h.absent(p.Key)

	h.mustClaim(p)
	want := pendingRecord(p, 1, t0, t0)
	h.clock.Advance(time.Second)
	h.wantErr("Complete with a cancelled context", h.s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "x"}), context.Canceled)
	h.wantErr("Fail with a cancelled context", h.s.Fail(ctx, p.Key, p.Owner, ledger.Failure{Definite: true}), context.Canceled)
	h.wantErr("Extend with a cancelled context", h.s.Extend(ctx, p.Key, p.Owner, h.clock.Now().Add(time.Hour)), context.Canceled)
	_, err = h.s.Claim(ctx, h.params(p.Key, "owner-b"))
	h.wantErr("repeat Claim with a cancelled context", err, context.Canceled)
	_, err = h.s.Get(ctx, p.Key)
	h.wantErr("Get with a cancelled context", err, context.Canceled)
	_, err = h.s.List(ctx, ledger.Filter{})
	h.wantErr("List with a cancelled context", err, context.Canceled)
	if pg, ok := h.s.(ledger.Purger); ok {
		h.clock.Set(p.ExpiresAt)
		_, err = pg.Purge(ctx, p.ExpiresAt)
		h.wantErr("Purge with a cancelled context", err, context.Canceled)
		h.clock.Set(t0.Add(time.Second))
	}
	h.unchanged("after cancelled writes", want)
}

// Complete and Fail (definite) with a Retention keep the settled record
// for that long from the write, so that retention counts from the
// settlement; without it the claim's expiry stays.
func testSettledRetention(h *h) {
	const long = 3 * retention
	for _, c := range []struct {
		key    string
		settle func(key, owner string)
		kept   bool
	}{
		{"k-ret-done", func(k, o string) { h.complete(k, o, ledger.Completion{Summary: "ok", Retention: long}) }, true},
		{"k-ret-failed", func(k, o string) { h.fail(k, o, ledger.Failure{Definite: true, Reason: "no", Retention: long}) }, true},
		{"k-ret-claimed", func(k, o string) { h.complete(k, o, ledger.Completion{Summary: "ok"}) }, false},
	} {
		h.clock.Set(t0)
		p := h.params(c.key, "owner-a")
		h.mustClaim(p)
		h.clock.Advance(time.Hour) // settled an hour after the claim
		settled := h.clock.Now()
		c.settle(p.Key, p.Owner)
		want := p.ExpiresAt
		if c.kept {
			want = settled.Add(long)
		}
		if got := h.get(p.Key); !got.ExpiresAt.Truncate(time.Second).Equal(want.Truncate(time.Second)) {
			h.Errorf("%s: ExpiresAt = %v, want %v", c.key, got.ExpiresAt, want)
		}
		h.clock.Set(p.ExpiresAt.Add(time.Second))
		if c.kept {
			h.get(p.Key) // kept past the claim's expiry
		} else {
			h.absent(p.Key)
		}
	}
}
