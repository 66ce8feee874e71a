// Package ledger defines the durable store of action records that oncely
// claims before a side effect runs, and the contract every backend honours.
//
// A record moves through the states of the action it guards:
//
//	(none) --claim--> pending --success--> done (terminal, replayed)
//	                   |   '--ambiguous--> uncertain --reconcile--> done | failed
//	                   '--definite failure--> failed (a new claim may retry)
//
// Every write after the claim is conditional on the owner token that the
// claim stored, so a stale owner can never overwrite a newer owner's record.
// The conformance suite in package ledgertest specifies the contract.
package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncely/oncely/internal/clip"
)

// State is the state of an action record.
type State string

// The states of a record.
const (
	// StatePending: claimed, the action may be running. Blocks other claims
	// until its lease expires.
	StatePending State = "pending"
	// StateDone: the effect exists. Terminal; repeats are answered from it.
	StateDone State = "done"
	// StateFailed: definitely not done. A later claim may try again.
	StateFailed State = "failed"
	// StateUncertain: the effect may exist. A later claim may take it over,
	// but must reconcile with the provider before acting again.
	StateUncertain State = "uncertain"
)

// Valid reports whether s is one of the four states.
func (s State) Valid() bool {
	switch s {
	case StatePending, StateDone, StateFailed, StateUncertain:
		return true
	}
	return false
}

// Size limits every store enforces, so that a record fits every backend
// (a DynamoDB item is at most 400 KB). Callers that hold larger results
// store them truncated; see client.Config.MaxResultBytes.
const (
	MaxKeyBytes     = 512
	MaxSummaryBytes = 4 << 10
	MaxRefBytes     = 1 << 10
	MaxReasonBytes  = 4 << 10
	MaxResultBytes  = 256 << 10
)

// Sentinel errors. Backends map their native errors to these.
var (
	// ErrNotOwner: the conditional write lost: the record is gone, expired,
	// settled, or claimed by another owner.
	ErrNotOwner = errors.New("ledger: not owner")
	// ErrNotFound: no live record has that key.
	ErrNotFound = errors.New("ledger: not found")
	// ErrTooLarge: a field exceeds its size limit; nothing was written.
	ErrTooLarge = errors.New("ledger: record too large")
	// ErrInvalid: the parameters are malformed (empty key or owner, zero
	// times); nothing was written.
	ErrInvalid = errors.New("ledger: invalid parameters")
	// ErrUnavailable: the store could not be reached or did not answer.
	// Whether a write took effect is unknown.
	ErrUnavailable = errors.New("ledger: unavailable")
	// ErrConfig: the store cannot work as configured (a path that names no
	// usable file, a location that cannot be written). Retrying does not
	// help; the program's configuration must change. Nothing was written.
	ErrConfig = errors.New("ledger: configuration")
)

// Record is one action's entry in the ledger. The raw tool input is never
// stored: only the key, the fingerprint of the validated fields, and what
// the provider returned. Times round-trip with millisecond precision;
// ExpiresAt may be truncated to whole seconds (a DynamoDB TTL attribute).
type Record struct {
	Key         string // action key (hex sha256)
	Tool        string
	RunID       string
	State       State
	Owner       string    // owner token of the latest claim
	LeaseUntil  time.Time // pending: when the claim lapses; otherwise when it was settled
	ExpiresAt   time.Time // retention: after this a done or failed record counts as absent (zero when a store keeps none for an uncertain record)
	Fingerprint string    // hash of the validated fields of the first claim
	// Attempt is the number of the attempt the current (or next) claim makes.
	// It starts at 1 and advances only when a definite failure is recorded,
	// so an ambiguous outcome is always retried with the same downstream key.
	Attempt int
	// AttemptAt is when the current attempt number began: the record's
	// creation, or the claim that took over the failed record that
	// advanced it (a failed record's is the failure's time). Its
	// downstream key cannot have been sent before. Claims over uncertain
	// and pending records keep it. Zero when the store does not track it
	// (reconcilers then assume the worst: long ago).
	AttemptAt time.Time
	Summary   string // done: what the model is told
	Ref       string // done: the provider's object reference
	Result    []byte // done: optional bounded payload
	Truncated bool   // done: Result was cut to fit
	Reason    string // failed / uncertain: why
	UpdatedAt time.Time
}

// Expired reports whether the record counts as absent at now: it is done
// or failed and its retention has run out. This is the one expiry rule;
// every store, the executor and the sweeper use it (or its SQL or Lua
// translation, checked by the conformance suite).
//
// Only a record whose outcome is known expires. A pending record never
// does, whatever its ExpiresAt: while its lease is live its owner may be
// acting, and once the lease has lapsed its effect may exist. An uncertain
// record never does either: its effect may exist, and forgetting it would
// let a repeat act again. Both are settled only by a claim that reconciles
// first (ClaimResult.MustReconcile) or by Resolve; the write that settles
// them sets their retention (Completion.Retention, Failure.Retention).
func (r *Record) Expired(now time.Time) bool {
	return Expires(r.State) && !now.Before(r.ExpiresAt)
}

// Expires reports whether records in state s are deleted once their
// retention has run out: done and failed ones, whose outcome is known.
func Expires(s State) bool { return s == StateDone || s == StateFailed }

// LeaseExpired reports whether a pending record's claim has lapsed at now.
func (r *Record) LeaseExpired(now time.Time) bool { return !now.Before(r.LeaseUntil) }

// TakeoverAt returns the earliest time at which a claim with the record's
// fingerprint may take the record's key: for a pending record its
// LeaseUntil (LeaseExpired), which the owner's heartbeats keep moving
// (a claim whose heartbeats stop may be taken over one liveness after the
// last one, and is then reconciled first); for a done record its
// ExpiresAt (Expired); for an uncertain or failed record the zero time (a
// claim may take it now, reconciling an uncertain one first). The time is
// on the clock of the store that judges the claim, as LeaseUntil is
// written. A caller told InProgress retries at (or after) it rather than
// on a fixed budget (client.Result.TakeoverAt carries it).
func (r *Record) TakeoverAt() time.Time {
	switch r.State {
	case StatePending:
		return r.LeaseUntil
	case StateDone:
		return r.ExpiresAt
	}
	return time.Time{}
}

// ClaimParams describe a claim.
type ClaimParams struct {
	Key         string
	Tool        string
	RunID       string
	Owner       string    // unique per claim (NewOwner); later writes are conditional on it
	LeaseUntil  time.Time // until when the claim blocks others
	Fingerprint string
	ExpiresAt   time.Time // retention of the record
	// Abandoned, when set, is the owner token of a pending record whose
	// owner is known to have exited (OwnerExited): the claim takes that
	// record over, with the same fingerprint, although its lease has not
	// run out, as it would once the lease had. Any other pending record
	// under a live lease still refuses the claim.
	Abandoned string
}

// Validate checks the parameters a store needs before it writes anything.
func (p ClaimParams) Validate() error {
	switch {
	case p.Key == "" || p.Owner == "":
		return fmt.Errorf("%w: key and owner are required", ErrInvalid)
	case len(p.Key) > MaxKeyBytes, len(p.Tool) > MaxKeyBytes, len(p.RunID) > MaxKeyBytes,
		len(p.Owner) > MaxKeyBytes, len(p.Fingerprint) > MaxKeyBytes, len(p.Abandoned) > MaxKeyBytes:
		return fmt.Errorf("%w: key, tool, run id, owner and fingerprint are limited to %d bytes", ErrTooLarge, MaxKeyBytes)
	case p.LeaseUntil.IsZero() || p.ExpiresAt.IsZero():
		return fmt.Errorf("%w: lease and expiry are required", ErrInvalid)
	case !p.ExpiresAt.After(p.LeaseUntil):
		return fmt.Errorf("%w: expiry must be after the lease", ErrInvalid)
	}
	return nil
}

// ClaimResult is the answer to a claim.
type ClaimResult struct {
	// Claimed is true when the caller now owns the record (state pending).
	Claimed bool
	// Attempt is the attempt number of the claimed record (Claimed only).
	Attempt int
	// Previous is the live record that was there before: when Claimed, the
	// failed, uncertain or abandoned pending record that was taken over
	// (nil when the key was absent or expired); when not Claimed, the record
	// that blocked the claim.
	Previous *Record
}

// Refused returns the answer to a claim by owner that rec stood in the way
// of. A pending record that holds owner's own token is no refusal: an
// earlier delivery of the same claim (a driver's retry, or a reply lost
// after the write applied) claimed it, and Reclaimed answers it. Every
// store answers a blocked claim through Refused, so that a claim is safe to
// repeat with the same owner token.
func Refused(rec *Record, owner string) ClaimResult {
	if rec.State == StatePending && rec.Owner == owner {
		return Reclaimed(rec)
	}
	return ClaimResult{Previous: rec}
}

// Reclaimed returns the answer to a repeated claim that found rec pending
// under its own owner token. What the first delivery took over is no
// longer in the record, so Reclaimed reports what the record still proves:
//
//   - A claim that created the record (the key was absent or expired) or
//     took over a failed one began the attempt it holds at the time of its
//     own write (AttemptAt equal to UpdatedAt): nobody else held that
//     attempt, and Previous is nil.
//   - Otherwise the claim took over an uncertain or abandoned record (a
//     takeover of those keeps AttemptAt, older than its write). Whether
//     an earlier owner's request of this attempt may have taken effect is
//     unknown, so Previous is an uncertain record whose LeaseUntil, the
//     moment after which that owner sent nothing, is the time of the
//     takeover (UpdatedAt): MustReconcile is then true, and the caller asks
//     the provider before acting.
//
// The first case needs the clock to move between the writes of one action
// (a takeover is never written in the millisecond its record was created),
// which every store's clock does unless a test stops it.
func Reclaimed(rec *Record) ClaimResult {
	res := ClaimResult{Claimed: true, Attempt: rec.Attempt}
	if !rec.AttemptAt.IsZero() && rec.AttemptAt.Equal(rec.UpdatedAt) {
		return res
	}
	prev := *rec
	prev.State, prev.Owner, prev.LeaseUntil = StateUncertain, "", rec.UpdatedAt
	prev.Reason = "taken over by a claim whose reply was lost; what it took over is unknown"
	res.Previous = &prev
	return res
}

// MustReconcile reports whether a successful claim took over a record whose
// effect may exist: an uncertain record or a pending one whose owner
// vanished. The caller must ask the provider before acting again.
func (r ClaimResult) MustReconcile() bool {
	return r.Claimed && r.Previous != nil &&
		(r.Previous.State == StateUncertain || r.Previous.State == StatePending)
}

// Completion is what a successful action records.
type Completion struct {
	Summary   string
	Ref       string
	Result    []byte
	Truncated bool
	// Retention, when positive, keeps the done record for that long from
	// the write, by the store's clock (ExpiresAt becomes the write's time
	// plus Retention), so that a record settled after a long run, or after
	// a long uncertainty, is kept for the whole retention from then. Zero
	// keeps the claim's ExpiresAt.
	Retention time.Duration
}

// Validate checks the size limits.
func (c Completion) Validate() error {
	switch {
	case len(c.Summary) > MaxSummaryBytes:
		return fmt.Errorf("%w: summary is %d bytes, limit %d", ErrTooLarge, len(c.Summary), MaxSummaryBytes)
	case len(c.Ref) > MaxRefBytes:
		return fmt.Errorf("%w: ref is %d bytes, limit %d", ErrTooLarge, len(c.Ref), MaxRefBytes)
	case len(c.Result) > MaxResultBytes:
		return fmt.Errorf("%w: result is %d bytes, limit %d", ErrTooLarge, len(c.Result), MaxResultBytes)
	}
	return nil
}

// Fit returns c within the limits every store enforces: the summary
// clipped to MaxSummaryBytes and the ref to MaxRefBytes (at a rune
// boundary), and a Result longer than maxResult (at most MaxResultBytes)
// dropped with Truncated set, since a cut JSON payload would not parse.
// A done effect is never lost over a size limit: a clipped ref still says
// which object it was, and the caller keeps the full one.
func (c Completion) Fit(maxResult int) Completion {
	c.Summary = clip.String(c.Summary, MaxSummaryBytes)
	c.Ref = clip.String(c.Ref, MaxRefBytes)
	if len(c.Result) > min(maxResult, MaxResultBytes) {
		c.Result, c.Truncated = nil, true
	}
	return c
}

// Failure is what an unsuccessful action records.
type Failure struct {
	// Definite: nothing happened (state failed, attempt advances). Otherwise
	// the effect may exist (state uncertain, attempt kept).
	Definite bool
	Reason   string
	// Retention, when positive, keeps a failed record for that long from
	// the write, as Completion.Retention (an uncertain record never
	// expires).
	Retention time.Duration
}

// Validate checks the size limits.
func (f Failure) Validate() error {
	if len(f.Reason) > MaxReasonBytes {
		return fmt.Errorf("%w: reason is %d bytes, limit %d", ErrTooLarge, len(f.Reason), MaxReasonBytes)
	}
	return nil
}

// Filter selects records for List. Zero fields match everything; expired
// records (Record.Expired) are never listed, pending ones always can be.
type Filter struct {
	State State
	RunID string
	// LeaseBefore keeps records whose LeaseUntil is before it: with
	// StatePending and now, the abandoned claims; for settled records,
	// those settled before it.
	LeaseBefore time.Time
	// After keeps the records that come after it in the order of List
	// (keyset pagination): pass the Cursor of the last record of a page to
	// get the next page. The zero Cursor keeps every record.
	After Cursor
	// Limit caps the number of records (0: a store default of at least
	// 100; DefaultListLimit in this module's backends).
	Limit int
}

// CountersRun is the run id, and the tool name, of the counter records
// that executors and sweepers write (client.Config.Counters): per tool
// and minute, what never reaches the ledger otherwise, such as replays.
// They are done records like any other; a store may index their listing
// (List with RunID CountersRun) apart from the others' (ledgerpg does).
const CountersRun = "oncely/counters"

// DefaultListLimit is the number of records List returns, in this
// module's backends, when the filter sets no Limit.
const DefaultListLimit = 1000

// Matches reports whether r passes f at now (for stores that filter in Go).
func (f Filter) Matches(r *Record, now time.Time) bool {
	return !r.Expired(now) &&
		(f.State == "" || r.State == f.State) &&
		(f.RunID == "" || r.RunID == f.RunID) &&
		(f.LeaseBefore.IsZero() || r.LeaseUntil.Before(f.LeaseBefore)) &&
		f.After.Before(r)
}

// Cursor is a position in the order List returns records in: ascending
// LeaseUntil (at millisecond precision), then ascending Key. The zero
// Cursor is before every record.
type Cursor struct {
	LeaseUntil time.Time
	Key        string
}

// CursorOf returns the position of r in the order of List.
func CursorOf(r *Record) Cursor { return Cursor{LeaseUntil: r.LeaseUntil, Key: r.Key} }

// IsZero reports whether c is the zero Cursor, before every record.
func (c Cursor) IsZero() bool { return c.Key == "" && c.LeaseUntil.IsZero() }

// Compare returns -1, 0 or +1 as the position c is before, at or after d.
// Times compare at millisecond precision, as stores keep them.
func (c Cursor) Compare(d Cursor) int {
	if c.IsZero() || d.IsZero() {
		return cmp.Compare(b2i(!c.IsZero()), b2i(!d.IsZero()))
	}
	return cmp.Or(cmp.Compare(c.LeaseUntil.UnixMilli(), d.LeaseUntil.UnixMilli()), cmp.Compare(c.Key, d.Key))
}

// Before reports whether r comes after the position c (always, for the
// zero Cursor).
func (c Cursor) Before(r *Record) bool { return c.Compare(CursorOf(r)) < 0 }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Walk calls fn with every record f selects, in the order of List, one
// page of f.Limit records (0: the store's default) at a time, so that the
// memory it holds is one page whatever the ledger's size. It starts after
// f.After and stops at the first error, of the store or of fn. Records
// that are written while it walks may be seen or not (a record that moves
// ahead of the walk's position is seen again at its new position), but a
// record that exists unchanged for the whole walk is seen exactly once.
func Walk(ctx context.Context, s Store, f Filter, fn func(*Record) error) error {
	for {
		page, err := s.List(ctx, f)
		if err != nil {
			return err
		}
		for i := range page {
			if err := fn(&page[i]); err != nil {
				return err
			}
		}
		if len(page) == 0 || (f.Limit > 0 && len(page) < f.Limit) {
			return nil
		}
		f.After = CursorOf(&page[len(page)-1])
	}
}

// Store is a durable ledger of action records.
//
// Claim succeeds when the key is absent, its record expired (see
// Record.Expired: done or failed and past its retention), failed, or pending with
// a lapsed lease, or uncertain; an uncertain or abandoned pending record is
// only taken over by a claim with the same fingerprint (another action
// under the same key is a conflict, not a retry). A claim over an expired
// record behaves as over an absent key (Previous nil); a takeover of a
// failed, uncertain or abandoned pending record reports it in Previous, so
// that ClaimResult.MustReconcile tells the caller to ask the provider
// first. A pending record never expires: one whose retention has run out
// while its lease is live blocks claims, and one whose lease has lapsed too
// is taken over like any abandoned claim, never replaced as absent; an
// uncertain record never expires either. A failed claim returns the
// blocking record in the same call. A claim is safe to repeat with the
// same owner token: one that finds the record pending under that token
// has claimed it (see Refused and Reclaimed). The attempt
// number of a record is kept by claims and advanced by Fail with Definite
// set.
//
// Complete, Fail and Extend succeed only while the record is pending and
// owned by owner; otherwise they return ErrNotOwner and change nothing.
// Complete and Fail release the lease (LeaseUntil becomes the time of the
// write). Extend moves the lease and raises ExpiresAt to at least the new
// lease end (never lowering it), so that retention (and a store's own
// deletion of expired records, such as DynamoDB's TTL) never outruns a
// live claim.
//
// Get and List treat expired records as absent and return pending ones.
// List returns the records f selects in ascending LeaseUntil, then Key
// (the order of Cursor), at most f.Limit of them, the first ones after
// f.After: paging with the Cursor of each page's last record (Walk) reaches
// every record that exists unchanged for the whole walk exactly once,
// however many records are written meanwhile. The durable stores serve a
// listing by state from an index of that state, at a cost that grows with
// the page and the records in that state, not with the whole ledger.
// Every method is safe for concurrent use, also from several processes
// where the backend is shared. Errors reaching the backend wrap
// ErrUnavailable; a store that cannot work as configured returns ErrConfig
// from its constructor.
type Store interface {
	Claim(ctx context.Context, p ClaimParams) (ClaimResult, error)
	Complete(ctx context.Context, key, owner string, c Completion) error
	Fail(ctx context.Context, key, owner string, f Failure) error
	Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error
	Get(ctx context.Context, key string) (*Record, error)
	List(ctx context.Context, f Filter) ([]Record, error)
}

// Purger is implemented by stores that delete expired records on request
// (SQL stores; DynamoDB deletes them through its TTL).
type Purger interface {
	// Purge deletes the records expired at the given time (Record.Expired:
	// done or failed, with ExpiresAt not after it; never a pending or
	// uncertain record) and
	// reports how many it deleted.
	Purge(ctx context.Context, before time.Time) (int, error)
}

// RunIndexer is implemented by stores that can say whether they list one
// run's records (Filter.RunID) from an index (ledgerpg: Config.RunIndex).
// A store that does not implement it is taken to: see RunsIndexed.
//
// Purger, Watcher and RunIndexer are optional interfaces. A Store that
// wraps another (a cache, a tracer, a ledger opened by URL) implements all
// three and answers each from the store it wraps, so that wrapping hides
// no capability: its Purge returns an error wrapping errors.ErrUnsupported
// and its Watch one wrapping ErrNoWatch when the wrapped store has neither.
type RunIndexer interface {
	RunsIndexed() bool
}

// RunsIndexed reports whether s lists one run's records from an index:
// s's own answer when it is a RunIndexer, else true.
func RunsIndexed(s Store) bool {
	ri, ok := s.(RunIndexer)
	return !ok || ri.RunsIndexed()
}

// Watcher is implemented by stores that can wake a caller waiting for a
// record held by another caller, in this process or another, when that
// record is settled, so that the caller need not poll it. The executor
// uses it when its Store has it (client.Executor's wait for a duplicate
// in flight) and polls otherwise.
//
// Watch returns a channel that receives a value after every Complete or
// Fail of key, by any Store of the same ledger, that commits after Watch
// has returned. The channel has a buffer of one: values are not counted,
// and several settles may show as one. It may also receive a value when
// nothing happened to key (a store may signal every write it sees), so a
// woken caller reads the record to learn what changed. A settle committed
// before Watch returned is not signalled: the caller reads the record
// once after Watch returns. A store may signal only the settles of a
// record that was pending when Watch returned (the caller watches a
// record it found in flight). A signal can be lost when the store's
// connection to its backend breaks, so a caller still polls, if rarely.
//
// stop releases the watch; it is safe to call more than once. Watch
// returns an error, and no channel, when the store cannot watch (its
// backend offers no notifications in this configuration, or is out of
// reach): the caller then polls. A cancelled ctx ends the wait for the
// watch to be registered, not the watch.
type Watcher interface {
	Watch(ctx context.Context, key string) (settled <-chan struct{}, stop func(), err error)
}

// ErrNoWatch is returned by Watch when a store cannot watch records in
// its configuration (for example a PostgreSQL pool behind a transaction
// pooler, where LISTEN does not work); callers poll instead.
var ErrNoWatch = errors.New("ledger: watching records is not supported here")
