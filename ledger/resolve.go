package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncely/oncely/internal/clip"
)

// ErrNotResolvable: Resolve refused the record in its current state (done,
// failed, or pending with a live lease). Nothing was written.
var ErrNotResolvable = errors.New("ledger: record cannot be resolved")

// ErrTooEarly: Resolve refused to settle a record failed while a request
// of its attempt may still commit at the provider (before the record's
// SentBy plus the in-flight bound). Nothing was written.
var ErrTooEarly = errors.New("ledger: too early to resolve as failed")

// DefaultInFlight is how long a provider may still commit a request after
// its sender gave up on it, unless configured otherwise: the bound the
// reconciler waits for before it trusts that an effect is absent, and
// Resolve before it settles a record failed.
const DefaultInFlight = 30 * time.Second

// DefaultResolvedRetention is how long a record settled by Resolve is kept
// unless the Resolution says otherwise: the executor's default retention.
const DefaultResolvedRetention = 24 * time.Hour

// maxByBytes bounds Resolution.By, so that the owner token it is kept in
// stays within MaxKeyBytes.
const maxByBytes = 256

// operatorPrefix marks the owner token of a claim taken by Resolve.
const operatorPrefix = "operator:"

// Resolution is an operator's verdict on an action whose outcome oncely
// could not establish, reached by checking the provider by hand.
type Resolution struct {
	// Done: the effect exists (state done, with Ref and Summary). Otherwise
	// it definitely does not (state failed with Reason; a later call of the
	// action performs it with the next attempt number).
	Done    bool
	Ref     string
	Summary string
	Reason  string
	// By names who resolved it ("alice", "runbook-42"). It is kept in the
	// record's owner token; Record.ResolvedBy reads it back.
	By string
	// InFlight is how long a provider may still commit a request after its
	// sender stopped sending (default DefaultInFlight); use the reconciler's
	// bound (reconcile.Config.InFlight) and add the provider's search lag
	// when the check by hand was a search.
	InFlight time.Duration
	// Force settles the record failed before InFlight has passed since the
	// last request of its attempt could leave (the record's lease end). A
	// request sent before then may still commit, and the next call of the
	// action would then act a second time under a new downstream key: set
	// it only when the provider itself confirmed the request will never
	// take effect.
	Force bool
	// Retention is how long the settled record is kept (default
	// DefaultResolvedRetention), counted from the resolution.
	Retention time.Duration
}

// FailableAt returns the earliest time at which an operator may settle rec
// failed without Force: the end of its owner's lease (after which no
// request of its attempt leaves; for an uncertain record, when it was
// settled) plus inFlight (DefaultInFlight when not positive). It is the
// bound the reconciler applies to an empty lookup.
func FailableAt(rec *Record, inFlight time.Duration) time.Time {
	if inFlight <= 0 {
		inFlight = DefaultInFlight
	}
	return rec.LeaseUntil.Add(inFlight)
}

// Resolve settles an uncertain record, or a pending one whose lease has
// lapsed, as an operator's decision. It takes the record over with an
// owner-conditional claim (same fingerprint, tool and run) and then
// completes or fails it under that claim, so a caller that claims the
// record meanwhile wins and Resolve returns ErrNotOwner. A record that is
// done, failed, or pending with a live lease is refused with
// ErrNotResolvable. Settling a record failed before FailableAt is refused
// with ErrTooEarly unless r.Force is set: a request of its attempt may
// still commit. It returns the record as written.
func Resolve(ctx context.Context, s Store, key string, r Resolution, now time.Time) (*Record, error) {
	if r.By == "" || strings.ContainsAny(r.By, ":") || len(r.By) > maxByBytes {
		return nil, fmt.Errorf("%w: a resolution needs who resolved it (By, without ':', at most %d bytes)", ErrInvalid, maxByBytes)
	}
	rec, err := s.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.State == StatePending && !rec.LeaseExpired(now):
		return nil, fmt.Errorf("%w: pending with a live lease until %s; its owner may still be acting",
			ErrNotResolvable, rec.LeaseUntil.UTC().Format(time.RFC3339))
	case rec.State != StatePending && rec.State != StateUncertain:
		return nil, fmt.Errorf("%w: it is %s", ErrNotResolvable, rec.State)
	case !r.Done && !r.Force && now.Before(FailableAt(rec, r.InFlight)):
		return nil, fmt.Errorf("%w: a request sent before %s may still commit until %s; resolve it failed after that, or force it if the provider confirmed it will never take effect",
			ErrTooEarly, rec.LeaseUntil.UTC().Format(time.RFC3339), FailableAt(rec, r.InFlight).UTC().Format(time.RFC3339))
	}
	retention := r.Retention
	if retention <= 0 {
		retention = DefaultResolvedRetention
	}
	owner := operatorPrefix + r.By + ":" + NewOwner()[:16]
	lease := now.Add(time.Minute)
	cr, err := ClaimRepeated(ctx, s, Takeover(rec, owner, now, lease, retention), fixedClock(now), 10*time.Second)
	if err != nil {
		return nil, err
	}
	if !cr.Claimed {
		return nil, fmt.Errorf("%w: the record changed while it was being resolved", ErrNotOwner)
	}
	if p := cr.Previous; p == nil || p.Owner != rec.Owner || p.State != rec.State || !p.LeaseUntil.Equal(rec.LeaseUntil) {
		// The claim landed on another version of the record (it was
		// settled, expired or taken over after it was read): the operator's
		// verdict was not about it. Give the claim back as it was found.
		f := Failure{Definite: true, Reason: "released by an operator's resolution that found the record changed"}
		if p != nil && (p.State == StateUncertain || p.State == StatePending) {
			f = Failure{Reason: p.Reason}
		}
		if err := s.Fail(ctx, key, owner, f); err != nil {
			return nil, fmt.Errorf("the record changed while it was being resolved, and releasing the claim failed: %w", err)
		}
		return nil, fmt.Errorf("%w: the record changed while it was being resolved", ErrNotOwner)
	}
	if r.Done {
		err = s.Complete(ctx, key, owner, Completion{Summary: r.Summary, Ref: r.Ref}.Fit(0))
	} else {
		err = s.Fail(ctx, key, owner, Failure{Definite: true, Reason: clip.String(r.Reason, MaxReasonBytes)})
	}
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, key)
}

// ResolvedBy returns who settled the record by hand with Resolve, or ""
// when oncely settled it or it is not settled (pending, uncertain). A
// Resolve that found the record changed gives its claim back as it found
// it; when the record had failed or expired meanwhile, that is a failed
// record which also names the operator, with a reason that says so.
func (r *Record) ResolvedBy() string {
	if r.State != StateDone && r.State != StateFailed {
		return ""
	}
	by, ok := strings.CutPrefix(r.Owner, operatorPrefix)
	if !ok {
		return ""
	}
	by, _, _ = strings.Cut(by, ":")
	return by
}

// fixedClock is a Clock that stays at one time.
type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }
