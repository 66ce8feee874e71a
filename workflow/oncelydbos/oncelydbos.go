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

// ErrNotWorkflow: the step was run outside a DBOS workflow, where there is
// no workflow id to scope its action.
var ErrNotWorkflow = errors.New("oncelydbos: not called in a DBOS workflow")

// Step registers a tool named name with exec and returns a function that
// runs fn as a DBOS step (dbos.RunAsStep, named name) at most once per
// identity and workflow. Call it from a workflow in place of
// dbos.RunAsStep; opts are DBOS's step options (WithStepMaxRetries, ...).
//
// Inside fn, DownstreamKey gives the key to hand the provider (an
// Idempotency-Key, a message reference).
//
// Outcomes that no retry can change (Retryable reports false) end
// WithStepMaxRetries's retries at once, unless opts sets its own
// dbos.WithStepRetryPredicate.
func Step[In, Out any](exec *client.Executor, name string, o Options[Out], fn func(context.Context, In) (Out, error)) (func(ctx dbos.Context, in In, opts ...dbos.StepOption) (Out, error), error) {
	userRunID := o.RunID
	o.RunID = func(ctx context.Context) string {
		if userRunID != nil {
			return userRunID(ctx)
		}
		id, _ := ctx.Value(workflowKey{}).(string)
		return id
	}
	wrapped, err := oncelyfunc.Wrap(exec, name, o, fn)
	if err != nil {
		return nil, err
	}
	return func(ctx dbos.Context, in In, opts ...dbos.StepOption) (Out, error) {
		var zero Out
		if ctx == nil {
			return zero, ErrNotWorkflow
		}
		wf, err := dbos.GetWorkflowID(ctx)
		if err != nil || wf == "" {
			return zero, ErrNotWorkflow
		}
		all := append([]dbos.StepOption{dbos.WithStepRetryPredicate(Retryable)}, opts...)
		all = append(all, dbos.WithStepName(name))
		return dbos.RunAsStep(ctx, func(stepCtx context.Context) (Out, error) {
			return wrapped(context.WithValue(stepCtx, workflowKey{}, wf), in)
		}, all...)
	}, nil
}

type workflowKey struct{}

// DownstreamKey returns, inside a function wrapped by Step, the key to pass
// to the provider for this action's attempt; "" outside one.
func DownstreamKey(ctx context.Context) string { return oncelyfunc.DownstreamKey(ctx) }

// Retryable reports whether running the step again may change err's
// outcome: false for a conflict, an input without identity, a done action
// whose result was not kept, and a failure marked client.Permanent; true
// otherwise (an action in progress elsewhere or uncertain is reconciled by
// the next run).
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
