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
// The iterations of a continue-as-new chain share the workflow id: an
// activity with the same identity on each iteration acts once for the
// chain, and the later iterations get a Done with Replayed set. When each
// iteration is meant to act (a weekly digest), put the iteration, the
// period or the batch in the identity (Options.Identity: {"listId"},
// {"iteration"}).
//
// # Errors Temporal sees
//
// The outcomes that no retry can change are non-retryable application
// errors (temporal.NewNonRetryableApplicationError), with the types
// ErrTypeConflict, ErrTypeInvalidInput and ErrTypePermanent. An action in
// progress elsewhere is a retryable ErrTypeInProgress error whose
// NextRetryDelay is when the claim may be taken over; an uncertain one is
// a retryable error, and the next attempt reconciles with the provider
// (Options.Reconciler) before it may run again. A done action is never an
// error: its result is a Done, whose output is known, or, when a
// reconciler found the effect of an attempt that died before recording
// its output, unknown with the provider's reference (Done.Known false).
// A definite failure of the function is returned as it is, for Temporal's
// retry policy to decide.
package oncelytemporal

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

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
	// ErrTypePermanent: the function failed with an error marked
	// client.Permanent: nothing was done and a retry will not succeed.
	ErrTypePermanent = "OncelyPermanent"
)

// ErrTypeInProgress is the application error type of the retryable
// error an attempt returns when another attempt or worker holds the
// action's claim: its NextRetryDelay is when the claim may be taken over
// (client.Result.TakeoverAt), so that Temporal's next attempt comes when
// it can act, not while the retry policy's attempts run out. When the
// retry policy cannot reach that time (its attempts or ScheduleToClose
// are used up first) the error is non-retryable and says so.
const ErrTypeInProgress = "OncelyInProgress"

// Options describe a wrapped activity: the identity, validated values,
// scope, retention, summary, reference and reconciler of oncelyfunc.Options,
// whose documentation applies. Identity is required. RunID defaults to
// WorkflowRunID.
type Options[Out any] = oncelyfunc.Options[Out]

// Key selects an identity or validated value from the activity's input by
// a JMESPath expression over its JSON form (see oncelyfunc.Key).
type Key = oncelyfunc.Key

// Done is what a wrapped activity returns: the function's output when it
// is known (Known), and the provider's reference to the effect either way
// (see oncelyfunc.Done). A workflow decodes the activity's result into a
// Done[Out]. An attempt that finds the action done by an attempt that died
// before recording its output (a reconciler found the effect) returns a
// Done with Known false and the provider's reference and summary: the
// workflow goes on, and tests Known before reading Value.
type Done[Out any] = oncelyfunc.Done[Out]

// Registry is where an activity is registered: a worker.Worker, or a
// testsuite.TestWorkflowEnvironment.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// An Act is an activity made once per identity and workflow by Activity.
// Register it with a worker under the name the wrapped function would
// have had (Register), or call Execute from an activity of your own.
type Act[In, Out any] struct {
	name  string
	runID func(context.Context) string
	call  func(context.Context, In) (Done[Out], client.Result, error)
	now   func() time.Time
}

// Activity registers a tool named tool with exec and returns fn as an
// activity that runs fn at most once per identity and workflow.
//
// Its activity type name is the one Temporal gives fn itself (ActivityName:
// "SendReceipt" for a function SendReceipt, or for a method value
// acts.SendReceipt of a struct whose methods are activities): register it
// with Register, and the workflow calls it by name or by function
// reference (workflow.ExecuteActivity(ctx, SendReceipt, in), or
// a.SendReceipt with a nil *Activities) as it would the unwrapped
// function. The workflow decodes the result into a Done[Out].
//
// Inside fn, DownstreamKey gives the key to hand the provider (an
// Idempotency-Key, a message reference), so that the provider itself
// recognises a repeat of an attempt that may have reached it. The lease of
// the claim follows the activity's context: its deadline
// (StartToCloseTimeout) bounds it. While an attempt runs (fn, or the wait
// for a claim held elsewhere) it heartbeats when the activity has a
// HeartbeatTimeout.
//
// Outside an activity (no activity info in ctx) and without Options.RunID
// Execute fails with ErrNotActivity and runs nothing.
func Activity[In, Out any](exec *client.Executor, tool string, opts Options[Out], fn func(context.Context, In) (Out, error)) (*Act[In, Out], error) {
	if opts.RunID == nil {
		opts.RunID = WorkflowRunID
	}
	if fn == nil {
		return nil, fmt.Errorf("oncelytemporal: %s: nil function", tool)
	}
	call, err := oncelyfunc.WrapDone(exec, tool, opts, fn)
	if err != nil {
		return nil, err
	}
	return &Act[In, Out]{name: ActivityName(fn), runID: opts.RunID, call: call, now: time.Now}, nil
}

// Name returns the activity type name Register uses: ActivityName of the
// wrapped function.
func (a *Act[In, Out]) Name() string { return a.name }

// Register registers Execute with r under Name.
func (a *Act[In, Out]) Register(r Registry) {
	r.RegisterActivityWithOptions(a.Execute, activity.RegisterOptions{Name: a.name})
}

// Execute is the activity function: it runs the wrapped function at most
// once per identity and workflow and answers:
//   - done (now, earlier, or found by the reconciler): a Done and nil;
//   - in progress elsewhere: a retryable ErrTypeInProgress error whose
//     NextRetryDelay is when the claim may be taken over;
//   - uncertain: a retryable error (the next attempt reconciles);
//   - a conflict, an input without identity, a client.Permanent failure:
//     a non-retryable error (ErrTypeConflict, ErrTypeInvalidInput,
//     ErrTypePermanent);
//   - any other failure of the function: its error, for the retry policy.
func (a *Act[In, Out]) Execute(ctx context.Context, in In) (Done[Out], error) {
	if a.runID(ctx) == "" {
		return Done[Out]{}, temporal.NewNonRetryableApplicationError(ErrNotActivity.Error(), ErrTypeInvalidInput, ErrNotActivity)
	}
	stop := heartbeat(ctx)
	d, res, err := a.call(ctx, in)
	stop()
	if err != nil && errors.Is(err, oncelyfunc.ErrInProgress) {
		return d, a.inProgress(ctx, err, res.TakeoverAt)
	}
	return d, temporalError(err)
}

// inProgress is the error of an attempt blocked by a claim held elsewhere:
// retryable, with Temporal's next attempt when the claim may be taken
// over, unless the retry policy cannot last until then.
func (a *Act[In, Out]) inProgress(ctx context.Context, err error, takeover time.Time) error {
	delay := time.Duration(0)
	if !takeover.IsZero() {
		// A second beyond the lease: the ledger's clock, not this
		// worker's, decides when it ends.
		delay = max(takeover.Sub(a.now()), 0) + time.Second
	}
	if activity.IsActivity(ctx) {
		info := activity.GetInfo(ctx)
		if rp := info.RetryPolicy; rp != nil && rp.MaximumAttempts > 0 && info.Attempt >= rp.MaximumAttempts {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"%v: the retry policy's %d attempts are used up before the claim may be taken over at %s: the retry budget must outlast the claim (see RetryBudget)",
				err, rp.MaximumAttempts, takeover.UTC().Format(time.RFC3339)), ErrTypeInProgress, err)
		}
		if info.ScheduleToCloseTimeout > 0 && !takeover.IsZero() &&
			info.ScheduledTime.Add(info.ScheduleToCloseTimeout).Before(a.now().Add(delay)) {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
				"%v: ScheduleToCloseTimeout %s ends before the claim may be taken over at %s: the retry budget must outlast the claim (see RetryBudget)",
				err, info.ScheduleToCloseTimeout, takeover.UTC().Format(time.RFC3339)), ErrTypeInProgress, err)
		}
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), ErrTypeInProgress,
		temporal.ApplicationErrorOptions{NextRetryDelay: delay, Cause: err})
}

// RetryBudget checks that an activity's options let it outlast a claim
// left by a dead attempt (the rule that connects Temporal's retries to
// oncely's claims): a worker that dies inside the activity leaves its
// claim until the attempt's StartToCloseTimeout (the claim's lease), the
// next attempt is told "in progress" and retries when the claim may be
// taken over, and the one after takes it over. So the retry policy must
// allow at least three attempts (MaximumAttempts 0, unlimited, or 3 or
// more), and ScheduleToCloseTimeout, when set, must be at least three
// StartToCloseTimeouts. Call it where the activity options are built, or
// in a test of them; Execute enforces the same rule when it is told "in
// progress" and its retries could not reach the takeover.
func RetryBudget(startToClose, scheduleToClose time.Duration, rp *temporal.RetryPolicy) error {
	if startToClose <= 0 && scheduleToClose <= 0 {
		return errors.New("oncelytemporal: no StartToCloseTimeout or ScheduleToCloseTimeout: the claim's lease has no bound")
	}
	if rp != nil && rp.MaximumAttempts > 0 && rp.MaximumAttempts < 3 {
		return fmt.Errorf("oncelytemporal: RetryPolicy.MaximumAttempts %d: at least 3 attempts are needed to outlast a dead attempt's claim (the one that died, one told in progress, one that takes over)", rp.MaximumAttempts)
	}
	if scheduleToClose > 0 && startToClose > 0 && scheduleToClose < 3*startToClose {
		return fmt.Errorf("oncelytemporal: ScheduleToCloseTimeout %s is under 3 StartToCloseTimeouts (%s): the retries cannot outlast a dead attempt's claim", scheduleToClose, 3*startToClose)
	}
	return nil
}

// heartbeat records a heartbeat every third of the activity's
// HeartbeatTimeout until stop is called, so that waiting for a claim (or
// a long provider call) is not taken for a dead worker. Without a
// HeartbeatTimeout it does nothing.
func heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	hb := activity.GetInfo(ctx).HeartbeatTimeout
	if hb <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(max(hb/3, 10*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done); <-finished }
}

// ActivityName returns the activity type name Temporal gives fn when it
// is registered without a name: the function's name without its package
// ("SendReceipt"), or a method's name for a method value
// ("acts.SendReceipt" is "SendReceipt"), as the worker's registry and
// workflow.ExecuteActivity derive it.
func ActivityName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	full := runtime.FuncForPC(v.Pointer()).Name()
	short := full[strings.LastIndexByte(full, '.')+1:]
	return strings.TrimSuffix(short, "-fm")
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
	case errors.Is(err, oncelyfunc.ErrUncertain):
		return err
	case errclass.Of(err) == errclass.Permanent:
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypePermanent, err)
	}
	return err
}
