package ledgertest

import (
	"errors"
	"fmt"
	"time"

	"github.com/oncely/oncely/ledger"
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
