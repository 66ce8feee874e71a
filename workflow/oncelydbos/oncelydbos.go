// Package oncelydbos makes a DBOS step's side effect happen once per
// workflow, however often DBOS runs the step.
//
// DBOS Transact checkpoints a step's output when the step function returns.
// A process that dies between the step's effect and that checkpoint runs
// the step again when the workflow is recovered (same workflow id, same
// step id), and WithStepMaxRetries runs it again in-process after an error
// that followed the effect. Step runs the step function under an oncely
// claim: the action key comes from the step's input (Options.Identity), the
// run is the workflow (its workflow id), and a repeat gets the first run's
// result from the ledger, or is reconciled with the provider when the
// first run died before its result was recorded.
//
// # Ledger and checkpoint
//
// With ledgerpg in the DBOS system database, the ledger shares the
// workflow's database, backups and failover. The claim commits in its own
// transaction before the effect (a claim inside the step's transaction
// would roll back with a crash, leaving no trace of an effect that
// happened outside the database), and the record of the outcome commits
// when the function returns, just before DBOS's checkpoint. A crash between
// the two replays the recorded result on recovery. They are not one
// transaction: DBOS runs a step's own transaction only in
// dbos.RunAsTransaction, which holds it open across the step function
// (across the provider call, under DBOS's idle-in-transaction timeout of
// one minute) and hands the function a dbos.Tx, not the pgx.Tx that
// ledgerpg.Store.InTx takes. The counts do not depend on it: what makes a
// repeat one effect is the claim before the effect and the key handed to
// the provider.
package oncelydbos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/oncelyfunc"
)

// Options describe a wrapped step: the identity, validated values, scope,
// retention, summary, reference and reconciler of oncelyfunc.Options, whose
// documentation applies. Identity is required. RunID defaults to the
// step's workflow id.
type Options[Out any] = oncelyfunc.Options[Out]

// Key selects an identity or validated value from the step's input by a
// JMESPath expression over its JSON form (see oncelyfunc.Key).
type Key = oncelyfunc.Key

// Done is what a wrapped step returns: the function's output when it is
// known (Known), and the provider's reference to the effect either way
// (see oncelyfunc.Done). A run that finds the action done by a run that
// died before recording its output (a reconciler found the effect)
// returns a Done with Known false and the provider's reference and
// summary: the workflow goes on, and tests Known before reading Value.
type Done[Out any] = oncelyfunc.Done[Out]

// ErrNotWorkflow: the step was run outside a DBOS workflow, where there is
// no workflow id to scope its action.
var ErrNotWorkflow = errors.New("oncelydbos: not called in a DBOS workflow")

// Step registers a tool named name with exec and returns a function that
// runs fn as a DBOS step (dbos.RunAsStep) at most once per identity and
// workflow. Call it from a workflow in place of dbos.RunAsStep; opts are
// DBOS's step options (WithStepMaxRetries, WithStepName, ...). The step is
// named name unless opts name it.
//
// fn receives DBOS's step context, as a function given to dbos.RunAsStep
// does: ctx.(dbos.Context) works, and so do dbos.GetWorkflowID and
// dbos.GetStepID. Inside fn, DownstreamKey gives the key to hand the
// provider (an Idempotency-Key, a message reference).
//
// A step blocked by a claim held elsewhere (a process that died on another
// machine, whose claim stands until its lease ends) does not spend the
// step's retries: the step is checkpointed as "in progress until T", the
// workflow sleeps durably (dbos.Sleep) until T, when the claim may be
// taken over (client.Result.TakeoverAt), and runs the step again. Each
// such wait takes two step ids. When the workflow's context has a
// deadline before T, the step fails at once with an error matching
// oncelyfunc.ErrInProgress.
//
// Outcomes that no retry can change (Retryable reports false) end
// WithStepMaxRetries's retries at once, unless opts sets its own
// dbos.WithStepRetryPredicate.
func Step[In, Out any](exec *client.Executor, name string, o Options[Out], fn func(context.Context, In) (Out, error)) (func(ctx dbos.Context, in In, opts ...dbos.StepOption) (Done[Out], error), error) {
	if fn == nil {
		return nil, fmt.Errorf("oncelydbos: %s: nil function", name)
	}
	userRunID := o.RunID
	o.RunID = func(ctx context.Context) string {
		if userRunID != nil {
			return userRunID(ctx)
		}
		if dc, ok := ctx.Value(stepKey{}).(dbos.Context); ok {
			id, _ := dbos.GetWorkflowID(dc)
			return id
		}
		return ""
	}
	wrapped, err := oncelyfunc.WrapDone(exec, name, o, func(ctx context.Context, in In) (Out, error) {
		if dc, ok := ctx.Value(stepKey{}).(dbos.Context); ok {
			// DBOS's context, with the values and deadline oncely added.
			return fn(dbos.From(dc, ctx), in)
		}
		return fn(ctx, in)
	})
	if err != nil {
		return nil, err
	}
	return func(ctx dbos.Context, in In, opts ...dbos.StepOption) (Done[Out], error) {
		if ctx == nil {
			return Done[Out]{}, ErrNotWorkflow
		}
		wf, err := dbos.GetWorkflowID(ctx)
		if err != nil || wf == "" {
			return Done[Out]{}, ErrNotWorkflow
		}
		// DBOS keeps the first step name it is given: the caller's, then
		// ours; and the last retry predicate: the caller's.
		all := append([]dbos.StepOption{dbos.WithStepRetryPredicate(Retryable)}, opts...)
		all = append(all, dbos.WithStepName(name))
		for {
			out, err := dbos.RunAsStep(ctx, func(stepCtx context.Context) (stepOut[Out], error) {
				var dc dbos.Context
				if c, ok := stepCtx.(dbos.Context); ok {
					dc = c
				}
				d, res, err := wrapped(context.WithValue(stepCtx, stepKey{}, dc), in)
				if errors.Is(err, oncelyfunc.ErrInProgress) {
					// Checkpointed: the wait that follows is the
					// workflow's, durable, and spends no retry.
					return stepOut[Out]{InProgress: true, TakeoverAt: res.TakeoverAt, Reason: err.Error()}, nil
				}
				return stepOut[Out]{Done: d}, err
			}, all...)
			if err != nil || !out.InProgress {
				return out.Done, err
			}
			wait := inProgressPause
			if !out.TakeoverAt.IsZero() {
				// A second beyond the lease: the ledger's clock, not this
				// process's, decides when it ends.
				wait = max(time.Until(out.TakeoverAt), 0) + time.Second
			}
			if dl, ok := ctx.Deadline(); ok && time.Now().Add(wait).After(dl) {
				return Done[Out]{}, fmt.Errorf("%s: the claim may be taken over at %s, after the workflow's deadline %s: the workflow's timeout must outlast the claim",
					out.Reason, out.TakeoverAt.UTC().Format(time.RFC3339), dl.UTC().Format(time.RFC3339))
			}
			if _, err := dbos.Sleep(ctx, wait); err != nil {
				return Done[Out]{}, err
			}
		}
	}, nil
}

// inProgressPause is the wait before running again a step blocked by a
// claim whose takeover time is not known.
const inProgressPause = time.Second

// stepOut is what the step checkpoints: the Done, or that the action was
// in progress elsewhere until TakeoverAt.
type stepOut[Out any] struct {
	Done       Done[Out] `json:"done"`
	InProgress bool      `json:"inProgress,omitempty"`
	TakeoverAt time.Time `json:"takeoverAt,omitempty"`
	Reason     string    `json:"reason,omitempty"`
}

type stepKey struct{}

// DownstreamKey returns, inside a function wrapped by Step, the key to pass
// to the provider for this action's attempt; "" outside one.
func DownstreamKey(ctx context.Context) string { return oncelyfunc.DownstreamKey(ctx) }

// Retryable reports whether running the step again may change err's
// outcome: false for a conflict, an input without identity, a done action
// whose result was not kept (oncelyfunc.Wrap's ErrResultNotKept), and a failure
// marked client.Permanent; true otherwise (an uncertain action is
// reconciled by the next run).
func Retryable(err error) bool {
	switch {
	case errors.Is(err, oncelyfunc.ErrConflict),
		errors.Is(err, oncelyfunc.ErrInvalidInput),
		errors.Is(err, oncelyfunc.ErrResultNotKept):
		return false
	case errors.Is(err, oncelyfunc.ErrInProgress), errors.Is(err, oncelyfunc.ErrUncertain):
		return true
	}
	return !isPermanent(err)
}

func isPermanent(err error) bool { return err != nil && errclass.Of(err) == errclass.Permanent }
