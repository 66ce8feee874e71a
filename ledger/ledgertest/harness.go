package ledgertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

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
