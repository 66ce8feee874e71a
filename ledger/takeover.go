package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/oncely/oncely/clock"
)

// Takeover returns the parameters of a claim that takes rec over for owner
// at now, to settle it (a sweeper, an operator): the same key, tool, run
// and fingerprint, a lease until lease, and a retention counted from now.
// The retention of the record taken over does not carry over: an uncertain
// record may be far older than any retention, and the record its takeover
// settles must be kept for retention from the settlement, or a repeat of
// the action would run again as soon as it was settled.
func Takeover(rec *Record, owner string, now, lease time.Time, retention time.Duration) ClaimParams {
	exp := now.Add(retention)
	if !exp.After(lease) {
		exp = lease.Add(time.Second)
	}
	return ClaimParams{Key: rec.Key, Tool: rec.Tool, RunID: rec.RunID, Owner: owner, LeaseUntil: lease,
		Fingerprint: rec.Fingerprint, ExpiresAt: exp}
}

// ClaimRepeated claims p in s, and repeats the claim with the same owner
// token while its outcome is unknown (ErrUnavailable: the store was not
// reached, or its reply was lost after the write applied), until it is
// known, ctx ends, clock reaches p.LeaseUntil, or maxElapsed has passed. A
// repeat that finds the record held by p.Owner has claimed it (Refused), so
// a claim is never left applied with nobody acting on it because one reply
// was lost. It returns the last error when the outcome stays unknown.
func ClaimRepeated(ctx context.Context, s Store, p ClaimParams, clock clock.Clock, maxElapsed time.Duration) (ClaimResult, error) {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(maxElapsed),
	)
	var last error
	res, err := backoff.RetryWithData(func() (ClaimResult, error) {
		cr, err := s.Claim(ctx, p)
		last = err
		if err == nil || !errors.Is(err, ErrUnavailable) || !clock.Now().Before(p.LeaseUntil) {
			return cr, backoff.Permanent(err)
		}
		return cr, err
	}, backoff.WithContext(b, ctx))
	if err != nil && last != nil && ctx.Err() != nil {
		return res, last // the store's error says more than the context's
	}
	return res, err
}
