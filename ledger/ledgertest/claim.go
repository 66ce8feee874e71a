package ledgertest

import (
	"fmt"
	"time"

	"github.com/oncely/oncely/ledger"
)

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

	// The repeat comes after the record's lease has lapsed on the store's
	// clock (a retry after a lost reply, late): the record is still the
	// claim's own, not one to take over from itself (issue 42: a Store that
	// took it over reported the claim itself as the previous attempt).
	l := h.params("k-repeat-own-lapsed", "owner-a")
	at := h.clock.Now()
	h.mustClaim(l)
	lapsed := pendingRecord(l, 1, at, at)
	h.clock.Advance(lease + time.Second)
	res, err = h.s.Claim(h.ctx, l)
	if err != nil || !res.Claimed || res.Attempt != 1 || res.Previous != nil || res.MustReconcile() {
		h.Errorf("repeated claim after its own lease lapsed = %+v (previous %+v), %v; want claimed, attempt 1, Previous nil",
			res, res.Previous, err)
	}
	h.unchanged("after a repeated claim past its lease", lapsed)
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
