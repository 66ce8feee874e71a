package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"golang.org/x/sync/singleflight"

	"github.com/idemkit/idemkit/ledger"
)

// Config tunes an Executor. The zero value of each field selects its
// default.
type Config struct {
	// Lease is how long a claim blocks other callers while the tool runs
	// (default 2 minutes). The context's deadline shortens it: a Lambda
	// invocation's claim lapses with the invocation. Long runs renew the
	// lease with Store.Extend.
	Lease time.Duration
	// Retention is how long records are kept (default 24 hours). Keep it at
	// least as long as the providers' deduplication windows.
	Retention time.Duration
	// Wait is how long a call waits for a duplicate in flight elsewhere to
	// finish before answering InProgress (default 2 seconds; negative: no
	// wait).
	Wait time.Duration
	// RecordTimeout bounds the retries of a record write after the tool ran
	// (default 10 seconds).
	RecordTimeout time.Duration
	// MaxInputBytes bounds a call's input (default 1 MiB).
	MaxInputBytes int
	// MaxResultBytes bounds the stored result payload (default 64 KiB, at
	// most ledger.MaxResultBytes). A larger result is not stored; the record
	// is marked Truncated and replays carry no payload.
	MaxResultBytes int
	// Clock tells the time (default: the system clock).
	Clock ledger.Clock
	// NewOwner returns a fresh owner token per claim (default: 128 random
	// bits).
	NewOwner func() string
	// Logger receives one record per settled call (default: discard).
	Logger *slog.Logger
}

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.Lease <= 0 {
		d.Lease = 2 * time.Minute
	}
	if d.Retention <= 0 {
		d.Retention = 24 * time.Hour
	}
	if d.Wait == 0 {
		d.Wait = 2 * time.Second
	}
	if d.RecordTimeout <= 0 {
		d.RecordTimeout = 10 * time.Second
	}
	if d.MaxInputBytes <= 0 {
		d.MaxInputBytes = DefaultMaxInputBytes
	}
	if d.MaxResultBytes <= 0 {
		d.MaxResultBytes = 64 << 10
	}
	d.MaxResultBytes = min(d.MaxResultBytes, ledger.MaxResultBytes)
	if d.Clock == nil {
		d.Clock = ledger.SystemClock{}
	}
	if d.NewOwner == nil {
		d.NewOwner = randomOwner
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Stats counts what an Executor did since it was created.
type Stats struct {
	Executed   int64 // tool runs that succeeded
	Replayed   int64 // calls answered from a done record
	Merged     int64 // concurrent duplicates merged in this process
	Takeovers  int64 // claims over uncertain or abandoned records
	Reconciled int64 // reconciler calls
	Uncertain  int64 // calls that ended uncertain
	Failed     int64 // calls that ended failed
}

type counters struct {
	executed, replayed, merged, takeovers, reconciled, uncertain, failed atomic.Int64
}

// Executor runs side-effecting tools so that each action happens once. It
// is safe for concurrent use.
type Executor struct {
	store ledger.Store
	cfg   Config
	mu    sync.RWMutex
	tools map[string]*Tool
	group singleflight.Group
	n     counters
}

// New returns an Executor that records actions in store. cfg may be nil.
func New(store ledger.Store, cfg *Config) *Executor {
	return &Executor{store: store, cfg: cfg.withDefaults(), tools: map[string]*Tool{}}
}

// Register adds tools. A tool needs a name, a Run function and at least
// one identity field; names must be unique.
func (e *Executor) Register(tools ...Tool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range tools {
		t := tools[i]
		switch {
		case t.Name == "":
			return errors.New("client: tool without a name")
		case t.Run == nil:
			return fmt.Errorf("client: tool %s has no Run function", t.Name)
		case len(t.Identity) == 0:
			return fmt.Errorf("client: tool %s has no identity fields", t.Name)
		case e.tools[t.Name] != nil:
			return fmt.Errorf("client: tool %s registered twice", t.Name)
		}
		for _, f := range append(append([]Field(nil), t.Identity...), t.Validated...) {
			if f.Path == "" {
				return fmt.Errorf("client: tool %s has a field with an empty path", t.Name)
			}
		}
		e.tools[t.Name] = &t
	}
	return nil
}

// Stats returns the counters.
func (e *Executor) Stats() Stats {
	return Stats{
		Executed: e.n.executed.Load(), Replayed: e.n.replayed.Load(), Merged: e.n.merged.Load(),
		Takeovers: e.n.takeovers.Load(), Reconciled: e.n.reconciled.Load(),
		Uncertain: e.n.uncertain.Load(), Failed: e.n.failed.Load(),
	}
}

// Execute performs one tool call of a run at most once per action.
//
// The Result is always meaningful and can be given to the model as it is.
// The error is non-nil only when idemkit itself could not do its job: the
// ledger could not be reached (the tool did not run; the Result says the
// call failed and may be retried), or the outcome could not be recorded
// after the tool ran (the record's lease will lapse and the next attempt
// reconciles). Repeats, conflicts and invalid input are outcomes, not
// errors.
//
// Concurrent identical calls in this process are merged: the tool runs
// once and every caller gets the same Result (with Shared set), computed
// under the context of the first caller.
func (e *Executor) Execute(ctx context.Context, runID string, call Call) (Result, error) {
	e.mu.RLock()
	t := e.tools[call.Tool]
	e.mu.RUnlock()
	if t == nil {
		err := &InputError{Tool: call.Tool, Err: ErrUnknownTool, Msg: "unknown tool"}
		return Result{Outcome: InvalidInput, IsError: true, Err: err,
			Text: fmt.Sprintf("Unknown tool %q. Nothing was done.", call.Tool)}, nil
	}
	id, err := t.identify(runID, call, e.cfg.MaxInputBytes)
	if err != nil {
		return invalidResult(t, err), nil
	}
	type answer struct {
		r   Result
		err error
	}
	v, _, shared := e.group.Do(id.key+"|"+id.fingerprint, func() (any, error) {
		r, err := e.execute(ctx, t, id, runID, call)
		return answer{r, err}, nil
	})
	a := v.(answer)
	if shared {
		e.n.merged.Add(1)
		a.r.Shared = true
	}
	return a.r, a.err
}

func invalidResult(t *Tool, err error) Result {
	r := Result{Outcome: InvalidInput, IsError: true, Err: err}
	var ie *InputError
	if errors.As(err, &ie) && ie.Field != "" && (errors.Is(err, ErrMissingField) || errors.Is(err, ErrFieldType)) {
		r.Text = fmt.Sprintf("%s needs %s to run safely (%s). Nothing was done.", t.Name, ie.Field, ie.Msg)
	} else if ie != nil {
		r.Text = fmt.Sprintf("%s: %s. Nothing was done.", t.Name, ie.Msg)
	} else {
		r.Text = fmt.Sprintf("%s: invalid input. Nothing was done.", t.Name)
	}
	return r
}

// run is the state of one call through the executor.
type run struct {
	e     *Executor
	t     *Tool
	id    identity
	inv   Invocation
	owner string
	// claimedAt is the time of the latest claim.
	claimedAt time.Time
}

func (e *Executor) execute(ctx context.Context, t *Tool, id identity, runID string, call Call) (Result, error) {
	r := &run{e: e, t: t, id: id, inv: Invocation{
		Tool: t.Name, RunID: runID, CallID: call.ID, Input: call.Input, Key: id.key, args: id.args,
	}}
	res, err := r.do(ctx)
	e.cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "idemkit call",
		slog.String("tool", t.Name), slog.String("run", runID), slog.String("key", id.key),
		slog.Int("attempt", res.Attempt), slog.String("outcome", res.Outcome.String()), slog.Any("err", err))
	return res, err
}

// do claims, reconciles when needed, runs, and records.
func (r *run) do(ctx context.Context) (Result, error) {
	// A failed or vanished record can be claimed again, so a duplicate
	// that waited for one gets another round.
	for round := 0; ; round++ {
		if err := ctx.Err(); err != nil {
			return r.failed(fmt.Errorf("client: not started: %w", err), true, "the call was cancelled before it started"), err
		}
		cr, err := r.claim(ctx)
		if err != nil {
			err = fmt.Errorf("client: claim %s: %w", r.id.key, err)
			return r.failed(err, true, "the action ledger is unavailable"), err
		}
		if cr.Claimed {
			return r.claimed(ctx, cr)
		}
		res, retry := r.blocked(ctx, cr.Previous)
		if !retry || round > 0 {
			return res, nil
		}
	}
}

func (r *run) claim(ctx context.Context) (ledger.ClaimResult, error) {
	cfg := &r.e.cfg
	now := cfg.Clock.Now()
	lease := now.Add(cfg.Lease)
	if dl, ok := ctx.Deadline(); ok && dl.Before(lease) {
		lease = dl
	}
	if !lease.After(now) {
		return ledger.ClaimResult{}, context.DeadlineExceeded
	}
	retention := r.t.Retention
	if retention <= 0 {
		retention = cfg.Retention
	}
	r.owner = cfg.NewOwner()
	r.claimedAt = now
	return r.e.store.Claim(ctx, ledger.ClaimParams{
		Key: r.id.key, Tool: r.t.Name, RunID: r.inv.RunID, Owner: r.owner,
		LeaseUntil: lease, Fingerprint: r.id.fingerprint,
		ExpiresAt: now.Add(max(retention, cfg.Lease+time.Second)),
	})
}

// claimed runs the action under a claim the caller now owns.
func (r *run) claimed(ctx context.Context, cr ledger.ClaimResult) (Result, error) {
	r.inv.Attempt = cr.Attempt
	r.inv.DownstreamKey = DownstreamKey(r.id.key, cr.Attempt)
	r.inv.AttemptAt = r.claimedAt
	reconciled := false
	if cr.MustReconcile() {
		// The earlier owner may have sent this attempt's key long before.
		r.inv.AttemptAt = cr.Previous.AttemptAt
		r.e.n.takeovers.Add(1)
		if res, done, err := r.reconcile(ctx, errEarlierUnknown, AlreadyDone); done {
			return res, err
		}
		reconciled = true
	}
	stop := r.heartbeat(ctx)
	eff, err := r.runTool(ctx)
	stop()
	if err == nil {
		return r.complete(ctx, eff, Executed)
	}
	switch class := ClassOf(err); class {
	case ClassDefinite, ClassPermanent:
		if reconciled {
			// A resend the provider refused (429, 409 while the first request
			// is still running, a replayed rejection) says nothing about the
			// earlier attempt, which may have taken effect.
			return r.uncertain(ctx, fmt.Errorf("client: the resend failed (%w); an earlier attempt may have taken effect", err))
		}
		return r.fail(ctx, err, class == ClassDefinite)
	default:
		// The effect may exist. Ask the provider now; if it says the effect
		// does not exist (or that a resend is deduplicated), one more run
		// with the same downstream key is safe.
		res, done, rerr := r.reconcile(ctx, err, Executed)
		if done {
			return res, rerr
		}
		eff, err2 := r.runTool(ctx)
		if err2 == nil {
			return r.complete(ctx, eff, Executed)
		}
		// Whatever the resend's class, the first attempt may have acted.
		return r.uncertain(ctx, err2)
	}
}

// errEarlierUnknown is the cause of an uncertain outcome when a call took
// over a record whose effect may exist.
var errEarlierUnknown = errors.New("client: the outcome of an earlier attempt is unknown")

// reconcile asks the tool's reconciler whether the effect exists. done
// reports that the call is settled by it (found: reported as foundAs; or
// undecidable); when done is false the provider said "not found" and the
// tool may run with the same downstream key.
func (r *run) reconcile(ctx context.Context, cause error, foundAs Outcome) (Result, bool, error) {
	if r.t.Reconciler == nil {
		res, err := r.uncertain(ctx, cause) // no reconciler: it stays uncertain
		return res, true, err
	}
	r.e.n.reconciled.Add(1)
	rec, err := r.t.Reconciler.Reconcile(ctx, r.inv)
	switch {
	case err != nil:
		res, werr := r.uncertain(ctx, fmt.Errorf("client: reconcile: %w", err))
		return res, true, werr
	case rec.Verdict == VerdictFound:
		res, werr := r.complete(ctx, rec.Effect, foundAs)
		return res, true, werr
	case rec.Verdict == VerdictNotFound:
		return Result{}, false, nil
	default:
		reason := rec.Reason
		if reason == "" {
			reason = "the provider could not tell whether it happened"
		}
		res, werr := r.uncertain(ctx, errors.New("client: reconcile: "+reason))
		return res, true, werr
	}
}

// runTool calls the tool, turning a panic into an ambiguous error: it may
// have acted before it panicked.
func (r *run) runTool(ctx context.Context) (eff Effect, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = Ambiguous(fmt.Errorf("client: tool %s panicked: %v", r.t.Name, p))
		}
	}()
	return r.t.Run(ctx, r.inv)
}

// heartbeat renews the lease every half lease while a long tool runs, up
// to the context's deadline (a claim never outlives its invocation). The
// returned func stops it.
func (r *run) heartbeat(ctx context.Context) func() {
	cfg := &r.e.cfg
	dl, hasDeadline := ctx.Deadline()
	if hasDeadline && !dl.After(r.claimedAt.Add(cfg.Lease)) {
		return func() {} // the claim already lasts until the deadline
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(cfg.Lease / 2)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				lease := cfg.Clock.Now().Add(cfg.Lease)
				if hasDeadline && dl.Before(lease) {
					lease = dl
				}
				if err := r.e.store.Extend(ctx, r.id.key, r.owner, lease); err != nil {
					cfg.Logger.WarnContext(ctx, "idemkit: lease not renewed", slog.String("key", r.id.key), slog.Any("err", err))
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

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
	c := ledger.Completion{Summary: eff.Summary, Ref: eff.Ref, Result: eff.Result}.Fit(r.e.cfg.MaxResultBytes)
	err := r.write(ctx, func(ctx context.Context) error { return r.e.store.Complete(ctx, r.id.key, r.owner, c) })
	if outcome == Executed {
		r.e.n.executed.Add(1)
	} else {
		r.e.n.replayed.Add(1)
	}
	res := r.doneResult(outcome, c.Summary, c.Ref, eff.Result)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ledger.ErrNotOwner):
		// The lease lapsed while the tool ran and another caller took the
		// record over; it reconciles with the provider, which has the key.
		r.e.cfg.Logger.WarnContext(ctx, "idemkit: done but the claim was lost", slog.String("key", r.id.key))
		return res, nil
	default:
		res.Text += " (It could not be recorded yet; it will be reconciled, so do not repeat it.)"
		return res, fmt.Errorf("client: record done %s: %w", r.id.key, err)
	}
}

func (r *run) doneResult(outcome Outcome, summary, ref string, payload []byte) Result {
	res := Result{Outcome: outcome, Key: r.id.key, Attempt: r.inv.Attempt, Summary: summary, Ref: ref, Payload: payload}
	if outcome == Executed {
		res.Text = "Done: " + summary
	} else {
		res.Text = fmt.Sprintf("Already done %s: %s. Do not repeat it.", r.earlier(), summary)
	}
	return res
}

func (r *run) earlier() string {
	if r.t.Scope == ScopeRun {
		return "earlier in this run"
	}
	return "earlier"
}

func (r *run) fail(ctx context.Context, cause error, retryable bool) (Result, error) {
	err := r.write(ctx, func(ctx context.Context) error {
		return r.e.store.Fail(ctx, r.id.key, r.owner, ledger.Failure{Definite: true, Reason: ledger.Clip(cause.Error(), ledger.MaxReasonBytes)})
	})
	res := r.failed(cause, retryable, cause.Error())
	if err != nil && !errors.Is(err, ledger.ErrNotOwner) {
		return res, fmt.Errorf("client: record failure %s: %w", r.id.key, err)
	}
	return res, nil
}

// failed builds a Failed result: nothing was done.
func (r *run) failed(cause error, retryable bool, reason string) Result {
	r.e.n.failed.Add(1)
	return failedResult(r.id.key, r.inv.Attempt, cause, retryable, reason)
}

func failedResult(key string, attempt int, cause error, retryable bool, reason string) Result {
	res := Result{Outcome: Failed, IsError: true, Key: key, Attempt: attempt, Err: cause, Retryable: retryable}
	if retryable {
		res.Text = fmt.Sprintf("Failed, nothing was done: %s. You may retry.", reason)
	} else {
		res.Text = fmt.Sprintf("Failed, nothing was done. Do not retry: %s.", reason)
	}
	return res
}

func (r *run) uncertain(ctx context.Context, cause error) (Result, error) {
	r.e.n.uncertain.Add(1)
	err := r.write(ctx, func(ctx context.Context) error {
		return r.e.store.Fail(ctx, r.id.key, r.owner, ledger.Failure{Definite: false, Reason: ledger.Clip(cause.Error(), ledger.MaxReasonBytes)})
	})
	res := uncertainResult(r.id.key, r.inv.Attempt, cause)
	if err != nil && !errors.Is(err, ledger.ErrNotOwner) {
		return res, fmt.Errorf("client: record uncertain %s: %w", r.id.key, err)
	}
	return res, nil
}

func uncertainResult(key string, attempt int, cause error) Result {
	return Result{Outcome: Uncertain, IsError: true, Key: key, Attempt: attempt, Err: cause,
		Text: "Outcome unknown: the request may have gone through. It is being reconciled; do not retry."}
}

// blocked answers a call whose claim was refused by prev. retry reports
// that prev failed or vanished while we waited, so a new claim may run it;
// the Result is then the answer to give if no more rounds are left.
func (r *run) blocked(ctx context.Context, prev *ledger.Record) (Result, bool) {
	if prev.State == ledger.StatePending && prev.Fingerprint == r.id.fingerprint {
		prev = r.waitSettled(ctx, prev)
	}
	inProgress := Result{Outcome: InProgress, IsError: true, Key: r.id.key, Text: "Already in progress. Do not retry."}
	if prev == nil { // gone (expired, abandoned) while waiting: claim again
		return inProgress, true
	}
	if prev.Fingerprint != r.id.fingerprint {
		return r.conflict(prev), false
	}
	switch prev.State {
	case ledger.StateDone:
		r.e.n.replayed.Add(1)
		res := r.doneResult(AlreadyDone, prev.Summary, prev.Ref, prev.Result)
		res.Attempt = prev.Attempt
		return res, false
	case ledger.StateFailed: // the other call failed: this one may try
		return failedResult(r.id.key, prev.Attempt, errors.New(prev.Reason), true, prev.Reason), true
	case ledger.StateUncertain:
		r.e.n.uncertain.Add(1)
		return uncertainResult(r.id.key, prev.Attempt, errors.New(prev.Reason)), false
	default:
		inProgress.Attempt = prev.Attempt
		return inProgress, false
	}
}

func (r *run) conflict(prev *ledger.Record) Result {
	fields := ""
	for i, f := range r.t.Validated {
		if i > 0 {
			fields += " or "
		}
		fields += f.Path
	}
	what := "done"
	if prev.State != ledger.StateDone {
		what = "started"
	}
	return Result{Outcome: Conflict, IsError: true, Key: r.id.key, Attempt: prev.Attempt,
		Summary: prev.Summary, Ref: prev.Ref,
		Text: fmt.Sprintf("A %s for %s was already %s with different %s. Not repeated.", r.t.Name, r.id.described, what, fields)}
}

// waitSettled polls the record with backoff for up to Config.Wait while
// another caller holds it. It returns the last record seen (nil if it
// disappeared).
func (r *run) waitSettled(ctx context.Context, prev *ledger.Record) *ledger.Record {
	if r.e.cfg.Wait < 0 {
		return prev
	}
	// The options, not fields set afterwards: the constructor already
	// fixed the first interval.
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(5*time.Millisecond),
		backoff.WithMaxInterval(200*time.Millisecond),
		backoff.WithMaxElapsedTime(r.e.cfg.Wait),
	)
	bc := backoff.WithContext(b, ctx)
	for {
		d := bc.NextBackOff()
		if d == backoff.Stop {
			return prev
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return prev
		case <-t.C:
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
		}
	}
}
