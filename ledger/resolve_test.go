package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// An action ended uncertain and its tool has no reconciler. An operator
// checks the provider by hand, finds the message, and records it done; the
// next call of the action is answered from the record.
func ExampleResolve() {
	ctx := context.Background()
	store := ledgermem.New(nil)
	now := time.Now()
	// What the executor left behind: a claim settled as uncertain.
	if _, err := store.Claim(ctx, ledger.ClaimParams{Key: "k1", Tool: "send_reply", RunID: "run-1", Owner: "worker-7",
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		panic(err)
	}
	if err := store.Fail(ctx, "k1", "worker-7", ledger.Failure{Reason: "timeout after the request was sent"}); err != nil {
		panic(err)
	}

	rec, err := ledger.Resolve(ctx, store, "k1", ledger.Resolution{
		Done: true, Ref: "msg_123", Summary: "reply sent on ticket 42", By: "alice",
	}, time.Now())
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.State, rec.Ref, "resolved by", rec.ResolvedBy())

	// A done record is final: resolving it again is refused.
	_, err = ledger.Resolve(ctx, store, "k1", ledger.Resolution{Reason: "not sent", By: "bob"}, time.Now())
	fmt.Println(errors.Is(err, ledger.ErrNotResolvable))
	// Output:
	// done msg_123 resolved by alice
	// true
}

// stale serves Get from a snapshot taken before another caller acted.
type stale struct {
	ledger.Store
	rec *ledger.Record
}

func (s *stale) Get(ctx context.Context, key string) (*ledger.Record, error) { return s.rec, nil }

func TestResolve(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	setup := func(t *testing.T, state ledger.State, lease time.Duration) (*clock.Fake, ledger.Store) {
		clock := clock.NewFake(t0)
		s := ledgermem.New(&ledgermem.Config{Clock: clock})
		if _, err := s.Claim(ctx, ledger.ClaimParams{Key: "k", Tool: "t", RunID: "r", Owner: "w", Fingerprint: "fp",
			LeaseUntil: t0.Add(lease), ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		var err error
		switch state {
		case ledger.StateUncertain:
			err = s.Fail(ctx, "k", "w", ledger.Failure{Reason: "timeout"})
		case ledger.StateFailed:
			err = s.Fail(ctx, "k", "w", ledger.Failure{Definite: true, Reason: "declined"})
		case ledger.StateDone:
			err = s.Complete(ctx, "k", "w", ledger.Completion{Summary: "sent"})
		}
		if err != nil {
			t.Fatal(err)
		}
		return clock, s
	}
	for _, c := range []struct {
		name  string
		state ledger.State
		lease time.Duration
		res   ledger.Resolution
		want  ledger.State
		err   error
	}{
		{"uncertain found done", ledger.StateUncertain, time.Minute, ledger.Resolution{Done: true, Ref: "msg_1", By: "alice"}, ledger.StateDone, nil},
		{"uncertain found absent", ledger.StateUncertain, time.Minute, ledger.Resolution{Reason: "not in the outbox", By: "alice", Force: true}, ledger.StateFailed, nil},
		{"abandoned pending", ledger.StatePending, -time.Second, ledger.Resolution{Done: true, By: "alice"}, ledger.StateDone, nil},
		{"live pending", ledger.StatePending, time.Minute, ledger.Resolution{Done: true, By: "alice"}, ledger.StatePending, ledger.ErrNotResolvable},
		{"done", ledger.StateDone, time.Minute, ledger.Resolution{By: "alice"}, ledger.StateDone, ledger.ErrNotResolvable},
		{"failed", ledger.StateFailed, time.Minute, ledger.Resolution{Done: true, By: "alice"}, ledger.StateFailed, ledger.ErrNotResolvable},
		{"no one resolved it", ledger.StateUncertain, time.Minute, ledger.Resolution{Done: true}, ledger.StateUncertain, ledger.ErrInvalid},
		{"By with a colon", ledger.StateUncertain, time.Minute, ledger.Resolution{Done: true, By: "a:b"}, ledger.StateUncertain, ledger.ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock, s := setup(t, c.state, c.lease)
			clock.Advance(time.Millisecond)
			rec, err := ledger.Resolve(ctx, s, "k", c.res, clock.Now())
			if !errors.Is(err, c.err) || (c.err != nil) != (err != nil) {
				t.Fatalf("err %v, want %v", err, c.err)
			}
			got, gerr := s.Get(ctx, "k")
			if gerr != nil || got.State != c.want {
				t.Fatalf("record %+v %v, want %s", got, gerr, c.want)
			}
			if err == nil {
				if rec.ResolvedBy() != "alice" || rec.Ref != c.res.Ref || rec.Fingerprint != "fp" {
					t.Errorf("resolved record %+v", rec)
				}
			} else if got.ResolvedBy() != "" {
				t.Errorf("a refused resolution wrote %+v", got)
			}
		})
	}

	// The record changed after the operator read it: another caller's claim
	// was settled uncertain again. The verdict was about the old version,
	// so it is not applied, and the record stays uncertain.
	t.Run("changed after it was read", func(t *testing.T) {
		t.Parallel()
		clock, s := setup(t, ledger.StateUncertain, time.Minute)
		old, err := s.Get(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		if _, err := s.Claim(ctx, ledger.ClaimParams{Key: "k", Tool: "t", RunID: "r", Owner: "w2", Fingerprint: "fp",
			LeaseUntil: clock.Now().Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Fail(ctx, "k", "w2", ledger.Failure{Reason: "second timeout"}); err != nil {
			t.Fatal(err)
		}
		_, err = ledger.Resolve(ctx, &stale{Store: s, rec: old}, "k", ledger.Resolution{Reason: "nothing sent", By: "alice", Force: true}, clock.Now())
		if !errors.Is(err, ledger.ErrNotOwner) {
			t.Fatalf("err %v, want ErrNotOwner", err)
		}
		got, err := s.Get(ctx, "k")
		if err != nil || got.State != ledger.StateUncertain || got.Reason != "second timeout" || got.ResolvedBy() != "" {
			t.Fatalf("record %+v %v: want it uncertain as the other caller left it", got, err)
		}
	})
}

// An operator may not settle failed what the reconciler would not: a
// request sent before the record's lease ended may still commit until
// InFlight after it. Resolving failed before then is refused (saying until
// when) unless forced, and the record is left as it was.
func TestResolveFailedWaitsForRequestsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, s := claimedAtT0(t, "k")
	// The owner vanished; its lease ends at t0+1m.
	sentBy := t0.Add(time.Minute)
	for _, c := range []struct {
		name string
		at   time.Time
		res  ledger.Resolution
		err  error
	}{
		{"0.3 s after the lease", sentBy.Add(300 * time.Millisecond), ledger.Resolution{Reason: "not found", By: "alice"}, ledger.ErrTooEarly},
		{"just before the default bound", sentBy.Add(ledger.DefaultInFlight - time.Millisecond), ledger.Resolution{Reason: "not found", By: "alice"}, ledger.ErrTooEarly},
		{"before a longer bound", sentBy.Add(ledger.DefaultInFlight), ledger.Resolution{Reason: "not found", By: "alice", InFlight: time.Hour}, ledger.ErrTooEarly},
	} {
		_, err := ledger.Resolve(ctx, s, "k", c.res, c.at)
		if !errors.Is(err, c.err) {
			t.Fatalf("%s: err %v, want %v", c.name, err, c.err)
		}
		if want := ledger.FailableAt(&ledger.Record{LeaseUntil: sentBy}, c.res.InFlight).UTC().Format(time.RFC3339); !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say until when (%s)", c.name, err, want)
		}
		if got, _ := s.Get(ctx, "k"); got.State != ledger.StatePending || got.Owner != "w" {
			t.Fatalf("%s: a refused resolution changed the record: %+v", c.name, got)
		}
	}
	// Done needs no wait: it claims the effect exists.
	clock.Set(sentBy.Add(time.Second))
	if _, err := ledger.Resolve(ctx, s, "k", ledger.Resolution{Done: true, Ref: "r1", By: "alice"}, clock.Now()); err != nil {
		t.Fatalf("resolve done right after the lease: %v", err)
	}

	// Forced, and at the bound, failed is accepted.
	for i, c := range []ledger.Resolution{
		{Reason: "provider confirmed", By: "alice", Force: true},
		{Reason: "not found", By: "alice"},
	} {
		key := fmt.Sprintf("k%d", i)
		clock.Set(t0)
		claim(t, s, key)
		at := sentBy.Add(time.Second)
		if !c.Force {
			at = sentBy.Add(ledger.DefaultInFlight)
		}
		clock.Set(at)
		if rec, err := ledger.Resolve(ctx, s, key, c, at); err != nil || rec.State != ledger.StateFailed {
			t.Fatalf("%+v: %+v, %v; want failed", c, rec, err)
		}
	}
}

// A record settled by Resolve is kept for the resolution's retention from
// then, however old the uncertain record was: a repeat of the action a
// minute later is still answered from it, never run again.
func TestResolvedRecordKeptForRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock, s := claimedAtT0(t, "k")
	if err := s.Fail(ctx, "k", "w", ledger.Failure{Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	// A week later, long past the claim's retention.
	clock.Set(t0.Add(7 * 24 * time.Hour))
	rec, err := ledger.Resolve(ctx, s, "k", ledger.Resolution{Done: true, Ref: "r1", By: "alice"}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().Add(ledger.DefaultResolvedRetention); !rec.ExpiresAt.Equal(want) {
		t.Errorf("resolved record expires at %v, want %v", rec.ExpiresAt, want)
	}
	clock.Advance(ledger.DefaultResolvedRetention - time.Second)
	if got, err := s.Get(ctx, "k"); err != nil || got.State != ledger.StateDone {
		t.Fatalf("resolved record a day later: %+v, %v; want done", got, err)
	}
}

// claimedAtT0 returns a memory store on a clock at t0 in which owner "w"
// has claimed key with a one-minute lease.
func claimedAtT0(t *testing.T, key string) (*clock.Fake, ledger.Store) {
	t.Helper()
	clock := clock.NewFake(t0)
	s := ledgermem.New(&ledgermem.Config{Clock: clock})
	claim(t, s, key)
	return clock, s
}

// claim claims key for owner "w" with a one-minute lease from t0.
func claim(t *testing.T, s ledger.Store, key string) {
	t.Helper()
	if _, err := s.Claim(context.Background(), ledger.ClaimParams{Key: key, Tool: "t", RunID: "r", Owner: "w", Fingerprint: "fp",
		LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}
