package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncely/oncely/ledger"
)

// ledger.Resolve settles uncertain and abandoned pending records as done
// (with the operator's reference and summary) or failed, and the record
// says who resolved it.
func testResolveSettles(h *h) {
	cases := []struct {
		name string
		// prepare leaves the record to resolve under key, claimed by owner.
		prepare func(key, owner string)
		done    bool
	}{
		{"uncertain as done", h.uncertain, true},
		{"uncertain as failed", h.uncertain, false},
		{"lapsed pending as done", h.lapsed, true},
		{"lapsed pending as failed", h.lapsed, false},
		{"pending past its retention as done", h.pastRetention, true},
	}
	for i, c := range cases {
		h.clock.Set(t0)
		key, owner := fmt.Sprintf("k-resolve-%d", i), fmt.Sprintf("owner-%d", i)
		c.prepare(key, owner)
		before := h.get(key)
		if by := before.ResolvedBy(); by != "" {
			h.Errorf("%s: ResolvedBy of a record oncely wrote = %q, want \"\"", c.name, by)
		}
		if !c.done {
			// Past the in-flight bound, as Resolve requires to settle failed.
			h.clock.Set(ledger.FailableAt(before, 0))
		}
		now := h.clock.Now()
		res := ledger.Resolution{Done: c.done, Ref: "re_" + key, Summary: "refunded by hand", Reason: "checked the provider: nothing", By: "alice"}
		got, err := ledger.Resolve(h.ctx, h.s, key, res, now)
		if err != nil {
			h.Fatalf("%s: Resolve: %v", c.name, err)
		}
		h.same(c.name+": Resolve's record vs Get", got, h.get(key))
		wantState, wantAttempt := ledger.StateDone, before.Attempt
		if !c.done {
			wantState, wantAttempt = ledger.StateFailed, before.Attempt+1
		}
		switch {
		case got.State != wantState || got.Attempt != wantAttempt || got.Fingerprint != before.Fingerprint ||
			got.Tool != before.Tool || got.RunID != before.RunID:
			h.Errorf("%s: resolved record = %+v, want state %s, attempt %d, the fingerprint, tool and run of %+v",
				c.name, got, wantState, wantAttempt, before)
		case c.done && (got.Ref != res.Ref || got.Summary != res.Summary):
			h.Errorf("%s: resolved record has ref %q summary %q, want %q %q", c.name, got.Ref, got.Summary, res.Ref, res.Summary)
		case !c.done && got.Reason != res.Reason:
			h.Errorf("%s: resolved record has reason %q, want %q", c.name, got.Reason, res.Reason)
		case got.ResolvedBy() != "alice":
			h.Errorf("%s: ResolvedBy = %q, want alice", c.name, got.ResolvedBy())
		case !got.UpdatedAt.Equal(now):
			h.Errorf("%s: UpdatedAt = %v, want the time of the resolution %v", c.name, got.UpdatedAt, now)
		}
		// The stale owner is fenced off.
		h.wantErr(c.name+": Complete by the former owner", h.s.Complete(h.ctx, key, owner, ledger.Completion{Summary: "late"}), ledger.ErrNotOwner)

		next := h.claim(h.params(key, "owner-next"))
		switch {
		case c.done && (next.Claimed || next.Previous == nil || next.Previous.State != ledger.StateDone):
			h.Errorf("%s: claim after the resolution = %+v, want the done record", c.name, next)
		case !c.done && (!next.Claimed || next.MustReconcile() || next.Attempt != wantAttempt):
			h.Errorf("%s: claim after the resolution = %+v, want claimed, attempt %d, without reconciling", c.name, next, wantAttempt)
		}
	}
}

// uncertain leaves an uncertain record under key.
func (h *h) uncertain(key, owner string) {
	h.Helper()
	h.mustClaim(h.params(key, owner))
	h.clock.Advance(time.Second)
	h.fail(key, owner, ledger.Failure{Reason: "timeout after send"})
	h.clock.Advance(time.Second)
}

// lapsed leaves a pending record under key whose lease has lapsed.
func (h *h) lapsed(key, owner string) {
	h.Helper()
	h.mustClaim(h.params(key, owner))
	h.clock.Advance(lease)
}

// pastRetention leaves a pending record under key whose lease and
// retention have both run out.
func (h *h) pastRetention(key, owner string) {
	h.Helper()
	p := h.params(key, owner)
	p.LeaseUntil, p.ExpiresAt = t0.Add(time.Second), t0.Add(2*time.Second)
	h.mustClaim(p)
	h.clock.Advance(time.Hour)
}

// ledger.Resolve refuses records whose outcome is known or whose owner may
// still be acting, and changes nothing.
func testResolveRefuses(h *h) {
	res := ledger.Resolution{Done: true, Ref: "r", Summary: "s", By: "alice"}
	for _, c := range []struct {
		name    string
		prepare func(key, owner string)
	}{
		{"done", func(k, o string) {
			h.mustClaim(h.params(k, o))
			h.complete(k, o, ledger.Completion{Summary: "ok", Ref: "r-1"})
		}},
		{"failed", func(k, o string) {
			h.mustClaim(h.params(k, o))
			h.fail(k, o, ledger.Failure{Definite: true, Reason: "declined"})
		}},
		{"live pending", func(k, o string) {
			h.mustClaim(h.params(k, o))
			h.clock.Advance(lease - time.Millisecond)
		}},
	} {
		h.clock.Set(t0)
		key := "k-refuse-" + c.name
		c.prepare(key, "owner-a")
		want := h.get(key)
		_, err := ledger.Resolve(h.ctx, h.s, key, res, h.clock.Now())
		h.wantErr("Resolve of a "+c.name+" record", err, ledger.ErrNotResolvable)
		h.unchanged("after refusing to resolve a "+c.name+" record", want)
	}

	h.clock.Set(t0)
	_, err := ledger.Resolve(h.ctx, h.s, "k-refuse-absent", res, h.clock.Now())
	h.wantErr("Resolve of an absent key", err, ledger.ErrNotFound)
	h.absent("k-refuse-absent")

	h.uncertain("k-refuse-anonymous", "owner-a")
	want := h.get("k-refuse-anonymous")
	for _, by := range []string{"", "alice:admin"} {
		anonymous := res
		anonymous.By = by
		_, err = ledger.Resolve(h.ctx, h.s, want.Key, anonymous, h.clock.Now())
		h.wantErr(fmt.Sprintf("Resolve by %q", by), err, ledger.ErrInvalid)
	}
	h.unchanged("after refused resolutions", want)
}

// interposer runs fn once, right after the first Get of the store it wraps
// returns: a claim that comes between Resolve's read and its write.
type interposer struct {
	ledger.Store
	fn func()
}

func (s *interposer) Get(ctx context.Context, key string) (*ledger.Record, error) {
	r, err := s.Store.Get(ctx, key)
	if fn := s.fn; fn != nil {
		s.fn = nil
		fn()
	}
	return r, err
}

// A claim that takes the record over while Resolve is deciding wins:
// Resolve returns ledger.ErrNotOwner and the claim's record stands.
func testResolveLosesToClaim(h *h) {
	const key = "k-resolve-race"
	h.uncertain(key, "owner-a")
	var claimed *ledger.Record
	s := &interposer{Store: h.s, fn: func() {
		res := h.mustClaim(h.params(key, "owner-b"))
		if !res.MustReconcile() {
			h.Errorf("interposed takeover = %+v, want MustReconcile", res)
		}
		claimed = h.get(key)
	}}
	_, err := ledger.Resolve(h.ctx, s, key, ledger.Resolution{Done: true, Ref: "r", Summary: "s", By: "alice"}, h.clock.Now())
	if !errors.Is(err, ledger.ErrNotOwner) {
		h.Fatalf("Resolve against an interposed claim: err = %v, want ledger.ErrNotOwner", err)
	}
	if claimed == nil {
		h.Fatal("the interposed claim never ran")
	}
	h.unchanged("the interposed claim's record", claimed)
}
