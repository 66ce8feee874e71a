package client

import "context"

// Verdict is a reconciler's answer: what the executor may do about an
// action whose effect may exist.
type Verdict int

const (
	// VerdictUnknown: the provider could not tell (a lookup inside its
	// search-index lag, an unreachable provider). The record stays
	// uncertain. It is the zero value: an answer nobody filled in never
	// claims certainty.
	VerdictUnknown Verdict = iota
	// VerdictFound: the effect exists; Reconciliation.Effect describes it.
	// The action is recorded done.
	VerdictFound
	// VerdictResendSafe: whether the effect exists is not known, but
	// running the tool again with the same attempt's downstream key cannot
	// make a second one (the provider deduplicates that key, or upserts by
	// it). The executor runs the tool again; a caller that cannot resend
	// (the reconcile package's Sweeper) leaves the record as it is.
	VerdictResendSafe
	// VerdictAbsent: the effect does not exist and no earlier request can
	// still create it (a conclusive lookup): the action definitely did not
	// happen. The executor runs the tool again; the Sweeper records the
	// action failed, so that a later call may run it.
	VerdictAbsent
)

// String returns "unknown", "found", "resend safe" or "absent".
func (v Verdict) String() string {
	switch v {
	case VerdictFound:
		return "found"
	case VerdictResendSafe:
		return "resend safe"
	case VerdictAbsent:
		return "absent"
	default:
		return "unknown"
	}
}

// Reconciliation is the answer of a Reconciler.
type Reconciliation struct {
	Verdict Verdict
	Effect  Effect // VerdictFound: the existing effect
	Reason  string // VerdictUnknown: why it could not be decided
}

// Reconciler asks the provider whether the effect of an action exists. The
// executor calls it before acting over a record whose effect may exist: an
// uncertain record, a pending record whose owner's lease expired, and right
// after the tool returned an ambiguous error. inv carries the same key and
// attempt the earlier run used.
//
// Package reconcile builds Reconcilers from what provider adapters declare.
type Reconciler interface {
	Reconcile(ctx context.Context, inv Invocation) (Reconciliation, error)
}

// ReconcilerFunc adapts a function to Reconciler.
type ReconcilerFunc func(ctx context.Context, inv Invocation) (Reconciliation, error)

// Reconcile calls f.
func (f ReconcilerFunc) Reconcile(ctx context.Context, inv Invocation) (Reconciliation, error) {
	return f(ctx, inv)
}
