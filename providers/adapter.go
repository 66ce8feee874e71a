package providers

import (
	"context"
	"time"
)

// Consistency says how far a provider's lookup can be trusted right after
// an effect was created.
type Consistency int

const (
	// NoLookup: the provider cannot be asked whether an effect exists.
	NoLookup Consistency = iota
	// Consistent: a lookup sees every committed effect (a GET by external
	// id, a list endpoint). A miss is NotFound.
	Consistent
	// Eventual: a lookup reads an index that lags behind commits by up to
	// Capabilities.IndexLag (a search endpoint). A miss is Inconclusive:
	// the effect may be younger than the lag. Once IndexLag has passed
	// since the last request that could create the effect stopped
	// executing, the index shows every such effect, and an Inconclusive
	// answer means it does not exist (package reconcile applies this).
	Eventual
)

// String returns "none", "consistent" or "eventual".
func (c Consistency) String() string {
	switch c {
	case Consistent:
		return "consistent"
	case Eventual:
		return "eventual"
	default:
		return "none"
	}
}

// Capabilities is what an adapter declares about its provider. The
// reconcile policy is driven by these declarations, never by per-provider
// code.
type Capabilities struct {
	// DedupWindow is how long the provider recognises a repeat of a
	// request by its downstream key and replays the first answer (Stripe:
	// 24h). Within it, resending with the same key is a safe way to
	// reconcile. 0: the provider does not deduplicate.
	DedupWindow time.Duration
	// Lookup is the consistency of Adapter.Lookup.
	Lookup Consistency
	// IndexLag bounds how far an Eventual lookup lags behind commits.
	IndexLag time.Duration
	// Upsert: creating is an upsert by the downstream key (an external
	// id), so repeating it converges instead of duplicating.
	Upsert bool
}

// LookupStatus is what one lookup saw at the provider. It is not yet a
// decision: package reconcile turns lookups, with the adapter's
// Capabilities and the time requests may still commit, into a
// client.Verdict (a NotFound becomes VerdictAbsent only once no earlier
// request can still create the effect).
type LookupStatus int

const (
	// Inconclusive: the provider could not tell. From an Eventual lookup
	// it means the index did not show the effect (see Eventual); from a
	// Consistent one, that a bounded scan ended before it could see
	// everything. It is the zero value: a result nobody filled in never
	// claims certainty.
	Inconclusive LookupStatus = iota
	// Found: the effect exists; LookupResult.Ref names it.
	Found
	// NotFound: the lookup sees every committed effect and the effect is
	// not among them.
	NotFound
)

// String returns "found", "not found" or "inconclusive".
func (s LookupStatus) String() string {
	switch s {
	case Found:
		return "found"
	case NotFound:
		return "not found"
	default:
		return "inconclusive"
	}
}

// LookupResult is what a lookup found.
type LookupResult struct {
	Status LookupStatus
	// Ref is the provider's object reference (Found).
	Ref string
	// Summary is one line describing the effect, fit to tell the model
	// (Found).
	Summary string
}

// Adapter is the part of a provider adapter the reconcile policy needs:
// its declarations, and a way to ask whether the effect a downstream key
// names exists.
//
// Lookup answers with an outcome, not an error: Found, NotFound only when
// certain, Inconclusive otherwise. It returns an error only when the
// provider could not be asked or its answer could not be read; the caller
// then knows nothing more than before. Lookup takes the downstream key
// exactly as the create request carried it (client.DownstreamKey); it
// never derives keys of its own.
type Adapter interface {
	Capabilities() Capabilities
	Lookup(ctx context.Context, downstreamKey string) (LookupResult, error)
}

// Linker is implemented by adapters that know the address of the
// provider's own page of an effect (its dashboard): the operator console
// links an action to it.
type Linker interface {
	// Link returns the URL of the provider's page of the effect whose
	// reference is ref (LookupResult.Ref, the record's Ref; "" when it is
	// not known) and whose downstream key is downstreamKey, or "" when the
	// adapter knows no such page.
	Link(ref, downstreamKey string) string
}

type attemptKey struct{}

// WithAttempt returns ctx carrying when the attempt being looked up
// began. Package reconcile's policy passes it to every Lookup when the
// invocation knows it, so that a lookup reading a window of time (a
// channel's history, a list of recent objects) can start that window just
// before the attempt instead of at a fixed look-back.
func WithAttempt(ctx context.Context, began time.Time) context.Context {
	if began.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, attemptKey{}, began)
}

// AttemptFrom returns when the attempt a Lookup looks up began, as
// WithAttempt set it; ok is false when the caller did not say.
func AttemptFrom(ctx context.Context) (began time.Time, ok bool) {
	began, ok = ctx.Value(attemptKey{}).(time.Time)
	return began, ok
}
