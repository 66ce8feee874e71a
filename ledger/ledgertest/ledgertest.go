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
	"context"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
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

// cases are the subtests, by name. They live in files by area: claim.go
// (claims, takeovers, attempts), concurrency.go, settle.go (writes fenced
// by the owner), retention.go (expiry and purge), list.go and pages.go,
// limits.go (sizes, invalid input, cancelled contexts) and resolve.go;
// harness.go holds what they share.
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
	{"ClaimOwnerExited", testClaimOwnerExited},
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
	{"ListCounters", testListCounters},
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
