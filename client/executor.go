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

	"golang.org/x/sync/singleflight"

	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/internal/clip"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
)

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

type stats struct {
	executed, replayed, merged, takeovers, reconciled, uncertain, failed atomic.Int64
}

// Executor runs side-effecting tools so that each action happens once. It
// is safe for concurrent use.
//
// A call that waits for a duplicate in flight is woken as soon as a run in
// this process settles the action, through a registry that every Executor
// of the process shares, keyed by action key. A holder in another process
// is watched for when the Store is a ledger.Watcher (the SQLite, PostgreSQL
// and Redis ledgers are: the caller is woken by the ledger when the holder
// settles) and polled for otherwise. A waiter on another ledger that is
// woken by mistake reads its own record and waits on.
type Executor struct {
	store ledger.Store
	cfg   Config
	mu    sync.RWMutex
	tools map[string]*Tool
	// envErr is DisabledEnv's unknown value, when New found one: every
	// Register and Execute fails with it.
	envErr error
	group  singleflight.Group
	n      stats
	// poll is the longest interval between two looks at a record held by
	// a caller in another process (waitPoll).
	poll time.Duration
	// wakes signals settles to waiting callers: settles, shared by every
	// Executor of the process (tests give theirs one of their own).
	wakes *wakeups
	// cnt writes the counter records (nil with Config.NoCounters).
	cnt *counters.Recorder
}

// waitPoll bounds the interval of waitSettled's polls: a duplicate whose
// first attempt runs in another process learns of its end this late at
// most, unless its Store watches the key (ledger.Watcher).
const waitPoll = 25 * time.Millisecond

// watchPoll bounds the interval of waitSettled's polls while its Store
// watches the key: a signal lost with a broken connection is made up for
// this late at most.
const watchPoll = time.Second

// New returns an Executor that records actions in store. cfg may be nil.
// A nil store is a programming error: New panics at once rather than at the
// first call.
//
// New reads the environment: DisabledEnv (ONCELY_DISABLED) set to 1,
// true, yes or on turns Config.Disabled on, whatever cfg says. A value it
// does not know is not guessed at: Register and every Execute of the
// Executor fail with ErrDisabledEnv, naming the variable, the value and
// the values it accepts (see DisabledEnv).
func New(store ledger.Store, cfg *Config) *Executor {
	if store == nil {
		panic("client: New needs a ledger.Store (got nil)")
	}
	c := cfg.withDefaults()
	disabled, envErr := parseDisabled(os.Getenv(DisabledEnv))
	if envErr != nil {
		c.Logger.Error("oncely: "+envErr.Error()+"; every call fails until it is fixed", slog.String("env", DisabledEnv))
	}
	c.Disabled = c.Disabled || disabled
	if c.Disabled {
		c.Logger.Warn("oncely: DISABLED: tools run directly, without the ledger; repeated calls are NOT deduplicated",
			slog.String("env", DisabledEnv))
	}
	e := &Executor{store: store, cfg: c, tools: map[string]*Tool{}, poll: waitPoll, wakes: settles, envErr: envErr}
	if !c.NoCounters && !c.Disabled && envErr == nil {
		e.cnt = counters.New(store, c.Clock, 0)
		e.cnt.OnError = func(err error) {
			c.Logger.Warn("oncely: writing the counter records failed; they are kept for the next write", slog.Any("err", err))
		}
	}
	return e
}

// FlushCounters writes the counter records of what the Executor counted
// since the last write now (see Config.NoCounters), rather than within a
// minute: call it before the process exits so that its last minute is not
// lost.
func (e *Executor) FlushCounters(ctx context.Context) error { return e.cnt.Flush(ctx) }

// Register adds tools, all or none: it checks every tool first and
// registers nothing when one is refused. A tool needs a name of at most
// ledger.MaxKeyBytes bytes, unique in the Executor, a Run function, at least
// one identity field, field paths that are non-empty and appear once across
// Identity and Validated, and a Scope among ScopeRun, ScopeTenant and
// ScopeGlobal. It fails with ErrDisabledEnv when New found a value of
// DisabledEnv it does not know.
func (e *Executor) Register(tools ...Tool) error {
	if e.envErr != nil {
		return e.envErr
	}
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
// The error is non-nil only when oncely itself could not do its job: the
// ledger could not be reached (the tool did not run; the Result says the
// call failed and may be retried), or the outcome could not be recorded
// after the tool ran (the record's lease will lapse and the next attempt
// reconciles). Repeats, conflicts and invalid input are outcomes, not
// errors.
//
// Concurrent identical calls in this process are merged: the tool runs
// once and every caller gets the same Result (with Shared set), computed
// under the context of the first caller, except that a call merged into
// one that executed is answered AlreadyDone ("Already done"): the model
// that asked twice in one answer is told the second was not done again.
func (e *Executor) Execute(ctx context.Context, runID string, call Call) (Result, error) {
	if e.envErr != nil {
		// Whether the program meant oncely on or off is unknown: nothing
		// runs, and the model is told the application is at fault.
		return Result{Outcome: InvalidInput, IsError: true, Err: e.envErr, Text: textHostError(call.Tool)}, e.envErr
	}
	e.mu.RLock()
	t := e.tools[call.Tool]
	e.mu.RUnlock()
	if t == nil {
		err := &InputError{Tool: call.Tool, Err: ErrUnknownTool, Msg: "unknown tool"}
		return Result{Outcome: InvalidInput, IsError: true, Err: err,
			Text: textUnknownTool(call.Tool)}, nil
	}
	if err := hostError(t, runID, call); err != nil {
		return Result{Outcome: InvalidInput, IsError: true, Err: err,
			Text: textHostError(t.Name)}, err
	}
	id, err := t.identify(runID, call, e.cfg.MaxInputBytes)
	if errors.Is(err, ErrHostInput) {
		// A custom normalizer returned what no key can hold: the
		// program's mistake, which the model cannot fix.
		return Result{Outcome: InvalidInput, IsError: true, Err: err, Text: textHostError(t.Name)}, err
	}
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
	ran := false // this caller's function ran: it is the first of the merged calls
	v, _, shared := e.group.Do(flight, func() (any, error) {
		ran = true
		r, err := e.execute(ctx, t, id, runID, call)
		return answer{r, err}, nil
	})
	a := v.(answer)
	if !ran && a.r.Outcome == Executed {
		// A concurrent identical call (two identical tool calls in one
		// model answer) did it: this one is told so, not "Done" twice.
		a.r.Outcome = AlreadyDone
		a.r.Text = textAlreadyDone(t.Scope, a.r.Summary)
	}
	if shared {
		e.n.merged.Add(1)
		e.cnt.Add(counters.Counts{Tool: t.Name, Merged: 1})
		a.r.Shared = true
		if l := e.cfg.Logger; l.Enabled(ctx, slog.LevelDebug) {
			l.LogAttrs(ctx, slog.LevelDebug, "oncely merge", e.callAttrs(t, runID, id.key, a.r.Attempt, call)...)
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
	switch class := errclass.Of(err); {
	case err == nil:
		e.n.executed.Add(1)
		res = r.doneResult(Executed, clip.String(eff.Summary, ledger.MaxSummaryBytes), eff.Ref, eff.Result)
	case class == errclass.Ambiguous:
		e.n.uncertain.Add(1)
		res = Result{Outcome: Uncertain, IsError: true, Key: id.key, Attempt: 1, Err: err, Text: textUncertainManual}
	default:
		res = r.failed(err, class == errclass.Definite, err.Error())
	}
	attrs := []slog.Attr{slog.String("outcome", res.Outcome.String())}
	if err != nil {
		attrs = append(attrs, slog.Any("cause", err))
	}
	r.log(ctx, slog.LevelWarn, "oncely call (DISABLED: not deduplicated)", attrs...)
	return res
}

// ErrHostInput is the cause of an InvalidInput result that the host
// program, not the model, must fix: an empty or oversized run id, a
// tenant-scoped tool called without a tenant, a custom Normalizer that
// returned a value no key can hold (a number a double does not hold
// exactly, a value that is not a scalar), or an unknown value of
// DisabledEnv (ErrDisabledEnv). Execute returns it as its error as well.
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
		r.Text = textFieldInvalid(t.Name, ie.Field, ie.Msg)
	} else if ie != nil {
		r.Text = textInputInvalid(t.Name, ie.Msg)
	} else {
		r.Text = textInputInvalid(t.Name, "")
	}
	return r
}
