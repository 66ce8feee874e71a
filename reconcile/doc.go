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
//   - Found, with the provider's reference and summary, as soon as a lookup
//     finds the effect. The executor records the action done and tells the
//     model it was already done.
//   - NotFound when sending the request again with the same downstream key
//     cannot make a second effect: the provider upserts by that key, or the
//     attempt began (Invocation.AttemptAt) inside the provider's
//     deduplication window, minus Config.WindowMargin. There the resend
//     itself is the lookup: the provider replays the first answer. A
//     lookup is still made first, so that a found effect is reported as
//     found; when the lookup fails it is retried for up to Config.MaxWait
//     before the resend is left to decide. (A resend that the provider
//     refuses before processing it — a 429, a 409 while the first request
//     is still in flight — says nothing about the first request: the
//     caller must not read its refusal as "nothing happened".)
//   - NotFound when the lookup is conclusive and no earlier request can
//     still commit (see below). The executor then runs the tool again with
//     the same downstream key; the sweeper marks the record failed.
//   - Unknown, with a reason, otherwise: the record stays uncertain and the
//     model is told not to retry. Lookups are repeated with exponential
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
//   - no earlier request can still commit. The policy does not know when
//     the earlier requests carrying this key were sent: the invocation
//     tells only when the attempt began (AttemptAt), and a later request
//     may have carried the same key — the executor resends with the same
//     key after every inconclusive outcome, and a takeover resends long
//     after AttemptAt. A lag measured from AttemptAt would let such a late
//     request slip through: it commits at t, the lookup at t + lag/2 sees
//     nothing, AttemptAt is long past, and a second send duplicates it.
//     What the policy does know is that whoever asks it has stopped sending:
//     the executor reconciles after its own request ended, or after it took
//     over a record whose owner settled it or let its lease lapse. So it
//     measures from the moment it is asked (the "quiet" point): every
//     request that may commit does so before quiet + Config.InFlight (how
//     long a provider may keep executing a request after the client gave
//     up). A consistent lookup made after that point that finds nothing is
//     conclusive; an eventual one (a search index) needs IndexLag more.
//     Until then an empty answer is inconclusive and the lookup is repeated.
//
// The cost of this caution is time, never a duplicate: a reconciliation
// that cannot wait long enough (Config.MaxWait shorter than InFlight plus
// the index lag) leaves the record uncertain, and a later pass — the next
// call of the same action, or the Sweeper — tries again.
//
// The remaining hole is a previous owner that keeps sending after its lease
// ran out (a process frozen for longer than its lease that then resumes).
// No lookup can exclude it; the executor bounds it by tying leases to the
// context deadline and renewing them while the tool runs.
//
// # The sweeper
//
// A Sweeper finds records stuck in pending (the owner's lease ran out) or
// uncertain, claims each one with the record's own fingerprint — so that
// several sweepers, and live calls, never act on the same record at once —
// and asks the tool's Reconciler with an invocation rebuilt from the
// record. Found completes the record. The sweeper cannot run the tool (it
// does not have the call's input), so it asks a Checker (a Policy) to
// decide from lookups alone, never from a resend; only a conclusive
// NotFound (Finding.Absent) marks the record failed, so that a later call
// may run it. Anything else leaves it uncertain, for the next call of the
// action or the next sweep.
package reconcile
