package ledgertest

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/oncely/oncely/ledger"
)

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
