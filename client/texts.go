package client

import (
	"fmt"
	"strings"
)

// The texts the model is told: every Result.Text the executor writes comes
// from this file. The README's "What the model is told" table is checked
// against these functions (TestREADMEModelTexts); a change of wording here
// is a change of that table.

// The fixed texts.
const (
	// textInProgress answers a call whose action another caller still
	// holds after the wait (InProgress).
	textInProgress = "Already in progress. Do not retry."
	// textUncertain answers an ambiguous outcome that the tool's
	// Reconciler will settle (Uncertain).
	textUncertain = "Outcome unknown: the request may have gone through. It is being reconciled; do not retry."
	// textUncertainManual answers an ambiguous outcome of a tool without a
	// Reconciler, or with oncely disabled (Uncertain).
	textUncertainManual = "Outcome unknown: the request may have gone through. It cannot be checked automatically; an operator must check it. Do not retry."
	// textNotRecorded is appended to a done result whose record could not
	// be written.
	textNotRecorded = " (It could not be recorded yet; it will be reconciled, so do not repeat it.)"
)

// The reasons of a Failed result that oncely, not the tool, gives
// (textFailed); a tool's failure gives its error's text.
const (
	// reasonCancelled: the call's context ended before the claim.
	reasonCancelled = "the call was cancelled before it started"
	// reasonConfiguration: the ledger refused what the program passed.
	reasonConfiguration = "a configuration error in the application"
	// reasonLedgerDown: the ledger could not be reached; nothing ran.
	reasonLedgerDown = "the action ledger is unavailable"
)

// textDone answers a call that ran the tool now (Executed).
func textDone(summary string) string { return "Done: " + summary }

// textAlreadyDone answers a repeat of a done action (AlreadyDone); a
// run-scoped action was done earlier in this run.
func textAlreadyDone(scope Scope, summary string) string {
	earlier := "earlier"
	if scope == ScopeRun {
		earlier = "earlier in this run"
	}
	return "Already done " + earlier + ": " + summary + ". Do not repeat it."
}

// textFailed answers a call after which nothing was done (Failed).
func textFailed(reason string, retryable bool) string {
	if retryable {
		return fmt.Sprintf("Failed, nothing was done: %s. You may retry.", reason)
	}
	return fmt.Sprintf("Failed, nothing was done. Do not retry: %s.", reason)
}

// textConflict answers a repeat whose validated fields differ from those
// of the action done or started (state) for identity (Conflict).
func textConflict(tool, identity, state string, fields []string) string {
	return fmt.Sprintf("A %s for %s was already %s with different %s. Not repeated.", tool, identity, state, strings.Join(fields, " or "))
}

// textFieldInvalid answers a call whose identity or validated field is
// missing or of the wrong type (InvalidInput).
func textFieldInvalid(tool, field, why string) string {
	// The field quoted: "send_email needs "to" to run safely".
	return fmt.Sprintf("%s needs %q to run safely (%s). Nothing was done.", tool, field, why)
}

// textInputInvalid answers any other input that cannot identify an action
// (InvalidInput); why is empty when nothing more is known.
func textInputInvalid(tool, why string) string {
	if why == "" {
		why = "invalid input"
	}
	return fmt.Sprintf("%s: %s. Nothing was done.", tool, why)
}

// textUnknownTool answers a call of a tool that is not registered
// (InvalidInput).
func textUnknownTool(tool string) string {
	return fmt.Sprintf("Unknown tool %q. Nothing was done.", tool)
}

// textHostError answers a call that the host program got wrong
// (ErrHostInput, InvalidInput): the model cannot fix it.
func textHostError(tool string) string {
	return fmt.Sprintf("%s could not run because of a configuration error in the application, not in your input. Nothing was done; retrying will not help.", tool)
}
