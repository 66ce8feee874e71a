package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oncely/oncely/ledger"
)

// fence keeps a claim's provider calls inside its lease. Its context, the
// one reconcilers and the tool run under, is cancelled with cause
// ErrLeaseLost when the lease ends without renewal or a renewal finds the
// record taken over. A heartbeat renews the lease every Config.Heartbeat,
// to Config.Liveness later (up to the call's end: the context's deadline,
// Config.Lease); a renewal that fails is retried until the lease ends. Lease times are read from Config.Clock; the waits between them are
// real timers, and a heartbeat runs only when its timer fires (no
// goroutine waits for it meanwhile).
type fence struct {
	r      *run
	parent context.Context
	ctx    context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex // serializes renewals; guards until
	until  time.Time
	tmu    sync.Mutex // guards timer and stopped
	timer  *time.Timer
	// stopped is set by stop: no heartbeat is scheduled after it.
	stopped bool
	beats   sync.WaitGroup // a heartbeat scheduled or running
}

func (r *run) fence(ctx context.Context) *fence {
	fctx, cancel := context.WithCancelCause(ctx)
	f := &fence{r: r, parent: ctx, ctx: fctx, cancel: cancel, until: r.leaseUntil}
	f.schedule()
	return f
}

// stop ends the heartbeat and releases the fence's context.
func (f *fence) stop() {
	f.tmu.Lock()
	f.stopped = true
	if f.timer != nil && f.timer.Stop() {
		f.beats.Done() // it will not run
	}
	f.tmu.Unlock()
	f.beats.Wait()
	f.cancel(context.Canceled)
}

func (f *fence) lease() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.until
}

// schedule ends the fence if the lease has ended, and otherwise sets the
// timer of the next heartbeat: in Config.Heartbeat; once renewals have
// failed for that long, at half the remaining time until the lease ends.
func (f *fence) schedule() {
	cfg := &f.r.e.cfg
	now := cfg.Clock.Now()
	until := f.lease()
	if !now.Before(until) {
		f.cancel(fmt.Errorf("%w: the lease ended at %s without renewal", ErrLeaseLost, until.UTC().Format(time.RFC3339Nano)))
		f.r.log(f.parent, slog.LevelWarn, "oncely lease lost", slog.Any("cause", context.Cause(f.ctx)))
		return
	}
	wait := cfg.Heartbeat
	left := until.Sub(now)
	switch {
	case f.atDeadline(until):
		// The lease already reaches the call's deadline: no renewal can
		// move it. The only timer left ends the fence when it runs out.
		wait = left
	case left <= wait:
		wait = left / 2
	}
	f.tmu.Lock()
	defer f.tmu.Unlock()
	if f.stopped {
		return
	}
	f.beats.Add(1)
	f.timer = time.AfterFunc(max(wait, time.Millisecond), f.beat)
}

// atDeadline reports whether a lease until until already reaches the
// call's end (its deadline, Config.Lease), so that no renewal can move it.
func (f *fence) atDeadline(until time.Time) bool {
	end, ok := f.r.callEnd(f.parent)
	return ok && !end.After(until)
}

// beat is one heartbeat: it renews the lease and schedules the next one,
// unless the fence was stopped or its context ended meanwhile.
func (f *fence) beat() {
	defer f.beats.Done()
	f.tmu.Lock()
	stopped := f.stopped
	f.tmu.Unlock()
	if stopped || f.ctx.Err() != nil {
		return
	}
	now := f.r.e.cfg.Clock.Now()
	if left := f.lease().Sub(now); left > 0 && !f.atDeadline(f.lease()) {
		// A renewal that outlasts the lease is no renewal: bound the write.
		switch err := f.renew(left); {
		case errors.Is(err, ErrLeaseLost):
			f.r.log(f.parent, slog.LevelWarn, "oncely lease lost", slog.Any("cause", err))
			return
		case err != nil:
			f.r.log(f.parent, slog.LevelWarn, "oncely lease renewal failed; retrying until the lease ends", slog.Any("err", err))
		}
	}
	if f.ctx.Err() == nil {
		f.schedule()
	}
}

// renew extends the lease with a conditional write bounded by timeout. It
// fails with ErrLeaseLost (and ends the fence's context) when the record
// was taken over or the context's deadline has passed; other errors leave
// the lease as it was.
func (f *fence) renew(timeout time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.r
	now := r.e.cfg.Clock.Now()
	lease := r.leaseEnd(f.parent, now)
	if !lease.After(now) {
		err := fmt.Errorf("%w: the call's deadline (or Config.Lease) has passed", ErrLeaseLost)
		f.cancel(err)
		return err
	}
	ctx, cancel := context.WithTimeout(f.parent, timeout)
	defer cancel()
	err := r.e.store.Extend(ctx, r.id.key, r.owner, lease)
	switch {
	case err == nil:
		f.until = lease
		return nil
	case errors.Is(err, ledger.ErrNotOwner):
		err = fmt.Errorf("%w: the record was taken over (%w)", ErrLeaseLost, err)
		f.cancel(err)
		return err
	}
	return fmt.Errorf("client: renew the lease of %s: %w", r.id.key, err)
}
