// Package client runs the side-effecting tools of an AI agent so that each
// action happens once, however often the agent repeats the call.
//
// A Tool declares which input fields define "the same action" (its
// identity fields) and how their values are normalized. For each Call the
// Executor derives an action key — the hex sha256 of the RFC 8785 canonical
// JSON of [scope, tool, [[field, value], ...]] — claims it in a ledger.Store,
// runs the tool with the key (to be handed to the provider as its
// idempotency key or reference), records the outcome with a write that is
// conditional on the claim's owner token, and returns a Result whose Text
// tells the model what happened:
//
//	outcome       is_error  text
//	Executed      no        Done: <summary>
//	AlreadyDone   no        Already done earlier in this run: <summary>. Do not repeat it.
//	InProgress    yes       Already in progress. Do not retry.
//	Failed        yes       Failed, nothing was done: <reason>. You may retry.
//	                        Failed, nothing was done. Do not retry: <reason>.
//	Uncertain     yes       Outcome unknown: the request may have gone through. It is being reconciled; do not retry.
//	                        (without a Reconciler) Outcome unknown: the request may have gone through.
//	                        It cannot be checked automatically; an operator must check it. Do not retry.
//	Conflict      yes       A <tool> for <identity> was already done with different <fields>. Not repeated.
//	InvalidInput  yes       <tool> needs "<field>" to run safely (<why>). Nothing was done.
//	                        (the program's mistake, ErrHostInput) <tool> could not run because of a
//	                        configuration error in the application, not in your input. Nothing was done;
//	                        retrying will not help.
//
// Errors a tool returns are classified with errclass.Of. Mark them with
// Definite (nothing happened, may retry), Permanent (nothing happened,
// will not succeed) or Ambiguous; an unmarked error is ambiguous, because
// treating a timeout that actually succeeded as "nothing happened" is how
// duplicates are made. An ambiguous outcome leaves the record uncertain
// until the tool's Reconciler finds out from the provider whether the
// effect exists; no call runs the tool again over an uncertain record, or
// over a claim whose owner vanished, before that. Without a Reconciler an
// uncertain action waits for an operator (ledger.Resolve).
//
// Provider calls are fenced by the claim: the tool and its reconciler run
// under a context that ends, with cause ErrLeaseLost, when the lease ends
// without renewal or a renewal finds the record taken over, and every
// resend after a reconciliation is preceded by a successful renewal. So no
// request of an action leaves after its owner's lease ended, and a
// reconciler can bound when the last one could have left
// (Invocation.SentBy).
//
// Two things are process-wide: New reads ONCELY_DISABLED (DisabledEnv),
// which turns Config.Disabled on for every Executor, and the callers
// waiting for a duplicate in flight are woken by a registry that every
// Executor of the process shares (see Executor).
//
// Mistakes of the program, not of the model, fail fast: New panics
// without a store, Register refuses a bad tool (and registers none of the
// tools passed with it), and a call with an empty or oversized run id, or a
// tenant-scoped call without a tenant, returns ErrHostInput as Execute's
// error along with an InvalidInput result.
package client
