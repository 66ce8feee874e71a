package client

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
)

// blocked answers a call whose claim was refused by prev. retry reports
// that prev failed or vanished while we waited, so a new claim may run it;
// the Result is then the answer to give if no more rounds are left.
func (r *run) blocked(ctx context.Context, prev *ledger.Record) (Result, bool) {
	if prev.State == ledger.StatePending && prev.Fingerprint == r.id.fingerprint && !r.ownerExited(ctx, prev) {
		prev = r.waitSettled(ctx, prev)
	}
	inProgress := Result{Outcome: InProgress, IsError: true, Key: r.id.key, Text: textInProgress}
	if prev == nil || prev.Owner == r.abandoned && prev.State == ledger.StatePending {
		// Gone (expired, abandoned) while waiting, or its owner has
		// exited: claim again (taking it over reconciles).
		return inProgress, true
	}
	if prev.Fingerprint != r.id.fingerprint {
		return r.conflict(prev), false
	}
	switch prev.State {
	case ledger.StateDone:
		r.e.n.replayed.Add(1)
		r.e.cnt.Add(counters.Counts{Tool: r.t.Name, Replayed: 1})
		res := r.doneResult(AlreadyDone, prev.Summary, prev.Ref, prev.Result)
		res.Attempt = prev.Attempt
		r.log(ctx, slog.LevelDebug, "oncely replay", slog.String("ref", prev.Ref))
		return res, false
	case ledger.StateFailed: // the other call failed: this one may try
		// A failed record holds the next attempt's number; the one that
		// failed is the one before (its downstream key is spent, the
		// next one's may yet take effect).
		return failedResult(r.id.key, prev.Attempt-1, errors.New(prev.Reason), true, prev.Reason), true
	case ledger.StateUncertain:
		r.e.n.uncertain.Add(1)
		return r.uncertainResult(prev.Attempt, errors.New(prev.Reason)), false
	default:
		inProgress.Attempt = prev.Attempt
		inProgress.TakeoverAt = prev.TakeoverAt()
		return inProgress, false
	}
}

func (r *run) conflict(prev *ledger.Record) Result {
	fields := make([]string, len(r.t.Validated))
	for i, f := range r.t.Validated {
		fields[i] = f.Path
	}
	state := "done"
	if prev.State != ledger.StateDone {
		state = "started"
	}
	return Result{Outcome: Conflict, IsError: true, Key: r.id.key, Attempt: prev.Attempt,
		Summary: prev.Summary, Ref: prev.Ref,
		Text: textConflict(r.t.Name, r.id.described(r.t), state, fields)}
}

// waitSettled waits for up to Config.Wait while another caller holds the
// record, and returns the last record seen (nil if it disappeared). It
// looks at the record whenever a run in this process settles the key (a
// run that recorded it done on the same Store hands the record over), and
// whenever the Store, when it is a ledger.Watcher, signals that the key
// may have settled anywhere. Otherwise it polls the record with backoff,
// at most Executor.poll apart (watchPoll when the Store watches: its polls
// only cover a lost signal), for a holder in another process.
func (r *run) waitSettled(ctx context.Context, prev *ledger.Record) *ledger.Record {
	if r.e.cfg.Wait < 0 {
		return prev
	}
	woken, release := r.e.wakes.wait(r.id.key)
	defer func() { release() }()
	poll, watched, stopWatch := r.e.poll, (<-chan struct{})(nil), func() {}
	if w, ok := r.e.store.(ledger.Watcher); ok {
		if ch, stop, err := w.Watch(ctx, r.id.key); err == nil {
			poll, watched, stopWatch = max(poll, watchPoll), ch, stop
		}
	}
	defer stopWatch()
	// The options, not fields set afterwards: the constructor already
	// fixed the first interval.
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(poll/5),
		backoff.WithMaxInterval(poll),
		backoff.WithMaxElapsedTime(r.e.cfg.Wait),
	)
	bc := backoff.WithContext(b, ctx)
	deadline := time.NewTimer(r.e.cfg.Wait)
	defer deadline.Stop()
	// The first look is at once if a run in this process settled an
	// action between the claim that returned prev and the registration
	// above (it signalled nobody), or if the Store watches the key (a
	// settle elsewhere before the watch began signalled nobody either);
	// otherwise the record is the one the claim just read, and the first
	// look is the first poll.
	for first := watched != nil || r.e.wakes.count.Load() != r.settled; ; first = false {
		if !first {
			d := bc.NextBackOff()
			if d == backoff.Stop {
				return prev
			}
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return prev
			case <-deadline.C:
				t.Stop()
				return prev
			case <-watched:
				t.Stop()
			case <-woken.ch:
				t.Stop()
				if rec := woken.handed(r.e.store, prev.Owner); rec != nil {
					return rec
				}
				release()
				woken, release = r.e.wakes.wait(r.id.key)
			case <-t.C:
			}
		}
		rec, err := r.e.store.Get(ctx, r.id.key)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return nil
		case err != nil:
			continue
		case rec.State != ledger.StatePending || rec.Owner != prev.Owner:
			return rec
		case rec.LeaseExpired(r.e.cfg.Clock.Now()):
			// Abandoned: a new claim takes it over (and reconciles).
			return nil
		case r.ownerExited(ctx, rec):
			return rec
		}
	}
}

// ownerExited reports whether rec is a pending record whose owner is known
// to have exited (Config.OwnerExited), and if so notes its owner token for
// the next claim, which then takes it over.
func (r *run) ownerExited(ctx context.Context, rec *ledger.Record) bool {
	if rec.State != ledger.StatePending || !r.e.cfg.OwnerExited(rec.Owner) {
		return false
	}
	r.abandoned = rec.Owner
	r.log(ctx, slog.LevelDebug, "oncely owner exited", slog.String("owner", rec.Owner))
	return true
}
