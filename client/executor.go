package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

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
	// Retention is how long a done or failed record is kept, counted from
	// when it was settled (default 24 hours), whatever the lease: a record
	// settled after a long run is kept for the whole retention. Pending and
	// uncertain records are never dropped. Keep it at least as long as the
	// providers' deduplication windows.
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
	// Logger receives structured events (default: discard): at Info one
	// "idemkit call" per call with its outcome and latency, and the
	// takeovers and reconciliations; at Warn uncertain outcomes, writes
	// fenced off by a newer owner, failed lease renewals and lost leases;
	// at Debug claims, replays and in-process merges. Every event carries
	// the tool, run, action key and attempt.
	Logger *slog.Logger
	// LogInput adds the call's input to the events. Off by default: the
	// input may hold personal data.
	LogInput bool
	// Disabled runs every tool directly, without the ledger: no claim, no
	// replay, no merging, no reconciliation, so repeats are NOT
	// deduplicated by idemkit (providers still get the downstream key).
	// It is an emergency switch, for example while the ledger is down and
	// the agent must go on. The environment variable IDEMKIT_DISABLED
	// (DisabledEnv) set to 1, true, yes or on sets it. New and every call log
	// a warning while it is on.
	Disabled bool
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
		d.NewOwner = ledger.NewOwner
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	return d
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
	// poll is the longest interval between two looks at a record held by
	// a caller in another process (waitPoll).
	poll time.Duration
	// wakes signals settles to waiting callers: settles, shared by every
	// Executor of the process (tests give theirs one of their own).
	wakes *wakeups
}

// waitPoll bounds the interval of waitSettled's polls: a duplicate whose
// first attempt runs in another process learns of its end this late at
// most.
const waitPoll = 25 * time.Millisecond

// New returns an Executor that records actions in store. cfg may be nil.
// A nil store is a programming error: New panics at once rather than at the
// first call. So does a value of DisabledEnv that it does not know.
func New(store ledger.Store, cfg *Config) *Executor {
	if store == nil {
		panic("client: New needs a ledger.Store (got nil)")
	}
	c := cfg.withDefaults()
	disabled, err := parseDisabled(os.Getenv(DisabledEnv))
	if err != nil {
		panic(err.Error())
	}
	c.Disabled = c.Disabled || disabled
	if c.Disabled {
		c.Logger.Warn("idemkit: DISABLED: tools run directly, without the ledger; repeated calls are NOT deduplicated",
			slog.String("env", DisabledEnv))
	}
	return &Executor{store: store, cfg: c, tools: map[string]*Tool{}, poll: waitPoll, wakes: settles}
}

// Register adds tools, all or none: it checks every tool first and
// registers nothing when one is refused. A tool needs a name of at most
// ledger.MaxKeyBytes bytes, unique in the Executor, a Run function, at least
// one identity field, field paths that are non-empty and appear once across
// Identity and Validated, and a Scope among ScopeRun, ScopeTenant and
// ScopeGlobal.
func (e *Executor) Register(tools ...Tool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	names := make(map[string]bool, len(tools))
	for i := range tools {
		if err := e.check(&tools[i], names); err != nil {
			return err
		}
		names[tools[i].Name] = true
	}
	for i := range tools {
		t := tools[i]
		e.tools[t.Name] = &t
	}
	return nil
}

// check validates one tool for Register; names holds the names earlier in
// the same call.
func (e *Executor) check(t *Tool, names map[string]bool) error {
	switch {
	case t.Name == "":
		return errors.New("client: tool without a name")
	case len(t.Name) > ledger.MaxKeyBytes:
		return fmt.Errorf("client: tool name %.40q... is %d bytes, the limit is %d", t.Name, len(t.Name), ledger.MaxKeyBytes)
	case t.Run == nil:
		return fmt.Errorf("client: tool %s has no Run function", t.Name)
	case len(t.Identity) == 0:
		return fmt.Errorf("client: tool %s has no identity fields", t.Name)
	case t.Scope < ScopeRun || t.Scope > ScopeGlobal:
		return fmt.Errorf("client: tool %s has an unknown Scope %d", t.Name, int(t.Scope))
	case e.tools[t.Name] != nil || names[t.Name]:
		return fmt.Errorf("client: tool %s registered twice", t.Name)
	}
	paths := make(map[string]bool, len(t.Identity)+len(t.Validated))
	for _, f := range append(append([]Field(nil), t.Identity...), t.Validated...) {
		switch {
		case f.Path == "":
			return fmt.Errorf("client: tool %s has a field with an empty path", t.Name)
		case paths[f.Path]:
			return fmt.Errorf("client: tool %s declares field %s twice (identity and validated fields are each declared once)", t.Name, f.Path)
		}
		paths[f.Path] = true
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
	if err := hostError(t, runID, call); err != nil {
		return Result{Outcome: InvalidInput, IsError: true, Err: err,
			Text: fmt.Sprintf("%s could not run because of a configuration error in the application, not in your input. Nothing was done; retrying will not help.", t.Name)}, err
	}
	id, err := t.identify(runID, call, e.cfg.MaxInputBytes)
	if err != nil {
		return invalidResult(t, err), nil
	}
	if e.cfg.Disabled {
		return e.direct(ctx, t, id, runID, call), nil
	}
	type answer struct {
		r   Result
		err error
	}
	// Calls merge when they share the action key and the validated
	// fields: a call that differs in those is answered Conflict.
	flight := id.key
	if id.fingerprint != "" {
		flight += "|" + id.fingerprint
	}
	v, _, shared := e.group.Do(flight, func() (any, error) {
		r, err := e.execute(ctx, t, id, runID, call)
		return answer{r, err}, nil
	})
	a := v.(answer)
	if shared {
		e.n.merged.Add(1)
		a.r.Shared = true
		if l := e.cfg.Logger; l.Enabled(ctx, slog.LevelDebug) {
			l.LogAttrs(ctx, slog.LevelDebug, "idemkit merge", e.callAttrs(t, runID, id.key, a.r.Attempt, call)...)
		}
	}
	return a.r, a.err
}

// callAttrs are the attributes every event of a call carries.
func (e *Executor) callAttrs(t *Tool, runID, key string, attempt int, call Call) []slog.Attr {
	attrs := []slog.Attr{slog.String("tool", t.Name), slog.String("run", runID), slog.String("key", key), slog.Int("attempt", attempt)}
	if e.cfg.LogInput {
		attrs = append(attrs, slog.String("input", string(call.Input)))
	}
	return attrs
}

// direct runs a tool without the ledger (Config.Disabled).
func (e *Executor) direct(ctx context.Context, t *Tool, id identity, runID string, call Call) Result {
	r := &run{e: e, t: t, id: id, inv: Invocation{
		Tool: t.Name, RunID: runID, CallID: call.ID, Input: call.Input, Key: id.key, args: id.args(),
		Attempt: 1, DownstreamKey: DownstreamKey(id.key, 1), AttemptAt: e.cfg.Clock.Now(),
	}}
	eff, err := r.runTool(ctx)
	var res Result
	switch class := ClassOf(err); {
	case err == nil:
		e.n.executed.Add(1)
		res = r.doneResult(Executed, ledger.Clip(eff.Summary, ledger.MaxSummaryBytes), eff.Ref, eff.Result)
	case class == ClassAmbiguous:
		e.n.uncertain.Add(1)
		res = Result{Outcome: Uncertain, IsError: true, Key: id.key, Attempt: 1, Err: err, Text: uncertainManualText}
	default:
		res = r.failed(err, class == ClassDefinite, err.Error())
	}
	attrs := []slog.Attr{slog.String("outcome", res.Outcome.String())}
	if err != nil {
		attrs = append(attrs, slog.Any("cause", err))
	}
	r.log(ctx, slog.LevelWarn, "idemkit call (DISABLED: not deduplicated)", attrs...)
	return res
}

// ErrHostInput is the cause of an InvalidInput result that the host
// program, not the model, must fix: an empty or oversized run id, or a
// tenant-scoped tool called without a tenant. Execute returns it as its
// error as well.
var ErrHostInput = errors.New("client: invalid call from the host program")

// hostError checks what the host program passes along with a call.
func hostError(t *Tool, runID string, call Call) error {
	switch {
	case runID == "":
		return &InputError{Tool: t.Name, Err: ErrHostInput, Msg: "the run id is empty"}
	case len(runID) > ledger.MaxKeyBytes:
		return &InputError{Tool: t.Name, Err: ErrHostInput, Msg: fmt.Sprintf("the run id is %d bytes, the limit is %d", len(runID), ledger.MaxKeyBytes)}
	case !utf8.ValidString(runID) || !utf8.ValidString(call.Tenant):
		// Two such ids would be hashed alike once their bad bytes were
		// replaced.
		return &InputError{Tool: t.Name, Err: ErrHostInput, Msg: "the run id or tenant is not valid UTF-8"}
	case t.Scope == ScopeTenant && call.Tenant == "":
		return &InputError{Tool: t.Name, Err: ErrHostInput, Msg: "the tool is tenant-scoped but the call has no Tenant"}
	}
	return nil
}

func invalidResult(t *Tool, err error) Result {
	r := Result{Outcome: InvalidInput, IsError: true, Err: err}
	var ie *InputError
	if errors.As(err, &ie) && ie.Field != "" && (errors.Is(err, ErrMissingField) || errors.Is(err, ErrFieldType)) {
		// The field quoted: "send_email needs "to" to run safely".
		r.Text = fmt.Sprintf("%s needs %q to run safely (%s). Nothing was done.", t.Name, ie.Field, ie.Msg)
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
	r.log(ctx, slog.LevelInfo, "idemkit call", attrs...)
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
			return r.failed(fmt.Errorf("client: not started: %w", err), true, "the call was cancelled before it started"), err
		}
		cr, err := r.claim(ctx)
		if err != nil {
			err = fmt.Errorf("client: claim %s: %w", r.id.key, err)
			if errors.Is(err, ledger.ErrInvalid) || errors.Is(err, ledger.ErrTooLarge) {
				// The store refused what the program passed: retrying will
				// not help, and the model's input is not at fault.
				return r.failed(err, false, "a configuration error in the application"), err
			}
			return r.failed(err, true, "the action ledger is unavailable"), err
		}
		if cr.Claimed {
			r.log(ctx, slog.LevelDebug, "idemkit claim", slog.Bool("claimed", true), slog.String("previous", prevState(cr.Previous)))
			return r.claimed(ctx, cr)
		}
		r.log(ctx, slog.LevelDebug, "idemkit claim", slog.Bool("claimed", false), slog.String("previous", prevState(cr.Previous)))
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

// leaseEnd returns the end of a lease taken or renewed at now: Config.Lease
// later, or the context's deadline when that is sooner (a claim never
// outlives its invocation).
func (r *run) leaseEnd(ctx context.Context, now time.Time) time.Time {
	lease := now.Add(r.e.cfg.Lease)
	if dl, ok := ctx.Deadline(); ok && dl.Before(lease) {
		lease = dl
	}
	return lease
}

func (r *run) claim(ctx context.Context) (ledger.ClaimResult, error) {
	cfg := &r.e.cfg
	now := cfg.Clock.Now()
	lease := r.leaseEnd(ctx, now)
	if !lease.After(now) {
		return ledger.ClaimResult{}, context.DeadlineExceeded
	}
	retention := r.retention()
	r.owner = cfg.NewOwner()
	r.claimedAt, r.leaseUntil = now, lease
	r.settled = r.e.wakes.count.Load()
	p := ledger.ClaimParams{
		Key: r.id.key, Tool: r.t.Name, RunID: r.inv.RunID, Owner: r.owner,
		LeaseUntil: lease, Fingerprint: r.id.fingerprint,
		ExpiresAt: now.Add(max(retention, cfg.Lease+time.Second)),
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
		r.e.n.takeovers.Add(1)
		r.log(ctx, slog.LevelInfo, "idemkit takeover", slog.String("previous", string(prev.State)), slog.Time("sent_by", prev.LeaseUntil))
		if s, done := r.reconcile(f.ctx, errEarlierUnknown, AlreadyDone); done {
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
	switch class := ClassOf(err); {
	case class != ClassAmbiguous && resent:
		// A resend the provider refused (429, 409 while the first request
		// is still running, a replayed rejection) says nothing about the
		// earlier attempt, which may have taken effect.
		return r.uncertains(fmt.Errorf("client: the resend failed (%w); an earlier attempt may have taken effect", err))
	case class != ClassAmbiguous:
		return func(ctx context.Context) (Result, error) { return r.fail(ctx, err, class == ClassDefinite) }
	}
	// The effect may exist. Our request has returned: nothing of this
	// attempt leaves after now. Ask the provider; if it says the effect
	// does not exist (or that a resend is deduplicated), one more run with
	// the same downstream key is safe while we still hold the claim.
	r.inv.SentBy = r.e.cfg.Clock.Now()
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
	return r.uncertains(err2)
}

// mayResend renews the claim before the tool runs again after a
// reconciliation: only the owner of a live lease sends. When the renewal
// fails, nothing is sent and the action stays uncertain.
func (r *run) mayResend(f *fence) (settle, bool) {
	if err := f.renew(r.e.cfg.RecordTimeout); err != nil {
		return r.uncertains(fmt.Errorf("client: not resent: the claim could not be renewed: %w", err)), false
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

// reconcile asks the tool's reconciler whether the effect exists. done
// reports that the call is settled by it (found: reported as foundAs; or
// undecidable); when done is false the provider said "not found" and the
// tool may run with the same downstream key.
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
	r.log(ctx, slog.LevelInfo, "idemkit reconcile", attrs...)
	switch {
	case err != nil:
		return r.uncertains(fmt.Errorf("client: reconcile: %w", err)), true
	case rec.Verdict == VerdictFound:
		return r.completes(rec.Effect, foundAs), true
	case rec.Verdict == VerdictNotFound:
		return nil, false
	default:
		reason := rec.Reason
		if reason == "" {
			reason = "the provider could not tell whether it happened"
		}
		return r.uncertains(errors.New("client: reconcile: " + reason)), true
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

// fence keeps a claim's provider calls inside its lease. Its context, the
// one reconcilers and the tool run under, is cancelled with cause
// ErrLeaseLost when the lease ends without renewal or a renewal finds the
// record taken over. A heartbeat renews the lease every half lease (up to
// the context's deadline); a renewal that fails is retried until the lease
// ends. Lease times are read from Config.Clock; the waits between them are
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
// timer of the next heartbeat: in half a lease; once renewals have failed
// for that long, at half the remaining time until the lease ends.
func (f *fence) schedule() {
	cfg := &f.r.e.cfg
	now := cfg.Clock.Now()
	until := f.lease()
	if !now.Before(until) {
		f.cancel(fmt.Errorf("%w: the lease ended at %s without renewal", ErrLeaseLost, until.UTC().Format(time.RFC3339Nano)))
		f.r.log(f.parent, slog.LevelWarn, "idemkit lease lost", slog.Any("cause", context.Cause(f.ctx)))
		return
	}
	wait := cfg.Lease / 2
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
// call's deadline, so that no renewal can move it.
func (f *fence) atDeadline(until time.Time) bool {
	dl, ok := f.parent.Deadline()
	return ok && !dl.After(until)
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
			f.r.log(f.parent, slog.LevelWarn, "idemkit lease lost", slog.Any("cause", err))
			return
		case err != nil:
			f.r.log(f.parent, slog.LevelWarn, "idemkit lease renewal failed; retrying until the lease ends", slog.Any("err", err))
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
		err := fmt.Errorf("%w: the call's deadline has passed", ErrLeaseLost)
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
		c = ledger.Completion{Summary: ledger.Clip(c.Summary, minimalBytes), Ref: ledger.Clip(c.Ref, minimalBytes),
			Truncated: c.Truncated || len(c.Result) > 0, Retention: c.Retention}
		err = r.write(ctx, func(ctx context.Context) error { return r.e.store.Complete(ctx, r.id.key, r.owner, c) })
	}
	if outcome == Executed {
		r.e.n.executed.Add(1)
	} else {
		r.e.n.replayed.Add(1)
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
		r.log(ctx, slog.LevelWarn, "idemkit fenced write", slog.String("write", "done"), slog.Any("err", err))
		return res, nil
	default:
		res.Text += " (It could not be recorded yet; it will be reconciled, so do not repeat it.)"
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
		res.Text = "Done: " + summary
	} else {
		res.Text = "Already done " + r.earlier() + ": " + summary + ". Do not repeat it."
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
		return r.e.store.Fail(ctx, r.id.key, r.owner, ledger.Failure{Definite: true, Reason: ledger.Clip(cause.Error(), ledger.MaxReasonBytes),
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
		r.log(ctx, slog.LevelWarn, "idemkit fenced write", slog.String("write", write), slog.Any("err", err))
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
	res := r.uncertainResult(r.inv.Attempt, cause)
	r.log(ctx, slog.LevelWarn, "idemkit uncertain", slog.Any("cause", cause), slog.Bool("reconciler", r.t.Reconciler != nil))
	return res, r.recorded(ctx, "uncertain", err)
}

// minimalBytes bounds the summary and reference of a done record that a
// store refused as too large even after Completion.Fit.
const minimalBytes = 256

// The texts of an Uncertain result, with and without a reconciler that can
// settle the action.
const (
	uncertainText       = "Outcome unknown: the request may have gone through. It is being reconciled; do not retry."
	uncertainManualText = "Outcome unknown: the request may have gone through. It cannot be checked automatically; an operator must check it. Do not retry."
)

func (r *run) uncertainResult(attempt int, cause error) Result {
	text := uncertainText
	if r.t.Reconciler == nil {
		text = uncertainManualText
	}
	return Result{Outcome: Uncertain, IsError: true, Key: r.id.key, Attempt: attempt, Err: cause, Text: text}
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
		r.log(ctx, slog.LevelDebug, "idemkit replay", slog.String("ref", prev.Ref))
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
		Text: fmt.Sprintf("A %s for %s was already %s with different %s. Not repeated.", r.t.Name, r.id.described(r.t), what, fields)}
}

// waitSettled waits for up to Config.Wait while another caller holds the
// record, and returns the last record seen (nil if it disappeared). It
// looks at the record whenever a run in this process settles the key (a
// run that recorded it done on the same Store hands the record over), and
// otherwise polls it with backoff, at most Executor.poll apart, for a
// holder in another process.
func (r *run) waitSettled(ctx context.Context, prev *ledger.Record) *ledger.Record {
	if r.e.cfg.Wait < 0 {
		return prev
	}
	// The options, not fields set afterwards: the constructor already
	// fixed the first interval.
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(r.e.poll/5),
		backoff.WithMaxInterval(r.e.poll),
		backoff.WithMaxElapsedTime(r.e.cfg.Wait),
	)
	bc := backoff.WithContext(b, ctx)
	woken, release := r.e.wakes.wait(r.id.key)
	defer func() { release() }()
	deadline := time.NewTimer(r.e.cfg.Wait)
	defer deadline.Stop()
	// The first look is at once if a run in this process settled an
	// action between the claim that returned prev and the registration
	// above (it signalled nobody); otherwise the record is the one the
	// claim just read, and the first look is the first poll.
	for first := r.e.wakes.count.Load() != r.settled; ; first = false {
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
		}
	}
}
