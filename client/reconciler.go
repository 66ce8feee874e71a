package client

import "context"

// Verdict is a reconciler's answer about whether an effect exists.
type Verdict int

const (
	// VerdictUnknown: the provider could not tell (a lookup inside its
	// search-index lag, an unreachable provider). The record stays uncertain.
	VerdictUnknown Verdict = iota
	// VerdictFound: the effect exists; Reconciliation.Effect describes it.
	VerdictFound
	// VerdictNotFound: the effect does not exist (a consistent lookup), or
	// the provider deduplicates by the downstream key so that running the
	// tool again with the same attempt cannot make a second effect.
	VerdictNotFound
)

func (v Verdict) String() string {
	switch v {
	case VerdictFound:
		return "found"
	case VerdictNotFound:
		return "not found"
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
