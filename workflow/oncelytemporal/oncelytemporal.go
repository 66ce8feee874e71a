// Package oncelytemporal makes a Temporal activity's side effect happen once
// per workflow execution, however often Temporal runs the activity.
//
// Temporal runs activities at least once: an attempt whose worker died, or
// that timed out or failed after its effect, is retried by the activity's
// retry policy, and a workflow reset runs again every activity after the
// reset point. Temporal records an activity's result in the workflow's
// history only when an attempt reports it; an effect made by an attempt
// that never reported is invisible to the next one. Activity wraps the
// activity function in an oncely claim: the action key comes from the
// activity's input (Options.Identity), the run is the workflow execution,
// and a repeat gets the first attempt's result from the ledger instead of
// running the effect again.
//
// # The run is the workflow id
//
// The run id of an action is the workflow's namespace and workflow id,
// not Temporal's run id: a reset, and continue-as-new, start a new run id
// (and new activity ids) for the same workflow, and those are exactly the
// repeats to catch. A workflow id reused for a later execution (a
// WorkflowIDReusePolicy that allows it) is the same run too, within the
// ledger's Retention; give each business execution its own workflow id
// (order-42-refund), or set Options.RunID.
//
// # Errors Temporal sees
//
// The outcomes that no retry can change are non-retryable application
// errors (temporal.NewNonRetryableApplicationError), with the types
// ErrTypeConflict, ErrTypeInvalidInput, ErrTypeResultNotKept and
// ErrTypePermanent. An action in progress elsewhere, or uncertain, is a
// retryable error: the next attempt waits for the claim or reconciles
// with the provider (Options.Reconciler) before it may run again.
// A definite failure of the function is returned as it is, for Temporal's
// retry policy to decide.
package oncelytemporal

import (
	"context"
	"errors"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/oncelyfunc"
)

// Application error types of the non-retryable errors an activity returns
// (temporal.ApplicationError.Type()).
const (
	// ErrTypeConflict: the identity was done earlier in this workflow
	// with different validated values (oncelyfunc.ErrConflict).
	ErrTypeConflict = "OncelyConflict"
	// ErrTypeInvalidInput: the input has no usable identity
	// (oncelyfunc.ErrInvalidInput).
	ErrTypeInvalidInput = "OncelyInvalidInput"
	// ErrTypeResultNotKept: the action is done but its result was not
	// stored (oncelyfunc.ErrResultNotKept); see Options.ZeroOnLostResult.
	ErrTypeResultNotKept = "OncelyResultNotKept"
	// ErrTypePermanent: the function failed with an error marked
	// client.Permanent: nothing was done and a retry will not succeed.
	ErrTypePermanent = "OncelyPermanent"
)

// Options describe a wrapped activity: the identity, validated values,
// scope, retention, summary, reference and reconciler of oncelyfunc.Options,
// whose documentation applies. Identity is required. RunID defaults to
// WorkflowRunID.
type Options[Out any] = oncelyfunc.Options[Out]

// Key selects an identity or validated value from the activity's input by
// a JMESPath expression over its JSON form (see oncelyfunc.Key).
type Key = oncelyfunc.Key

// Activity registers a tool named name with exec and returns fn as an
// activity function that runs fn at most once per identity and workflow:
// register it with the worker (worker.RegisterActivityWithOptions, or
// RegisterActivity under its own name) in place of fn.
//
// Inside fn, DownstreamKey gives the key to hand the provider (an
// Idempotency-Key, a message reference), so that the provider itself
// recognises a repeat of an attempt that may have reached it. The lease of
// the claim follows the activity's context: its deadline
// (StartToCloseTimeout) bounds it.
//
// Outside an activity (no activity info in ctx) and without Options.RunID
// the returned function fails with ErrNotActivity and runs nothing.
func Activity[In, Out any](exec *client.Executor, name string, opts Options[Out], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	if opts.RunID == nil {
		opts.RunID = WorkflowRunID
	}
	wrapped, err := oncelyfunc.Wrap(exec, name, opts, fn)
	if err != nil {
		return nil, err
	}
	runID := opts.RunID
	return func(ctx context.Context, in In) (Out, error) {
		if runID(ctx) == "" {
			var zero Out
			return zero, temporal.NewNonRetryableApplicationError(ErrNotActivity.Error(), ErrTypeInvalidInput, ErrNotActivity)
		}
		out, err := wrapped(ctx, in)
		return out, temporalError(err)
	}, nil
}

// ErrNotActivity: the wrapped function was called outside a Temporal
// activity, where there is no workflow to scope its action.
var ErrNotActivity = errors.New("oncelytemporal: not called in an activity (no workflow id for the run)")

// WorkflowRunID is the default Options.RunID: "<namespace>/<workflow id>"
// of the activity's workflow, or "" outside an activity.
func WorkflowRunID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	info := activity.GetInfo(ctx)
	return info.WorkflowNamespace + "/" + info.WorkflowExecution.ID
}

// DownstreamKey returns, inside a function wrapped by Activity, the key to
// pass to the provider for this action's attempt; "" outside one.
func DownstreamKey(ctx context.Context) string { return oncelyfunc.DownstreamKey(ctx) }

// temporalError maps an outcome error to what Temporal's retry policy
// should do with it.
func temporalError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, oncelyfunc.ErrConflict):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeConflict, err)
	case errors.Is(err, oncelyfunc.ErrInvalidInput):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidInput, err)
	case errors.Is(err, oncelyfunc.ErrResultNotKept):
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeResultNotKept, err)
	case errors.Is(err, oncelyfunc.ErrInProgress), errors.Is(err, oncelyfunc.ErrUncertain):
		return err
	case errclass.Of(err) == errclass.Permanent:
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePermanent, err)
	}
	return err
}
