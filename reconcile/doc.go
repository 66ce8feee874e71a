// Package reconcile decides, before an action is repeated, whether its
// effect already exists at the provider ("lookup before retry"), and sweeps
// the ledger for records that were left pending or uncertain.
//
// # The policy
//
// New builds a client.Reconciler from what a provider adapter declares in
// its providers.Capabilities — a deduplication window, an upsert, the
// consistency and lag of its lookup — and from nothing else: there is no
// per-provider code here. For one invocation it answers:
//
//   - VerdictFound, with the provider's reference and summary, as soon as a
//     lookup finds the effect. The executor records the action done and
//     tells the model it was already done.
//   - VerdictResendSafe when sending the request again with the same
//     downstream key cannot make a second effect: the provider upserts by
//     that key, or the attempt began (Invocation.AttemptAt) inside the
//     provider's deduplication window, minus Config.WindowMargin. There the resend
//     itself is the lookup: the provider replays the first answer. A
//     lookup is still made first, so that a found effect is reported as
//     found; when the lookup fails it is retried for up to Config.MaxWait
//     before the resend is left to decide. (A resend that the provider
//     refuses before processing it — a 429, a 409 while the first request
//     is still in flight — says nothing about the first request: the
//     caller must not read its refusal as "nothing happened".)
//   - VerdictAbsent when the lookup is conclusive and no earlier request
//     can still commit (see below). The executor then runs the tool again
//     with the same downstream key; the sweeper marks the record failed.
//   - VerdictUnknown, with a reason, otherwise: the record stays uncertain
//     and the model is told not to retry. Lookups are repeated with exponential
//     backoff (cenkalti/backoff) for up to Config.MaxWait before giving up.
//
// # Requests still in flight
//
// A lookup can only report what the provider has committed when it reads.
// A request that timed out on the client may still be executing inside the
// provider — queued behind a slow database, retried by a gateway — and
// commit after a lookup said "not found". Repeating the action then makes
// the duplicate the lookup was meant to prevent. So "not found" is taken as
// the answer only when one of these holds:
//
//   - a resend cannot duplicate: the provider deduplicates this downstream
//     key (inside its window) or upserts by it. A late commit of the
//     earlier request and the resend are then the same effect.
//   - no earlier request can still commit. The invocation says when the
//     last request of the attempt could have left (client.Invocation.SentBy),
//     from facts the ledger record holds: on a takeover, the earlier
//     owner's lease end — the executor fences provider calls by the lease,
//     so no request of an owner leaves after it — or, for an uncertain
//     record, when it was settled; after an ambiguous error, when the
//     failed request returned. Every request that may commit does so
//     before SentBy + Config.InFlight (how long a provider may keep
//     executing a request after the client gave up). A consistent lookup
//     made after that point that finds nothing is conclusive; an eventual
//     one (a search index) needs IndexLag more. Until then an empty answer
//     is inconclusive and the lookup is repeated. When SentBy is unknown
//     (zero), the bound is measured from the moment the policy is asked.
//
// Because the bound rests on the record and not on the moment of each
// pass, every later pass computes the same bound: a reconciliation that
// cannot wait long enough (Config.MaxWait shorter than the rest of the
// bound) leaves the record uncertain, and the first pass after the bound —
// the next call of the action, or the Sweeper — concludes. With the
// defaults an action stays uncertain at most until the record's lease end
// (or settlement) plus DefaultInFlight plus the provider's index lag.
// A call that ends uncertain again settles the record anew and so restarts
// that bound from its own settlement; the Sweeper writes nothing when it
// learns nothing, and does not. The bound assumes that the clocks of the
// processes sharing a ledger agree to well within InFlight.
//
// # The sweeper
//
// A Sweeper finds records stuck in pending (the owner's lease ran out) or
// uncertain and asks the tool's Reconciler with an invocation rebuilt from
// the record. Only to write a conclusive answer does it claim the record,
// with the record's own fingerprint, so that several sweepers, and live
// calls, never settle the same record at once. VerdictFound completes the
// record. The sweeper cannot run the tool (it does not have the call's
// input), so it asks a LookupReconciler (a Policy) to decide from lookups
// alone, never from a resend; only VerdictAbsent marks the record failed,
// so that a later call may run it. Anything else leaves the record as it
// was, for the next call of the action or the next sweep.
package reconcile
