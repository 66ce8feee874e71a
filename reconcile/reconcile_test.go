package reconcile_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// provider is a scripted adapter on a fake clock: an effect exists from
// committedAt on (zero: never), and an eventual lookup sees it IndexLag
// later.
type provider struct {
	caps        providers.Capabilities
	clock       *clock.Fake
	committedAt time.Time
	err         error // every lookup fails with it

	mu      sync.Mutex
	lookups []time.Time
	keys    []string
}

func (p *provider) Capabilities() providers.Capabilities { return p.caps }

func (p *provider) Lookup(ctx context.Context, key string) (providers.LookupResult, error) {
	now := p.clock.Now()
	p.mu.Lock()
	p.lookups = append(p.lookups, now)
	p.keys = append(p.keys, key)
	p.mu.Unlock()
	if p.err != nil {
		return providers.LookupResult{}, p.err
	}
	visible := !p.committedAt.IsZero() && !now.Before(p.committedAt)
	if p.caps.Lookup == providers.Eventual {
		visible = !p.committedAt.IsZero() && !now.Before(p.committedAt.Add(p.caps.IndexLag))
		if !visible {
			return providers.LookupResult{Status: providers.Inconclusive}, nil
		}
	}
	if visible {
		return providers.LookupResult{Status: providers.Found, Ref: "obj_1", Summary: "the effect"}, nil
	}
	return providers.LookupResult{Status: providers.NotFound}, nil
}

func (p *provider) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lookups)
}

// fakeTime returns a Config whose Sleep advances clock instead of waiting.
func fakeTime(clock *clock.Fake) *reconcile.Config {
	return &reconcile.Config{
		Clock: clock,
		Sleep: func(ctx context.Context, d time.Duration) error {
			clock.Advance(d)
			return ctx.Err()
		},
		InFlight: 10 * time.Second,
		MaxWait:  time.Minute,
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	consistent := providers.Capabilities{Lookup: providers.Consistent}
	eventual := providers.Capabilities{Lookup: providers.Eventual, IndexLag: 20 * time.Second}
	stripeLike := providers.Capabilities{Lookup: providers.Eventual, IndexLag: time.Minute, DedupWindow: 24 * time.Hour}
	tests := []struct {
		name      string
		caps      providers.Capabilities
		attemptAt time.Duration // before t0; 0: unknown
		sentBy    time.Duration // before t0; 0: unknown (the moment of asking)
		committed time.Duration // after t0 (negative: before); 0 with never
		never     bool
		maxWait   time.Duration
		verdict   client.Verdict
		// minElapsed and maxLookups check that the policy waited as long
		// as it must and no longer than it needs.
		minElapsed time.Duration
		maxLookups int
		noResend   bool // the caller cannot resend (the sweeper)
	}{
		{name: "sent long ago: one empty lookup is final", caps: eventual, sentBy: time.Hour, never: true,
			verdict: client.VerdictAbsent, maxLookups: 1},
		{name: "sent recently: waits only the rest of the bound", caps: consistent, sentBy: 4 * time.Second, never: true, maxWait: 7 * time.Second,
			verdict: client.VerdictAbsent, minElapsed: 6 * time.Second},
		{name: "found at once", caps: consistent, committed: -time.Second, verdict: client.VerdictFound, maxLookups: 1},
		{name: "consistent miss waits out requests in flight", caps: consistent, never: true,
			verdict: client.VerdictAbsent, minElapsed: 10 * time.Second},
		{name: "a request in flight commits after the first lookup", caps: consistent, committed: 3 * time.Second,
			verdict: client.VerdictFound},
		{name: "consistent miss with too short a wait", caps: consistent, never: true, maxWait: 5 * time.Second,
			verdict: client.VerdictUnknown},
		{name: "eventual miss waits out in flight and index lag", caps: eventual, never: true,
			verdict: client.VerdictAbsent, minElapsed: 30 * time.Second},
		{name: "eventual lookup finds the effect once indexed", caps: eventual, committed: -time.Second,
			verdict: client.VerdictFound, minElapsed: 19 * time.Second},
		{name: "late resend of an old attempt is still found", caps: eventual, attemptAt: time.Hour, committed: -100 * time.Millisecond,
			verdict: client.VerdictFound},
		{name: "eventual miss inside the lag with too short a wait", caps: eventual, never: true, maxWait: 15 * time.Second,
			verdict: client.VerdictUnknown},
		{name: "inside the dedup window the resend is the lookup", caps: stripeLike, attemptAt: time.Hour, never: true,
			verdict: client.VerdictResendSafe, maxLookups: 1},
		{name: "inside the dedup window a found effect is reported", caps: stripeLike, attemptAt: time.Hour, committed: -2 * time.Minute,
			verdict: client.VerdictFound, maxLookups: 1},
		{name: "near the end of the dedup window", caps: stripeLike, attemptAt: 23 * time.Hour, never: true, maxWait: 2 * time.Minute,
			verdict: client.VerdictAbsent, minElapsed: 70 * time.Second},
		{name: "dedup window with unknown attempt start", caps: stripeLike, never: true, maxWait: 30 * time.Second,
			verdict: client.VerdictUnknown},
		{name: "upsert", caps: providers.Capabilities{Lookup: providers.Consistent, Upsert: true}, never: true,
			verdict: client.VerdictResendSafe, maxLookups: 1},
		{name: "no lookup inside the window", caps: providers.Capabilities{DedupWindow: time.Hour}, attemptAt: time.Minute, never: true,
			verdict: client.VerdictResendSafe},
		{name: "no lookup outside the window", caps: providers.Capabilities{DedupWindow: time.Hour}, attemptAt: 2 * time.Hour, never: true,
			verdict: client.VerdictUnknown},
		{name: "no lookup, no window", caps: providers.Capabilities{}, never: true, verdict: client.VerdictUnknown},
		{name: "without resends the dedup window does not decide", caps: stripeLike, attemptAt: time.Hour, never: true, noResend: true,
			maxWait: 2 * time.Minute, verdict: client.VerdictAbsent, minElapsed: 70 * time.Second},
		{name: "without resends an upsert is looked up", caps: providers.Capabilities{Lookup: providers.Consistent, Upsert: true}, never: true,
			noResend: true, verdict: client.VerdictAbsent, minElapsed: 10 * time.Second},
		{name: "without resends and without lookup", caps: providers.Capabilities{DedupWindow: time.Hour}, attemptAt: time.Minute, never: true,
			noResend: true, verdict: client.VerdictUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clock := clock.NewFake(t0)
			p := &provider{caps: tc.caps, clock: clock}
			if !tc.never {
				p.committedAt = t0.Add(tc.committed)
			}
			cfg := fakeTime(clock)
			if tc.maxWait > 0 {
				cfg.MaxWait = tc.maxWait
			}
			inv := client.Invocation{Key: "k", Attempt: 1, DownstreamKey: "k"}
			if tc.attemptAt > 0 {
				inv.AttemptAt = t0.Add(-tc.attemptAt)
			}
			if tc.sentBy > 0 {
				inv.SentBy = t0.Add(-tc.sentBy)
			}
			policy := reconcile.New(p, cfg)
			ask := policy.Reconcile
			if tc.noResend {
				ask = policy.ReconcileByLookup
			}
			f, err := ask(context.Background(), inv)
			if err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			elapsed := clock.Now().Sub(t0)
			if f.Verdict != tc.verdict {
				t.Fatalf("verdict %s (reason %q), want %s; %d lookups over %s",
					f.Verdict, f.Reason, tc.verdict, p.count(), elapsed)
			}
			if elapsed < tc.minElapsed {
				t.Errorf("decided after %s, want at least %s", elapsed, tc.minElapsed)
			}
			if tc.maxLookups > 0 && p.count() > tc.maxLookups {
				t.Errorf("%d lookups, want at most %d", p.count(), tc.maxLookups)
			}
			if tc.caps.Lookup == providers.NoLookup && p.count() != 0 {
				t.Errorf("%d lookups of a provider without lookup", p.count())
			}
			switch f.Verdict {
			case client.VerdictFound:
				if f.Effect.Ref != "obj_1" || f.Effect.Summary != "the effect" {
					t.Errorf("effect %+v", f.Effect)
				}
			case client.VerdictUnknown:
				if f.Reason == "" {
					t.Error("unknown without a reason")
				}
				if wait := cfg.MaxWait; tc.caps.Lookup != providers.NoLookup && elapsed < wait {
					t.Errorf("gave up after %s, before MaxWait %s", elapsed, wait)
				}
			}
			if f.Verdict == client.VerdictAbsent {
				// The final lookup was made after every request could have
				// committed and been indexed.
				last := p.lookups[len(p.lookups)-1]
				bound := t0.Add(cfg.InFlight - tc.sentBy)
				if tc.caps.Lookup == providers.Eventual {
					bound = bound.Add(tc.caps.IndexLag)
				}
				if !last.After(bound) {
					t.Errorf("concluded from a lookup at %s, not after %s", last.Sub(t0), bound.Sub(t0))
				}
			}
		})
	}
}

func TestReconcileFindsEffect(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	p := &provider{caps: providers.Capabilities{Lookup: providers.Consistent}, clock: clock, committedAt: t0}
	rec, err := reconcile.New(p, fakeTime(clock)).Reconcile(context.Background(), client.Invocation{Key: "k", Attempt: 1})
	if err != nil || rec.Verdict != client.VerdictFound || rec.Effect.Ref != "obj_1" {
		t.Fatalf("Reconcile = %+v, %v", rec, err)
	}
}

func TestDownstreamKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		inv  client.Invocation
		want string
	}{
		{client.Invocation{Key: "abc", Attempt: 1, DownstreamKey: "given"}, "given"},
		{client.Invocation{Key: "abc", Attempt: 1}, "abc"},
		{client.Invocation{Key: "abc", Attempt: 3}, "abc-3"},
	} {
		clock := clock.NewFake(t0)
		p := &provider{caps: providers.Capabilities{Lookup: providers.Consistent}, clock: clock, committedAt: t0}
		if _, err := reconcile.New(p, fakeTime(clock)).Reconcile(context.Background(), tc.inv); err != nil {
			t.Fatal(err)
		}
		if len(p.keys) != 1 || p.keys[0] != tc.want {
			t.Errorf("%+v: looked up %q, want %q", tc.inv, p.keys, tc.want)
		}
	}
	_, err := reconcile.New(&provider{}, nil).Reconcile(context.Background(), client.Invocation{})
	if !errors.Is(err, reconcile.ErrNoKey) {
		t.Errorf("no key: %v, want ErrNoKey", err)
	}
}

func TestLookupErrors(t *testing.T) {
	t.Parallel()
	down := errors.New("connection refused")
	t.Run("outside the window the error is returned", func(t *testing.T) {
		t.Parallel()
		clock := clock.NewFake(t0)
		p := &provider{caps: providers.Capabilities{Lookup: providers.Consistent}, clock: clock, err: down}
		cfg := fakeTime(clock)
		cfg.MaxWait = 5 * time.Second
		f, err := reconcile.New(p, cfg).Reconcile(context.Background(), client.Invocation{Key: "k", Attempt: 1})
		if !errors.Is(err, down) || f.Verdict != client.VerdictUnknown {
			t.Fatalf("Reconcile = %+v, %v; want unknown and the lookup error", f, err)
		}
		if p.count() < 3 {
			t.Errorf("%d lookups in 5s of backoff from 100ms, want retries", p.count())
		}
	})
	t.Run("inside the window the resend decides", func(t *testing.T) {
		t.Parallel()
		clock := clock.NewFake(t0)
		p := &provider{caps: providers.Capabilities{Lookup: providers.Consistent, DedupWindow: time.Hour}, clock: clock, err: down}
		f, err := reconcile.New(p, fakeTime(clock)).Reconcile(context.Background(), client.Invocation{Key: "k", Attempt: 1, AttemptAt: t0})
		if err != nil || f.Verdict != client.VerdictResendSafe {
			t.Fatalf("Reconcile = %+v, %v; want a resend", f, err)
		}
		if p.count() < 3 {
			t.Errorf("%d lookups: a failed lookup is retried before the resend decides", p.count())
		}
	})
}

func TestContextEnds(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	p := &provider{caps: providers.Capabilities{Lookup: providers.Eventual, IndexLag: time.Hour}, clock: clock}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := fakeTime(clock)
	cfg.Sleep = func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}
	f, err := reconcile.New(p, cfg).Reconcile(ctx, client.Invocation{Key: "k", Attempt: 1})
	if !errors.Is(err, context.Canceled) || f.Verdict != client.VerdictUnknown {
		t.Fatalf("Reconcile = %+v, %v; want context.Canceled", f, err)
	}
}

// With the default (real) sleep, a short MaxWait is honoured and the reason
// says why the answer is unknown.
func TestRealSleepBounded(t *testing.T) {
	t.Parallel()
	p := &provider{caps: providers.Capabilities{Lookup: providers.Eventual, IndexLag: time.Hour}, clock: clock.NewFake(t0)}
	start := time.Now()
	f, err := reconcile.New(p, &reconcile.Config{MaxWait: 30 * time.Millisecond, InitialInterval: 5 * time.Millisecond}).
		Reconcile(context.Background(), client.Invocation{Key: "k", Attempt: 1})
	if err != nil || f.Verdict != client.VerdictUnknown || !strings.Contains(f.Reason, "index") {
		t.Fatalf("Reconcile = %+v, %v", f, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s with MaxWait 30ms", d)
	}
	if p.count() < 2 {
		t.Errorf("%d lookups, want retries within MaxWait", p.count())
	}
}
