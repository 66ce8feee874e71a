package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/providers"
)

// Defaults of Config.
const (
	DefaultInitialInterval = 100 * time.Millisecond
	DefaultMaxInterval     = 2 * time.Second
	DefaultMaxWait         = 10 * time.Second
	DefaultInFlight        = ledger.DefaultInFlight
)

// ErrNoKey is returned for an invocation that carries neither a downstream
// key nor an action key: there is nothing to look up.
var ErrNoKey = errors.New("reconcile: invocation has no key")

// Config tunes a Policy. A nil *Config, or a zero field, means the default.
type Config struct {
	// Clock tells the time (default: the system clock). It must be the
	// clock the invocations' AttemptAt and SentBy were read from (the
	// executors' and the ledger's): a clock behind this one would make
	// the in-flight bound look passed too early.
	Clock clock.Clock
	// Sleep waits d or until ctx ends (default: a real timer). Tests with
	// a fake clock pass a function that advances it.
	Sleep func(ctx context.Context, d time.Duration) error
	// InitialInterval and MaxInterval bound the exponential backoff
	// between lookups (defaults DefaultInitialInterval, DefaultMaxInterval).
	InitialInterval, MaxInterval time.Duration
	// MaxWait bounds how long one reconciliation keeps looking before it
	// answers Unknown (default DefaultMaxWait). The executor blocks the
	// call meanwhile.
	MaxWait time.Duration
	// InFlight is how long a provider may still commit a request after the
	// client gave up on it (default DefaultInFlight). An empty lookup is
	// conclusive only once that long (plus the index lag of an eventual
	// lookup) has passed since the last request of the attempt could have
	// left (client.Invocation.SentBy; the moment of asking when unknown).
	InFlight time.Duration
	// WindowMargin is kept free at the end of a provider's deduplication
	// window: a resend is trusted to be deduplicated only while
	// AttemptAt + DedupWindow - WindowMargin is still ahead (default: a
	// tenth of the window).
	WindowMargin time.Duration
}

// LookupReconciler is a client.Reconciler that can also answer from
// lookups alone, for a caller that cannot resend the request: the Sweeper,
// which has no call input, asks it instead of Reconcile. Policy is one.
type LookupReconciler interface {
	client.Reconciler
	// ReconcileByLookup asks whether inv's effect exists without relying
	// on a resend: it never answers client.VerdictResendSafe.
	ReconcileByLookup(ctx context.Context, inv client.Invocation) (client.Reconciliation, error)
}

// Policy is the lookup-before-retry policy for one provider adapter. It
// implements client.Reconciler and LookupReconciler, and is safe for
// concurrent use.
type Policy struct {
	adapter providers.Adapter
	cfg     Config
}

var (
	_ client.Reconciler = (*Policy)(nil)
	_ LookupReconciler  = (*Policy)(nil)
)

// New returns the policy for adapter, driven by adapter.Capabilities().
// cfg may be nil.
func New(adapter providers.Adapter, cfg *Config) *Policy {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.InitialInterval <= 0 {
		c.InitialInterval = DefaultInitialInterval
	}
	if c.MaxInterval <= 0 {
		c.MaxInterval = DefaultMaxInterval
	}
	if c.MaxWait <= 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.InFlight <= 0 {
		c.InFlight = DefaultInFlight
	}
	return &Policy{adapter: adapter, cfg: c}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Reconcile implements client.Reconciler for a caller that resends after
// VerdictResendSafe or VerdictAbsent, as the executor does: it asks the
// provider whether the effect of inv exists, as the package documentation
// describes. It returns an error when the context ends, or when the
// provider could not be asked at all (its last lookup failed) and no
// other rule decides.
func (p *Policy) Reconcile(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
	return p.check(ctx, inv, true)
}

// ReconcileByLookup implements LookupReconciler: Reconcile for a caller
// that cannot resend. It never relies on a resend (deduplication window,
// upsert) and answers from lookups alone: VerdictFound, VerdictAbsent or
// VerdictUnknown.
func (p *Policy) ReconcileByLookup(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
	return p.check(ctx, inv, false)
}

// check is Reconcile (canResend) and ReconcileByLookup.
func (p *Policy) check(ctx context.Context, inv client.Invocation, canResend bool) (client.Reconciliation, error) {
	key := inv.DownstreamKey
	if key == "" && inv.Key != "" {
		key = client.DownstreamKey(inv.Key, inv.Attempt)
	}
	if key == "" {
		return client.Reconciliation{}, ErrNoKey
	}
	caps := p.adapter.Capabilities()
	quiet := p.cfg.Clock.Now()
	resend := canResend && p.resendSafe(caps, inv.AttemptAt, quiet)

	if caps.Lookup == providers.NoLookup {
		if resend {
			return resendSafe(), nil
		}
		return unknown("the provider offers no lookup, and %s", p.whyNotResend(caps, inv.AttemptAt, canResend)), nil
	}

	// committed: from then on no earlier request can commit; a certain
	// NotFound is final. settled: from then on an empty lookup of any kind
	// is final. Both rest on when the last request could have left, as the
	// record says (SentBy), so every pass over the same record, and the
	// sweeper, reach the same answer; unknown, on the moment of asking (no
	// request leaves later than that either).
	sentBy := inv.SentBy
	if sentBy.IsZero() || sentBy.After(quiet) {
		sentBy = quiet
	}
	committed := sentBy.Add(p.cfg.InFlight)
	settled := committed
	if caps.Lookup == providers.Eventual {
		settled = settled.Add(caps.IndexLag)
	}
	deadline := quiet.Add(p.cfg.MaxWait)
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(p.cfg.InitialInterval),
		backoff.WithMaxInterval(p.cfg.MaxInterval),
		backoff.WithMaxElapsedTime(0),
		backoff.WithClockProvider(p.cfg.Clock),
	)
	lookupCtx := providers.WithAttempt(ctx, inv.AttemptAt)
	for lookups := 1; ; lookups++ {
		asked := p.cfg.Clock.Now()
		res, err := p.adapter.Lookup(lookupCtx, key)
		if cerr := ctx.Err(); cerr != nil {
			return client.Reconciliation{}, fmt.Errorf("reconcile: lookup %s: %w", key, cerr)
		}
		switch {
		case err == nil && res.Status == providers.Found:
			return client.Reconciliation{
				Verdict: client.VerdictFound,
				Effect:  client.Effect{Summary: res.Summary, Ref: res.Ref},
			}, nil
		case err == nil && resend:
			// The resend is the lookup: the provider replays or converges.
			return resendSafe(), nil
		case err == nil && res.Status == providers.NotFound && asked.After(committed),
			err == nil && caps.Lookup == providers.Eventual && asked.After(settled):
			// Asked after every earlier request had committed (and, for an
			// empty search, had reached the index): the answer is final.
			return absent(), nil
		}

		now := p.cfg.Clock.Now()
		if !now.Before(deadline) {
			if resend {
				// The provider could not be asked; the resend asks it.
				return resendSafe(), nil
			}
			if err != nil {
				return client.Reconciliation{}, fmt.Errorf("reconcile: lookup %s: %d lookups in %s, the last failed: %w", key, lookups, now.Sub(quiet), err)
			}
			return unknown("the provider did not show the effect in %d lookups over %s, but an earlier request may still commit, or be missing from its index, until %s",
				lookups, now.Sub(quiet), settled.UTC().Format(time.RFC3339)), nil
		}
		d := b.NextBackOff()
		for _, at := range []time.Time{committed, settled} {
			if until := at.Sub(now); until >= 0 && until < d {
				// Look once more just after an answer can become final.
				d = until + time.Millisecond
				break
			}
		}
		d = min(d, deadline.Sub(now))
		if err := p.cfg.Sleep(ctx, d); err != nil {
			return client.Reconciliation{}, fmt.Errorf("reconcile: lookup %s: %w", key, err)
		}
	}
}

// resendSafe reports whether sending the attempt's request again cannot
// make a second effect at now.
func (p *Policy) resendSafe(caps providers.Capabilities, attemptAt, now time.Time) bool {
	if caps.Upsert {
		return true
	}
	if caps.DedupWindow <= 0 || attemptAt.IsZero() {
		return false
	}
	margin := p.cfg.WindowMargin
	if margin <= 0 {
		margin = caps.DedupWindow / 10
	}
	return now.Before(attemptAt.Add(caps.DedupWindow - margin))
}

func (p *Policy) whyNotResend(caps providers.Capabilities, attemptAt time.Time, canResend bool) string {
	switch {
	case !canResend && (caps.Upsert || caps.DedupWindow > 0):
		return "only a resend with the same key could settle it, which is left to the next call of the action"
	case caps.DedupWindow <= 0:
		return "a resend could be a second effect: the provider does not deduplicate"
	case attemptAt.IsZero():
		return "a resend could be a second effect: the attempt's start is unknown"
	}
	return fmt.Sprintf("a resend could be a second effect: the attempt began at %s, near or past the end of the provider's %s deduplication window",
		attemptAt.UTC().Format(time.RFC3339), caps.DedupWindow)
}

func resendSafe() client.Reconciliation {
	return client.Reconciliation{Verdict: client.VerdictResendSafe}
}

func absent() client.Reconciliation {
	return client.Reconciliation{Verdict: client.VerdictAbsent}
}

func unknown(format string, args ...any) client.Reconciliation {
	return client.Reconciliation{Verdict: client.VerdictUnknown, Reason: fmt.Sprintf(format, args...)}
}
