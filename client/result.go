package client

import (
	"encoding/json"
	"fmt"
	"time"
)

// Outcome is what happened to a call.
type Outcome int

// The outcomes of a call. Repeats, conflicts and work in flight are
// outcomes, not errors.
const (
	// Executed: the tool ran now and succeeded.
	Executed Outcome = iota + 1
	// AlreadyDone: an earlier call did it; the stored summary is replayed.
	AlreadyDone
	// InProgress: another call holds the claim and did not finish within
	// the wait.
	InProgress
	// Failed: definitely nothing was done.
	Failed
	// Uncertain: the effect may exist; it is left to reconciliation.
	Uncertain
	// Conflict: the action was done with different validated fields.
	Conflict
	// InvalidInput: the input cannot identify an action; nothing ran.
	InvalidInput
)

var outcomeNames = [...]string{"", "executed", "already done", "in progress", "failed", "uncertain", "conflict", "invalid input"}

// String returns the outcome in words ("already done").
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// IsError reports whether the outcome is shown to the model as an error
// (a tool_result with is_error set).
func (o Outcome) IsError() bool { return o != Executed && o != AlreadyDone }

// Result is what a call returns: an outcome and the text the model is told.
type Result struct {
	Outcome Outcome
	// Text is the model-facing message (see the package documentation).
	Text string
	// IsError marks the result as an error for the model.
	IsError bool
	// Key is the action key (empty for invalid input).
	Key string
	// Attempt is the attempt number the call ran or found: for a Failed
	// result, the attempt that failed.
	Attempt int
	// Summary, Ref and Payload describe the effect (Executed, AlreadyDone).
	Summary string
	Ref     string
	Payload json.RawMessage
	// Retryable: for Failed, whether the same call may succeed later.
	Retryable bool
	// Err is the cause of a Failed, Uncertain or InvalidInput outcome.
	Err error
	// Shared: the result was produced for a concurrent identical call in
	// this process and shared with this one (set on every merged call; the
	// calls merged into one that executed are AlreadyDone).
	Shared bool
	// TakeoverAt, for InProgress, is when the claim that holds the action
	// may be taken over if its owner's heartbeats stop
	// (ledger.Record.TakeoverAt of the record found: its LeaseUntil, on
	// the ledger's clock): a repeat at or after it either finds the action
	// settled or takes it over (reconciling first). While the owner is
	// alive its heartbeats move it; a caller that retries should wait at
	// least until then, and not give up before Config.Liveness has passed
	// since.
	TakeoverAt time.Time
}
