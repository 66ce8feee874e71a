package ledgertest

import (
	"time"

	"github.com/oncely/oncely/ledger"
)

// A claim that names the owner of a pending record as exited
// (ClaimParams.Abandoned) takes it over at once, under its live lease, as
// it would after the lease: only with the same fingerprint, only from that
// owner, and it reports the record taken over so that the caller
// reconciles. The exited owner is fenced off.
func testClaimOwnerExited(h *h) {
	p := h.params("k-exited", "owner-a")
	h.mustClaim(p)
	held := pendingRecord(p, 1, t0, t0)
	h.clock.Advance(time.Second) // the lease is live

	for _, c := range []struct {
		what      string
		abandoned string
		fp        string
	}{
		{"naming another owner", "owner-x", p.Fingerprint},
		{"with another fingerprint", p.Owner, "fp-other"},
	} {
		q := h.params(p.Key, "owner-b")
		q.Abandoned, q.Fingerprint = c.abandoned, c.fp
		h.same("Previous of a claim "+c.what, h.mustNotClaim(q), held)
	}

	q := h.params(p.Key, "owner-b")
	q.Abandoned = p.Owner
	res := h.mustClaim(q)
	if res.Attempt != 1 || !res.MustReconcile() {
		h.Errorf("claim over an exited owner = %+v, want Attempt 1 and MustReconcile", res)
	}
	h.same("Previous of the claim over an exited owner", res.Previous, held)
	h.same("Get after it", h.get(p.Key), pendingRecord(q, 1, t0, h.clock.Now()))
	h.wantErr("Extend by the exited owner", h.s.Extend(h.ctx, p.Key, p.Owner, h.clock.Now().Add(time.Hour)), ledger.ErrNotOwner)
	h.wantErr("Complete by the exited owner", h.s.Complete(h.ctx, p.Key, p.Owner, ledger.Completion{Summary: "late"}), ledger.ErrNotOwner)

	// The new owner's live claim is not the exited owner's: naming that
	// one again takes nothing.
	r := h.params(p.Key, "owner-c")
	r.Abandoned = p.Owner
	if prev := h.mustNotClaim(r); prev.Owner != q.Owner {
		h.Errorf("a second claim naming the exited owner was blocked by %+v, want owner-b's claim", prev)
	}
}
