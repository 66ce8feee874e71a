package ledgertest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/oncely/oncely/ledger"
)

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
		{"Abandoned", func(p *ledger.ClaimParams) { p.Abandoned = long }},
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
