package ledgertest

import (
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// A claim whose owner keeps renewing its lease outlives the retention it was
// claimed with: a tool that runs 5 s under a 2 s retention and a 1 s lease,
// renewed every half second, is never taken for absent by a second caller.
func testRenewedClaimOutlivesRetention(h *h) {
	p := h.params("k-renewed", "owner-a")
	p.LeaseUntil, p.ExpiresAt = t0.Add(time.Second), t0.Add(2*time.Second)
	h.mustClaim(p)
	for h.clock.Now().Before(t0.Add(5 * time.Second)) {
		h.clock.Advance(500 * time.Millisecond)
		lease := h.clock.Now().Add(time.Second)
		if err := h.s.Extend(h.ctx, p.Key, p.Owner, lease); err != nil {
			h.Fatalf("Extend at %v: %v", h.clock.Now().Sub(t0), err)
		}
		if h.clock.Now().Equal(t0.Add(3500 * time.Millisecond)) {
			// Past the claim's retention; the lease is live.
			r := h.get(p.Key)
			if r.State != ledger.StatePending || r.Owner != p.Owner || !r.LeaseUntil.Equal(lease) {
				h.Fatalf("Get of a renewed claim past its first retention = %+v, want pending, owner-a, lease %v", r, lease)
			}
			for _, fp := range []string{p.Fingerprint, "fp-other"} {
				q := h.params(p.Key, "owner-b")
				q.Fingerprint = fp
				if prev := h.mustNotClaim(q); prev.Owner != p.Owner || prev.State != ledger.StatePending {
					h.Errorf("claim (fingerprint %s) blocked by %+v, want the pending record of owner-a", fp, prev)
				}
			}
			if got := h.list(ledger.Filter{State: ledger.StatePending}); len(got) != 1 || got[0].Key != p.Key {
				h.Errorf("List(pending) of a renewed claim past its first retention = %+v, want it", got)
			}
			if got := h.list(ledger.Filter{}); len(got) != 1 {
				h.Errorf("List of a renewed claim past its first retention = %+v, want it", got)
			}
		}
	}
	h.complete(p.Key, p.Owner, ledger.Completion{Summary: "ran once", Ref: "r-1"})
	done := h.get(p.Key)
	if done.State != ledger.StateDone || done.ExpiresAt.Before(t0.Add(6*time.Second).Truncate(time.Second)) {
		h.Errorf("record completed at t0+5s = %+v, want done with ExpiresAt at least the last lease end (t0+6s)", done)
	}
	res := h.claim(h.params(p.Key, "owner-c"))
	if res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone {
		h.Errorf("repeat after completion = %+v, want not claimed, the done record", res)
	}
}

// Extend raises ExpiresAt to at least the new lease end and never lowers it.
func testExtendRaisesExpiry(h *h) {
	p := h.params("k-extend-expiry", "owner-a")
	p.LeaseUntil, p.ExpiresAt = t0.Add(5*time.Second), t0.Add(10*time.Second)
	h.mustClaim(p)
	extend := func(lease time.Time) *ledger.Record {
		h.Helper()
		if err := h.s.Extend(h.ctx, p.Key, p.Owner, lease); err != nil {
			h.Fatalf("Extend to %v: %v", lease.Sub(t0), err)
		}
		r := h.get(p.Key)
		if !r.LeaseUntil.Equal(lease) {
			h.Errorf("after Extend to %v: LeaseUntil = %v", lease.Sub(t0), r.LeaseUntil.Sub(t0))
		}
		return r
	}

	h.clock.Advance(4 * time.Second)
	within := t0.Add(8 * time.Second)
	if r := extend(within); !r.ExpiresAt.Truncate(time.Second).Equal(p.ExpiresAt) {
		h.Errorf("Extend to t0+8s under an expiry of t0+10s changed ExpiresAt to %v", r.ExpiresAt.Sub(t0))
	}

	beyond := t0.Add(20*time.Second + 500*time.Millisecond)
	raised := extend(beyond)
	if raised.ExpiresAt.Before(beyond) || raised.ExpiresAt.After(beyond.Add(time.Second)) {
		h.Errorf("Extend to t0+20.5s: ExpiresAt = %v, want at least t0+20.5s (rounded up by at most 1s)", raised.ExpiresAt.Sub(t0))
	}

	shorter := t0.Add(12 * time.Second)
	if r := extend(shorter); !r.ExpiresAt.Equal(raised.ExpiresAt) {
		h.Errorf("a shorter Extend lowered ExpiresAt from %v to %v", raised.ExpiresAt.Sub(t0), r.ExpiresAt.Sub(t0))
	}
	h.clock.Set(shorter.Add(-time.Millisecond))
	h.mustNotClaim(h.params(p.Key, "owner-b"))
	h.clock.Set(shorter)
	if res := h.mustClaim(h.params(p.Key, "owner-b")); !res.MustReconcile() || res.Previous.Owner != p.Owner {
		h.Errorf("claim when the shortened lease lapsed = %+v, want a takeover of owner-a's claim", res)
	}
}

// A pending record whose lease has lapsed and whose retention has run out is
// an abandoned claim whose effect may exist: it stays visible, and a claim
// takes it over with it in Previous, so that the caller reconciles first.
func testAbandonedPastRetention(h *h) {
	p := h.params("k-abandoned-expired", "owner-a")
	p.LeaseUntil, p.ExpiresAt = t0.Add(5*time.Second), t0.Add(10*time.Second)
	h.mustClaim(p)
	abandoned := pendingRecord(p, 1, t0, t0)

	h.clock.Set(t0.Add(time.Hour))
	h.same("Get of an abandoned claim past its retention", h.get(p.Key), abandoned)
	if got := h.list(ledger.Filter{State: ledger.StatePending, LeaseBefore: h.clock.Now()}); len(got) != 1 {
		h.Errorf("List(pending, lease before now) = %+v, want the abandoned claim", got)
	} else {
		h.same("List of an abandoned claim past its retention", &got[0], abandoned)
	}
	if pg, ok := h.s.(ledger.Purger); ok {
		if n, err := pg.Purge(h.ctx, h.clock.Now()); err != nil || n != 0 {
			h.Errorf("Purge with only an abandoned claim = %d, %v; want 0", n, err)
		}
	}

	other := h.params(p.Key, "owner-b")
	other.Fingerprint = "fp-other"
	h.same("Previous of a claim with another fingerprint", h.mustNotClaim(other), abandoned)

	q := h.params(p.Key, "owner-c")
	res := h.mustClaim(q)
	if !res.MustReconcile() || res.Attempt != 1 {
		h.Errorf("claim over an abandoned claim past its retention = %+v, want a takeover (MustReconcile, Attempt 1)", res)
	}
	h.same("Previous of the takeover", res.Previous, abandoned)
	h.same("after the takeover", h.get(p.Key), pendingRecord(q, 1, t0, h.clock.Now()))
	h.wantErr("Complete by the owner of the abandoned claim", h.s.Complete(h.ctx, p.Key, p.Owner, ledger.Completion{Summary: "late"}), ledger.ErrNotOwner)
}
