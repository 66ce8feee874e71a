package ledgerdynamo_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
)

// The retry quota (Config.RetryQuota) spreads the SDK standard retryer's
// token bucket over every request of a Store: a throttled retry takes 5
// tokens, any other retry 14, a retry the service answers gives its
// tokens back, and a first attempt it answers adds 1. On a stand-in that
// throttles the first four UpdateItems, with a bucket of 10 tokens and 5
// attempts a request: the first claim retries twice (10 tokens) and gives
// up after 3 requests, not 5; the second finds the bucket empty and sends
// 1 request; the third is answered at once and adds a token. Without a
// quota (ratelimit.None) the same script costs 5 requests a claim.
func TestRetryQuota(t *testing.T) {
	t.Parallel()
	throttled := apiError(400, "ThrottlingException", nil)
	ctx := context.Background()
	claim := func(store *ledgerdynamo.Store, key string) error {
		_, err := store.Claim(ctx, params(key, "owner-"+key))
		return err
	}

	t.Run("throttled", func(t *testing.T) {
		t.Parallel()
		quota := ratelimit.NewTokenRateLimit(10)
		store, c, _ := newStandInWith(t, func(cfg *ledgerdynamo.Config) {
			cfg.MaxAttempts, cfg.RetryQuota = 5, quota
		}, nil, throttled, throttled, throttled, throttled, ok)
		steps := []struct {
			key       string
			requests  int
			quotaErr  bool // the claim fails for want of tokens
			remaining uint
		}{
			{"a", 3, true, 0},
			{"b", 1, true, 0},
			{"c", 1, false, 1},
		}
		for _, st := range steps {
			err := claim(store, st.key)
			if got := errors.Is(err, ledgerdynamo.ErrRetryQuota); got != st.quotaErr || (st.quotaErr && !errors.Is(err, ledger.ErrUnavailable)) {
				t.Errorf("claim %s: error %v; want ErrRetryQuota and ErrUnavailable: %v", st.key, err, st.quotaErr)
			}
			if !st.quotaErr && err != nil {
				t.Errorf("claim %s: %v", st.key, err)
			}
			if got := c.take(); total(got) != st.requests {
				t.Errorf("claim %s: %d requests (%v), want %d", st.key, total(got), got, st.requests)
			}
			if got := quota.Remaining(); got != st.remaining {
				t.Errorf("claim %s: %d tokens left, want %d", st.key, got, st.remaining)
			}
		}
	})

	t.Run("a retry answered gives its tokens back", func(t *testing.T) {
		t.Parallel()
		quota := ratelimit.NewTokenRateLimit(14)
		store, c, _ := newStandInWith(t, func(cfg *ledgerdynamo.Config) { cfg.RetryQuota = quota },
			nil, apiError(500, "InternalServerError", nil), ok)
		if err := claim(store, "a"); err != nil {
			t.Fatal(err)
		}
		if got := c.take(); total(got) != 2 {
			t.Errorf("%d requests (%v), want 2", total(got), got)
		}
		// A 5xx retry costs 14 (the whole bucket), refunded when answered.
		if got := quota.Remaining(); got != 14 {
			t.Errorf("%d tokens left, want 14", got)
		}
	})

	t.Run("a 5xx retry costs more than a throttled one", func(t *testing.T) {
		t.Parallel()
		quota := ratelimit.NewTokenRateLimit(13)
		store, c, _ := newStandInWith(t, func(cfg *ledgerdynamo.Config) { cfg.RetryQuota = quota },
			nil, apiError(500, "InternalServerError", nil), ok)
		if err := claim(store, "a"); !errors.Is(err, ledgerdynamo.ErrRetryQuota) {
			t.Errorf("claim: %v, want ErrRetryQuota (a retry after a 5xx costs 14 tokens)", err)
		}
		if got := c.take(); total(got) != 1 {
			t.Errorf("%d requests (%v), want 1", total(got), got)
		}
	})

	t.Run("no quota", func(t *testing.T) {
		t.Parallel()
		store, c, _ := newStandInWith(t, func(cfg *ledgerdynamo.Config) {
			cfg.MaxAttempts, cfg.RetryQuota = 5, ratelimit.None
		}, nil, throttled)
		for _, key := range []string{"a", "b"} {
			if err := claim(store, key); !errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledgerdynamo.ErrRetryQuota) {
				t.Errorf("claim %s: %v, want ErrUnavailable after every attempt", key, err)
			}
			if got := c.take(); total(got) != 5 {
				t.Errorf("claim %s: %d requests (%v), want 5", key, total(got), got)
			}
		}
	})

	t.Run("default", func(t *testing.T) {
		// The default bucket (500 tokens, a Store's own) lets a throttled
		// request use its attempts.
		t.Parallel()
		store, c, _ := newStandInWith(t, func(cfg *ledgerdynamo.Config) { cfg.MaxAttempts = 5 }, nil, throttled)
		if err := claim(store, "a"); errors.Is(err, ledgerdynamo.ErrRetryQuota) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("claim: %v, want ErrUnavailable after 5 attempts", err)
		}
		if got := c.take(); total(got) != 5 {
			t.Errorf("%d requests (%v), want 5", total(got), got)
		}
	})
}
