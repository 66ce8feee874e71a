package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
)

// run is the state of one call through the executor.
type run struct {
	e     *Executor
	t     *Tool
	id    identity
	inv   Invocation
	owner string
	// claimedAt is the time of the latest claim, leaseUntil the end of its
	// lease as claimed.
	claimedAt, leaseUntil time.Time
	// settled is the count of settles in this process (wakeups.count)
	// before the latest claim.
	settled uint64
	// done reports that completion, the done record's fields, was
	// written under the claim.
	done       bool
	completion ledger.Completion
	// abandoned is the owner token of the pending record blocking the
	// call, once its process was found to have exited: the next claim
	// takes the record over.
	abandoned string
	// earlier is the first cause of the action's uncertainty: the reason
	// of the uncertain record this call took over, or the error of its own
	// ambiguous attempt. An uncertain outcome for a later cause (a
	// reconciler's, a resend's) keeps it beside that cause.
	earlier string
}

func (e *Executor) execute(ctx context.Context, t *Tool, id identity, runID string, call Call) (Result, error) {
	r := &run{e: e, t: t, id: id, inv: Invocation{
		Tool: t.Name, RunID: runID, CallID: call.ID, Input: call.Input, Key: id.key,
	}}
	// The call's event, and the clock read for its latency, only when
	// the logger takes Info.
	logged := e.cfg.Logger.Enabled(ctx, slog.LevelInfo)
	var start time.Time
	if logged {
		start = e.cfg.Clock.Now()
	}
	res, err := r.do(ctx)
	if !logged {
		return res, err
	}
	if res.Attempt != 0 {
		r.inv.Attempt = res.Attempt
	}
	attrs := []slog.Attr{slog.String("outcome", res.Outcome.String()), slog.Duration("latency", e.cfg.Clock.Now().Sub(start))}
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	} else if res.Err != nil {
		attrs = append(attrs, slog.Any("cause", res.Err))
	}
	r.log(ctx, slog.LevelInfo, "oncely call", attrs...)
	return res, err
}

// log emits one event of the call.
func (r *run) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if l := r.e.cfg.Logger; l.Enabled(ctx, level) {
		l.LogAttrs(ctx, level, msg, append(r.e.callAttrs(r.t, r.inv.RunID, r.id.key, r.inv.Attempt, Call{Input: r.inv.Input}), attrs...)...)
	}
}

// do claims, reconciles when needed, runs, and records.
func (r *run) do(ctx context.Context) (Result, error) {
	// A failed or vanished record can be claimed again, so a duplicate
	// that waited for one gets another round.
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return r.failed(fmt.Errorf("client: not started: %w", err), true, reasonCancelled), err
		}
		cr, err := r.claim(ctx)
		if err != nil {
			err = fmt.Errorf("client: claim %s: %w", r.id.key, err)
			if errors.Is(err, ledger.ErrInvalid) || errors.Is(err, ledger.ErrTooLarge) {
				// The store refused what the program passed: retrying will
				// not help, and the model's input is not at fault.
				return r.failed(err, false, reasonConfiguration), err
			}
			return r.failed(err, true, reasonLedgerDown), err
		}
		if cr.Claimed {
			r.log(ctx, slog.LevelDebug, "oncely claim", slog.Bool("claimed", true), slog.String("previous", prevState(cr.Previous)))
			return r.claimed(ctx, cr)
		}
		r.log(ctx, slog.LevelDebug, "oncely claim", slog.Bool("claimed", false), slog.String("previous", prevState(cr.Previous)))
		res, retry := r.blocked(ctx, cr.Previous)
		if !retry || round > 0 {
			return res, nil
		}
	}
}

// prevState names the state of a claim's previous record ("" when none).
func prevState(prev *ledger.Record) string {
	if prev == nil {
		return ""
	}
	return string(prev.State)
}

// leaseEnd returns the end of a lease taken or renewed at now:
// Config.Liveness later, or the call's end (callEnd) when that is sooner
// (a claim never outlives its invocation).
func (r *run) leaseEnd(ctx context.Context, now time.Time) time.Time {
	lease := now.Add(r.e.cfg.Liveness)
	if end, ok := r.callEnd(ctx); ok && end.Before(lease) {
		lease = end
	}
	return lease
}

// callEnd returns the time past which the claim is not renewed, when
// there is one: the context's deadline, or Config.Lease after the claim
// was taken, whichever is sooner.
func (r *run) callEnd(ctx context.Context) (time.Time, bool) {
	end, ok := ctx.Deadline()
	if l := r.e.cfg.Lease; l > 0 {
		if bound := r.claimedAt.Add(l); !ok || bound.Before(end) {
			end, ok = bound, true
		}
	}
	return end, ok
}

func (r *run) claim(ctx context.Context) (ledger.ClaimResult, error) {
	cfg := &r.e.cfg
	now := cfg.Clock.Now()
	r.claimedAt = now
	lease := r.leaseEnd(ctx, now)
	if !lease.After(now) {
		return ledger.ClaimResult{}, context.DeadlineExceeded
	}
	retention := r.retention()
	r.owner = cfg.NewOwner()
	r.leaseUntil = lease
	r.settled = r.e.wakes.count.Load()
	p := ledger.ClaimParams{
		Key: r.id.key, Tool: r.t.Name, RunID: r.inv.RunID, Owner: r.owner,
		LeaseUntil: lease, Fingerprint: r.id.fingerprint,
		ExpiresAt: now.Add(max(retention, cfg.Liveness+time.Second)),
		Abandoned: r.abandoned,
	}
	// A claim whose outcome is unknown (the store was unreachable, or its
	// reply was lost after the write applied) is repeated with the same
	// owner token until it is known, so that the call goes on under a
	// claim that did apply rather than leave it with nobody acting on it.
	return ledger.ClaimRepeated(ctx, r.e.store, p, cfg.Clock, cfg.RecordTimeout)
}

// retention is how long the tool's settled records are kept.
func (r *run) retention() time.Duration {
	if r.t.Retention > 0 {
		return r.t.Retention
	}
	return r.e.cfg.Retention
}

// settle is the record write that ends a claimed call, and its result.
type settle func(ctx context.Context) (Result, error)

// claimed runs the action under a claim the caller now owns. Everything
// that may reach the provider (reconcile lookups, the tool, a resend) runs
// under the claim's fence; the record is written after the fence stopped.
func (r *run) claimed(ctx context.Context, cr ledger.ClaimResult) (Result, error) {
	r.inv.Attempt = cr.Attempt
	r.inv.DownstreamKey = DownstreamKey(r.id.key, cr.Attempt)
	r.inv.AttemptAt = r.claimedAt
	r.inv.args = r.id.args() // built only now: a replay never binds
	// Once the record is written (whether or not the write succeeded),
	// the callers of this process waiting for the action look at it.
	defer r.e.wakes.wake(r.id.key, r)
	s := func() settle {
		f := r.fence(ctx)
		defer f.stop() // also when the tool exits its goroutine
		return r.act(ctx, f, cr)
	}()
	return s(ctx)
}

// act reconciles when it must, runs the tool, and decides what to record.
func (r *run) act(ctx context.Context, f *fence, cr ledger.ClaimResult) settle {
	resent := false
	if cr.MustReconcile() {
		// The earlier owner may have sent this attempt's key long before,
		// and, fenced by its lease, sent nothing after the lease ended (for
		// an uncertain record: after it was settled).
		prev := cr.Previous
		r.inv.AttemptAt = prev.AttemptAt
		r.inv.SentBy = prev.LeaseUntil
		if prev.State == ledger.StatePending && prev.Owner == r.abandoned && r.claimedAt.Before(prev.LeaseUntil) {
			// Its owner had exited before this claim: it sent nothing
			// after, whatever its lease said.
			r.inv.SentBy = r.claimedAt
		}
		r.e.n.takeovers.Add(1)
		r.earlier = rootReason(prev.Reason)
		r.log(ctx, slog.LevelInfo, "oncely takeover", slog.String("previous", string(prev.State)), slog.Time("sent_by", prev.LeaseUntil))
		if s, done := r.reconcile(f.ctx, r.earlierUnknown(), AlreadyDone); done {
			return s
		}
		if s, ok := r.mayResend(f); !ok {
			return s
		}
		resent = true
	}
	eff, err := r.runTool(f.ctx)
	if err == nil {
		return r.completes(eff, Executed)
	}
	switch class := errclass.Of(err); {
	case class != errclass.Ambiguous && resent:
		// A resend the provider refused (429, 409 while the first request
		// is still running, a replayed rejection) says nothing about the
		// earlier attempt, which may have taken effect.
		return r.uncertains(r.withEarlier(fmt.Errorf("client: the resend failed (%w); an earlier attempt may have taken effect", err)))
	case class != errclass.Ambiguous:
		return func(ctx context.Context) (Result, error) { return r.fail(ctx, err, class == errclass.Definite) }
	}
	// The effect may exist. Our request has returned: nothing of this
	// attempt leaves after now. Ask the provider; if it says the effect
	// does not exist (or that a resend is deduplicated), one more run with
	// the same downstream key is safe while we still hold the claim.
	r.inv.SentBy = r.e.cfg.Clock.Now()
	if r.earlier == "" {
		r.earlier = err.Error()
	}
	if s, done := r.reconcile(f.ctx, err, Executed); done {
		return s
	}
	if s, ok := r.mayResend(f); !ok {
		return s
	}
	eff, err2 := r.runTool(f.ctx)
	if err2 == nil {
		return r.completes(eff, Executed)
	}
	// Whatever the resend's class, the first attempt may have acted.
	return r.uncertains(r.withEarlier(err2))
}

// mayResend renews the claim before the tool runs again after a
// reconciliation: only the owner of a live lease sends. When the renewal
// fails, nothing is sent and the action stays uncertain.
func (r *run) mayResend(f *fence) (settle, bool) {
	if err := f.renew(r.e.cfg.RecordTimeout); err != nil {
		return r.uncertains(r.withEarlier(fmt.Errorf("client: not resent: the claim could not be renewed: %w", err))), false
	}
	return nil, true
}

func (r *run) completes(eff Effect, outcome Outcome) settle {
	return func(ctx context.Context) (Result, error) { return r.complete(ctx, eff, outcome) }
}

func (r *run) uncertains(cause error) settle {
	return func(ctx context.Context) (Result, error) { return r.uncertain(ctx, cause) }
}

// errEarlierUnknown is the cause of an uncertain outcome when a call took
// over a record whose effect may exist.
var errEarlierUnknown = errors.New("client: the outcome of an earlier attempt is unknown")

// earlierUnknownError is errEarlierUnknown with the reason the record
// taken over gave (the provider's or the upstream's own words), which is
// the real cause and is what the record keeps and the caller is told.
type earlierUnknownError struct{ reason string }

func (e *earlierUnknownError) Error() string { return e.reason }
func (e *earlierUnknownError) Unwrap() error { return errEarlierUnknown }

// earlierUnknown is the cause of an uncertain outcome after a takeover
// that did not settle the action: the earlier attempt's reason when it had
// one (an uncertain record), else errEarlierUnknown (an abandoned claim).
func (r *run) earlierUnknown() error {
	if r.earlier == "" {
		return errEarlierUnknown
	}
	return &earlierUnknownError{reason: r.earlier}
}

// earlierMark joins the cause of an uncertain outcome to the first cause
// of the action's uncertainty.
const earlierMark = "; first cause: "

// withEarlier adds the first cause of the action's uncertainty (r.earlier)
// to the cause of an uncertain outcome, so that neither the record nor the
// caller loses the provider's own words to a later, generic cause.
func (r *run) withEarlier(cause error) error {
	if r.earlier == "" {
		return cause
	}
	return fmt.Errorf("%w%s%s", cause, earlierMark, r.earlier)
}

// rootReason is the first cause a reason records: a takeover's reason
// carries the one before it, which is kept once, not nested.
func rootReason(reason string) string {
	if i := strings.LastIndex(reason, earlierMark); i >= 0 {
		return reason[i+len(earlierMark):]
	}
	return reason
}

// reconcile asks the tool's reconciler whether the effect exists. done
// reports that the call is settled by it (found: reported as foundAs; or
// undecidable); when done is false the effect is absent, or a resend is
// safe, and the tool may run with the same downstream key.
func (r *run) reconcile(ctx context.Context, cause error, foundAs Outcome) (settle, bool) {
	if r.t.Reconciler == nil {
		return r.uncertains(cause), true // no reconciler: it stays uncertain
	}
	r.e.n.reconciled.Add(1)
	start := r.e.cfg.Clock.Now()
	rec, err := r.askReconciler(ctx)
	attrs := []slog.Attr{slog.String("verdict", rec.Verdict.String()), slog.Duration("latency", r.e.cfg.Clock.Now().Sub(start))}
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	} else if rec.Reason != "" {
		attrs = append(attrs, slog.String("reason", rec.Reason))
	}
	r.log(ctx, slog.LevelInfo, "oncely reconcile", attrs...)
	if err == nil && (rec.Verdict == VerdictFound || rec.Verdict == VerdictAbsent || rec.Verdict == VerdictResendSafe) {
		r.e.cnt.Add(counters.Counts{Tool: r.t.Name, Reconciled: 1})
	}
	switch {
	case err != nil:
		return r.uncertains(r.withEarlier(fmt.Errorf("client: reconcile: %w", err))), true
	case rec.Verdict == VerdictFound:
		return r.completes(rec.Effect, foundAs), true
	case rec.Verdict == VerdictAbsent, rec.Verdict == VerdictResendSafe:
		return nil, false
	default:
		reason := rec.Reason
		if reason == "" {
			reason = "the provider could not tell whether it happened"
		}
		return r.uncertains(r.withEarlier(errors.New("client: reconcile: " + reason))), true
	}
}

// askReconciler calls the reconciler, turning a panic into an error: the
// action then stays uncertain.
func (r *run) askReconciler(ctx context.Context) (rec Reconciliation, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec, err = Reconciliation{}, fmt.Errorf("client: reconciler of %s panicked: %v", r.t.Name, p)
		}
	}()
	return r.t.Reconciler.Reconcile(ctx, r.inv)
}

// runTool calls the tool, turning a panic into an ambiguous error: it may
// have acted before it panicked.
func (r *run) runTool(ctx context.Context) (eff Effect, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Ambiguous(fmt.Errorf("client: tool %s panicked: %v", r.t.Name, p))
		}
	}()
	if err := ctx.Err(); err != nil {
		// The fence closed (or the call ended) before this run: it sends
		// nothing.
		return Effect{}, Definite(fmt.Errorf("client: not sent: %w", context.Cause(ctx)))
	}
	return r.t.Run(ctx, r.inv)
}
