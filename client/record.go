package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/oncely/oncely/internal/clip"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
)

// write retries a conditional record write with backoff, also after the
// caller's context ended: the effect happened, it must be recorded.
func (r *run) write(ctx context.Context, op func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.e.cfg.RecordTimeout)
	defer cancel()
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(r.e.cfg.RecordTimeout),
	)
	var last error
	err := backoff.Retry(func() error {
		last = op(wctx)
		if errors.Is(last, ledger.ErrNotOwner) || errors.Is(last, ledger.ErrTooLarge) || errors.Is(last, ledger.ErrInvalid) {
			return backoff.Permanent(last)
		}
		return last
	}, backoff.WithContext(b, wctx))
	if err != nil && last != nil && wctx.Err() != nil {
		return last // the store's error says more than the timeout
	}
	return err
}

func (r *run) complete(ctx context.Context, eff Effect, outcome Outcome) (Result, error) {
	c := ledger.Completion{Summary: eff.Summary, Ref: eff.Ref, Result: eff.Result, Retention: r.retention()}.Fit(r.e.cfg.MaxResultBytes)
	err := r.write(ctx, func(ctx context.Context) error { return r.e.store.Complete(ctx, r.id.key, r.owner, c) })
	if errors.Is(err, ledger.ErrTooLarge) {
		// A store with tighter limits than ledger's: the effect exists, so
		// record it done with less detail rather than not at all.
		c = ledger.Completion{Summary: clip.String(c.Summary, minimalBytes), Ref: clip.String(c.Ref, minimalBytes),
			Truncated: c.Truncated || len(c.Result) > 0, Retention: c.Retention}
		err = r.write(ctx, func(ctx context.Context) error { return r.e.store.Complete(ctx, r.id.key, r.owner, c) })
	}
	if outcome == Executed {
		r.e.n.executed.Add(1)
		r.e.cnt.Add(counters.Counts{Tool: r.t.Name, Executed: 1})
	} else {
		r.e.n.replayed.Add(1)
		r.e.cnt.Add(counters.Counts{Tool: r.t.Name, Replayed: 1})
	}
	// The caller gets the provider's full reference; the record may hold a
	// clipped one.
	res := r.doneResult(outcome, c.Summary, eff.Ref, eff.Result)
	switch {
	case err == nil:
		r.done, r.completion = true, c
		return res, nil
	case errors.Is(err, ledger.ErrNotOwner):
		// The lease lapsed while the tool ran and another caller took the
		// record over; it reconciles with the provider, which has the key.
		r.log(ctx, slog.LevelWarn, "oncely fenced write", slog.String("write", "done"), slog.Any("err", err))
		return res, nil
	default:
		res.Text += textNotRecorded
		return res, fmt.Errorf("client: record done %s: %w", r.id.key, err)
	}
}

// doneRecord is the record that complete wrote, with the fields a waiter
// answers from.
func (r *run) doneRecord() *ledger.Record {
	c := r.completion
	return &ledger.Record{Key: r.id.key, Tool: r.t.Name, RunID: r.inv.RunID, State: ledger.StateDone, Owner: r.owner,
		Fingerprint: r.id.fingerprint, Attempt: r.inv.Attempt, AttemptAt: r.inv.AttemptAt,
		Summary: c.Summary, Ref: c.Ref, Result: c.Result, Truncated: c.Truncated}
}

func (r *run) doneResult(outcome Outcome, summary, ref string, payload []byte) Result {
	res := Result{Outcome: outcome, Key: r.id.key, Attempt: r.inv.Attempt, Summary: summary, Ref: ref, Payload: payload}
	if outcome == Executed {
		res.Text = textDone(summary)
	} else {
		res.Text = textAlreadyDone(r.t.Scope, summary)
	}
	return res
}

func (r *run) fail(ctx context.Context, cause error, retryable bool) (Result, error) {
	err := r.write(ctx, func(ctx context.Context) error {
		return r.e.store.Fail(ctx, r.id.key, r.owner, ledger.Failure{Definite: true, Reason: clip.String(cause.Error(), ledger.MaxReasonBytes),
			Retention: r.retention()})
	})
	res := r.failed(cause, retryable, cause.Error())
	return res, r.recorded(ctx, "failed", err)
}

// recorded reports the error of a failed or uncertain record write: none
// when the write was fenced off by a newer owner (who settles the record),
// which is logged.
func (r *run) recorded(ctx context.Context, write string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrNotOwner):
		r.log(ctx, slog.LevelWarn, "oncely fenced write", slog.String("write", write), slog.Any("err", err))
		return nil
	}
	return fmt.Errorf("client: record %s %s: %w", write, r.id.key, err)
}

// failed builds a Failed result: nothing was done.
func (r *run) failed(cause error, retryable bool, reason string) Result {
	r.e.n.failed.Add(1)
	return failedResult(r.id.key, r.inv.Attempt, cause, retryable, reason)
}

func failedResult(key string, attempt int, cause error, retryable bool, reason string) Result {
	return Result{Outcome: Failed, IsError: true, Key: key, Attempt: attempt, Err: cause, Retryable: retryable,
		Text: textFailed(reason, retryable)}
}

func (r *run) uncertain(ctx context.Context, cause error) (Result, error) {
	r.e.n.uncertain.Add(1)
	err := r.write(ctx, func(ctx context.Context) error {
		return r.e.store.Fail(ctx, r.id.key, r.owner, ledger.Failure{Definite: false, Reason: clip.String(cause.Error(), ledger.MaxReasonBytes)})
	})
	res := r.uncertainResult(r.inv.Attempt, cause)
	r.log(ctx, slog.LevelWarn, "oncely uncertain", slog.Any("cause", cause), slog.Bool("reconciler", r.t.Reconciler != nil))
	return res, r.recorded(ctx, "uncertain", err)
}

// minimalBytes bounds the summary and reference of a done record that a
// store refused as too large even after Completion.Fit.
const minimalBytes = 256

func (r *run) uncertainResult(attempt int, cause error) Result {
	text := textUncertain
	if r.t.Reconciler == nil {
		text = textUncertainManual
	}
	return Result{Outcome: Uncertain, IsError: true, Key: r.id.key, Attempt: attempt, Err: cause, Text: text}
}
