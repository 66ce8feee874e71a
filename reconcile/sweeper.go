package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/clip"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
)

// SweeperConfig tunes a Sweeper. A nil *SweeperConfig, or a zero field,
// means the default.
type SweeperConfig struct {
	// Clock tells the time (default: the system clock). It must be the
	// clock of the executors that wrote the records.
	Clock clock.Clock
	// Lease is how long the sweeper's claim on one record blocks others
	// while it records a conclusive answer, or asks again about a record
	// that changed after it was listed (default 2 minutes; keep it above
	// the reconcilers' MaxWait).
	Lease time.Duration
	// MinAge leaves alone uncertain records settled less than MinAge ago
	// (default 0: every uncertain record).
	MinAge time.Duration
	// RunID, when set, limits the sweep to one run's records.
	RunID string
	// Limit caps the records listed per state and sweep (default 100).
	Limit int
	// Concurrency is how many records are reconciled at once (default 4).
	Concurrency int
	// NewOwner returns a fresh owner token per claim (default:
	// ledger.NewOwner).
	NewOwner func() string
	// Retention is how long a record the sweeper settles is kept, counted
	// from the settlement (default 24 hours, the executor's default; keep
	// it at the executors' Config.Retention).
	Retention time.Duration
	// NoCounters: the sweeper writes no counter records. By default a
	// sweep that settled records writes, at its end, one small done record
	// per tool it settled records of (tool and run ledger.CountersRun)
	// with their number, for the operator console's reconcile rate: one
	// claim and completion per tool and sweep, beside the two writes each
	// settled record took.
	NoCounters bool
}

// Report is what one sweep did. Every examined record is counted in
// exactly one of Done, Failed, Uncertain and Skipped.
type Report struct {
	// Examined: stuck records found (pending with a lapsed lease, or
	// uncertain).
	Examined int
	// Done: the provider had the effect; the record is done.
	Done int
	// Failed: the provider conclusively had no effect and no request can
	// still create it; the record is failed, so a later call may run it.
	Failed int
	// Uncertain: the record is left as it was, pending or uncertain (the
	// provider could not tell yet, the reconciler failed, or only a resend
	// could settle it), or an abandoned claim of a tool without a
	// reconciler was marked uncertain.
	Uncertain int
	// Skipped: another process held or settled the record first, or the
	// sweeper does not know its tool.
	Skipped int
	// Errors: records whose reconciliation or ledger write failed; they
	// are also counted above (as Uncertain or Skipped).
	Errors int
}

// Sweeper reconciles records that calls left behind: pending records whose
// owner vanished, and uncertain ones. It is safe to run in several
// processes at once: it claims a record before it writes to it.
type Sweeper struct {
	store     ledger.Store
	recs      map[string]client.Reconciler
	cfg       SweeperConfig
	cursorKey string
}

// NewSweeper returns a sweeper over store for the given tools (the same
// tools the executors register; only Name and Reconciler are used). cfg
// may be nil.
func NewSweeper(store ledger.Store, tools []client.Tool, cfg *SweeperConfig) *Sweeper {
	var c SweeperConfig
	if cfg != nil {
		c = *cfg
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Lease <= 0 {
		c.Lease = 2 * time.Minute
	}
	if c.Limit <= 0 {
		c.Limit = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.NewOwner == nil {
		c.NewOwner = ledger.NewOwner
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	recs := make(map[string]client.Reconciler, len(tools))
	for _, t := range tools {
		recs[t.Name] = t.Reconciler
	}
	return &Sweeper{store: store, recs: recs, cfg: c, cursorKey: CursorKey(c.RunID)}
}

// Sweep lists the stuck records and reconciles each. The error joins the
// per-record errors (also counted in Report.Errors) and a failure to keep
// the sweep's position; a failed listing returns at once.
//
// Each sweep examines up to Limit abandoned pending records and Limit
// uncertain ones, in the order of ledger.Cursor (oldest lease first),
// starting after the last record the previous sweep examined and going
// round to the oldest when it reaches the newest: the records a sweep
// cannot settle do not hold back the others, and every stuck record is
// examined within ceil(stuck/Limit) sweeps, plus one for those that became
// stuck meanwhile. The position is kept in the ledger (see CursorKey), so
// this holds also when every sweep is a fresh process. A sweep writes
// nothing to a record it cannot settle.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	now := s.cfg.Clock.Now()
	from, err := s.position(ctx)
	if err != nil {
		return Report{}, err
	}
	pending, nextPending, err := s.round(ctx, ledger.Filter{State: ledger.StatePending, RunID: s.cfg.RunID, LeaseBefore: now}, from.Pending)
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: sweep: list pending: %w", err)
	}
	settledBefore := time.Time{} // every uncertain record
	if s.cfg.MinAge > 0 {
		settledBefore = now.Add(-s.cfg.MinAge)
	}
	uncertain, nextUncertain, err := s.round(ctx, ledger.Filter{State: ledger.StateUncertain, RunID: s.cfg.RunID, LeaseBefore: settledBefore}, from.Uncertain)
	if err != nil {
		return Report{}, fmt.Errorf("reconcile: sweep: list uncertain: %w", err)
	}
	var (
		mu   sync.Mutex
		rep  = Report{Examined: len(pending) + len(uncertain)}
		errs []error
		g    errgroup.Group
	)
	if next := (position{Pending: nextPending, Uncertain: nextUncertain}); !next.equal(from) {
		if err := s.keep(ctx, next); err != nil {
			errs = append(errs, err)
		}
	}
	g.SetLimit(s.cfg.Concurrency)
	reconciled := map[string]int64{} // per tool, under mu
	for _, rec := range append(pending, uncertain...) {
		g.Go(func() error {
			res, err := s.sweepOne(ctx, rec)
			mu.Lock()
			defer mu.Unlock()
			switch res {
			case ledger.StateDone:
				rep.Done++
				reconciled[rec.Tool]++
			case ledger.StateFailed:
				rep.Failed++
				reconciled[rec.Tool]++
			case ledger.StateUncertain:
				rep.Uncertain++
			default:
				rep.Skipped++
			}
			if err != nil {
				rep.Errors++
				errs = append(errs, err)
			}
			return nil
		})
	}
	_ = g.Wait()
	if !s.cfg.NoCounters && len(reconciled) > 0 {
		var cs []counters.Counts
		for tool, n := range reconciled {
			cs = append(cs, counters.Counts{Tool: tool, Reconciled: n})
		}
		// Best effort: the records are settled; a count that could not be
		// written is only missing from the console's rates.
		wctx, cancel := writeContext(ctx)
		_ = counters.Write(wctx, s.store, s.cfg.Clock, cs...)
		cancel()
	}
	return rep, errors.Join(errs...)
}

// round lists up to Limit records f selects, starting after the cursor
// from and, when it reaches the last record, going on from the first one up
// to from. It returns them with the cursor the next sweep starts after (the
// last record listed, or the zero cursor after a round that reached the end
// and did not wrap).
func (s *Sweeper) round(ctx context.Context, f ledger.Filter, from ledger.Cursor) ([]ledger.Record, ledger.Cursor, error) {
	f.After, f.Limit = from, s.cfg.Limit
	recs, err := s.list(ctx, f)
	if err != nil || len(recs) == s.cfg.Limit {
		return recs, cursorAfter(recs), err
	}
	if from.IsZero() {
		return recs, ledger.Cursor{}, nil // every record, from the first
	}
	f.After, f.Limit = ledger.Cursor{}, s.cfg.Limit-len(recs)
	head, err := s.list(ctx, f)
	if err != nil {
		return nil, ledger.Cursor{}, err
	}
	n := 0
	for n < len(head) && ledger.CursorOf(&head[n]).Compare(from) <= 0 {
		n++
	}
	if n == 0 {
		return recs, ledger.Cursor{}, nil
	}
	return append(recs, head[:n]...), ledger.CursorOf(&head[n-1]), nil
}

// list lists f without the records that keep sweeps' positions (one is
// pending, and listed, while a sweep writes it or after that sweep died).
func (s *Sweeper) list(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	recs, err := s.store.List(ctx, f)
	return slices.DeleteFunc(recs, func(r ledger.Record) bool { return r.Tool == CursorTool }), err
}

func cursorAfter(recs []ledger.Record) ledger.Cursor {
	if len(recs) == 0 {
		return ledger.Cursor{}
	}
	return ledger.CursorOf(&recs[len(recs)-1])
}

// sweepOne settles one stuck record. It returns the state it left the
// record in ("" when it did not act on it).
//
// It asks the reconciler before it claims the record, and claims it only to
// write a conclusive answer (found, or conclusively absent): a pass that
// learns nothing writes nothing, so the record keeps the facts its in-flight
// bound rests on (Invocation.SentBy, the record's LeaseUntil) and a later
// pass, once that bound has passed, concludes.
func (s *Sweeper) sweepOne(ctx context.Context, rec ledger.Record) (ledger.State, error) {
	reconciler, known := s.recs[rec.Tool]
	if !known {
		return "", nil
	}
	if reconciler == nil {
		if rec.State == ledger.StateUncertain {
			return ledger.StateUncertain, nil // nothing can settle it
		}
		cr, owner, err := s.claim(ctx, rec)
		if err != nil || !cr.Claimed {
			return "", err
		}
		if !cr.MustReconcile() {
			return "", s.release(ctx, rec.Key, owner, cr)
		}
		return ledger.StateUncertain, s.settle(ctx, rec.Key, owner, ledger.Failure{
			Reason: fmt.Sprintf("reconcile: the owner's lease ran out and %s has no reconciler", rec.Tool)})
	}
	f, err := check(ctx, reconciler, invocation(rec, rec.Attempt))
	switch {
	case err != nil:
		return ledger.StateUncertain, fmt.Errorf("reconcile: sweep %s: %w", rec.Key, err)
	case f.Verdict != client.VerdictFound && f.Verdict != client.VerdictAbsent:
		return ledger.StateUncertain, nil
	}
	cr, owner, err := s.claim(ctx, rec)
	switch {
	case err != nil || !cr.Claimed:
		return "", err // another process holds it, or it was settled
	case !cr.MustReconcile():
		return "", s.release(ctx, rec.Key, owner, cr)
	case f.Verdict != client.VerdictFound && !sameVersion(cr.Previous, &rec):
		// Someone acted on the record after it was listed: absence seen
		// before may no longer hold. Ask again, now under the claim.
		if f, err = check(ctx, reconciler, invocation(*cr.Previous, cr.Attempt)); err != nil {
			werr := s.settle(ctx, rec.Key, owner, ledger.Failure{Reason: clip.String("reconcile: "+err.Error(), ledger.MaxReasonBytes)})
			return ledger.StateUncertain, errors.Join(fmt.Errorf("reconcile: sweep %s: %w", rec.Key, err), werr)
		}
	}
	switch {
	case f.Verdict == client.VerdictFound:
		c := ledger.Completion{Summary: f.Effect.Summary, Ref: f.Effect.Ref, Result: f.Effect.Result}.Fit(ledger.MaxResultBytes)
		wctx, cancel := writeContext(ctx)
		defer cancel()
		if err := s.store.Complete(wctx, rec.Key, owner, c); err != nil {
			return "", fmt.Errorf("reconcile: sweep %s: record done: %w", rec.Key, err)
		}
		return ledger.StateDone, nil
	case f.Verdict == client.VerdictAbsent:
		return ledger.StateFailed, s.settle(ctx, rec.Key, owner, ledger.Failure{Definite: true,
			Reason: "reconcile: the provider has no such effect and no earlier request can still create it"})
	case f.Verdict == client.VerdictResendSafe:
		return ledger.StateUncertain, s.settle(ctx, rec.Key, owner, ledger.Failure{
			Reason: "reconcile: the provider would deduplicate a resend; the next call of this action resends it"})
	default:
		return ledger.StateUncertain, s.settle(ctx, rec.Key, owner, ledger.Failure{Reason: clip.String("reconcile: "+f.Reason, ledger.MaxReasonBytes)})
	}
}

// invocation rebuilds the invocation of a stuck record's attempt. Its
// owner sent nothing after its lease ended (for an uncertain record: after
// it was settled), which anchors the in-flight bound.
func invocation(rec ledger.Record, attempt int) client.Invocation {
	return client.Invocation{
		Tool: rec.Tool, RunID: rec.RunID, Key: rec.Key, Attempt: attempt, AttemptAt: rec.AttemptAt,
		SentBy: rec.LeaseUntil, DownstreamKey: client.DownstreamKey(rec.Key, attempt),
	}
}

// sameVersion reports whether nobody claimed, renewed or settled the
// record between the listing (listed) and the sweeper's claim (prev).
func sameVersion(prev, listed *ledger.Record) bool {
	return prev != nil && prev.Owner == listed.Owner && prev.State == listed.State &&
		prev.LeaseUntil.Equal(listed.LeaseUntil) && prev.Attempt == listed.Attempt
}

// claim takes a stuck record over with its own fingerprint.
func (s *Sweeper) claim(ctx context.Context, rec ledger.Record) (ledger.ClaimResult, string, error) {
	now := s.cfg.Clock.Now()
	owner := s.cfg.NewOwner()
	lease := now.Add(s.cfg.Lease)
	if dl, ok := ctx.Deadline(); ok && dl.Before(lease) {
		lease = dl
	}
	cr, err := ledger.ClaimRepeated(ctx, s.store, ledger.Takeover(&rec, owner, now, lease, s.cfg.Retention), s.cfg.Clock, s.cfg.Lease/4)
	if err != nil {
		return cr, owner, fmt.Errorf("reconcile: sweep %s: claim: %w", rec.Key, err)
	}
	return cr, owner, nil
}

// release gives back a claim that landed on a record that expired or
// failed between the listing and the claim: nothing may exist, and the
// claim must not block a later call.
func (s *Sweeper) release(ctx context.Context, key, owner string, cr ledger.ClaimResult) error {
	reason := "reconcile: swept a record that expired"
	if cr.Previous != nil {
		reason = cr.Previous.Reason
	}
	return s.settle(ctx, key, owner, ledger.Failure{Definite: true, Reason: reason})
}

// check asks r, through ReconcileByLookup when it can: the sweeper cannot
// resend.
func check(ctx context.Context, r client.Reconciler, inv client.Invocation) (client.Reconciliation, error) {
	if l, ok := r.(LookupReconciler); ok {
		return l.ReconcileByLookup(ctx, inv)
	}
	return r.Reconcile(ctx, inv)
}

// writeContext outlives the sweep's context: a record that was claimed is
// settled even when the sweep is cancelled.
func writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
}

func (s *Sweeper) settle(ctx context.Context, key, owner string, f ledger.Failure) error {
	ctx, cancel := writeContext(ctx)
	defer cancel()
	if err := s.store.Fail(ctx, key, owner, f); err != nil {
		return fmt.Errorf("reconcile: sweep %s: record: %w", key, err)
	}
	return nil
}

// CursorTool is the tool name of the record in which a sweeper keeps its
// position (see CursorKey). Sweepers leave such records out of what they
// examine.
const CursorTool = "oncely/sweeper"

// CursorKey returns the key of the record in which the sweepers of run
// (empty: of the whole ledger) keep the position their next sweep starts
// after. It is a failed record of tool CursorTool whose Reason holds the
// position, written by a claim and a definite failure as any record is,
// kept for CursorRetention after each sweep, so that every ledger keeps it
// and a fresh process finds it. It is not a hash like an action key, so
// it never names an action.
func CursorKey(run string) string { return CursorTool + "/" + run }

// CursorRetention is how long a sweeper's position is kept after the sweep
// that wrote it. A sweep that finds none starts from the oldest record.
const CursorRetention = 30 * 24 * time.Hour

// position is where the next sweep starts, per state.
type position struct {
	Pending, Uncertain ledger.Cursor
}

func (p position) equal(q position) bool {
	return p.Pending.Compare(q.Pending) == 0 && p.Uncertain.Compare(q.Uncertain) == 0
}

type positionJSON struct {
	PendingLease   int64  `json:"pending_lease,omitempty"`
	PendingKey     string `json:"pending_key,omitempty"`
	UncertainLease int64  `json:"uncertain_lease,omitempty"`
	UncertainKey   string `json:"uncertain_key,omitempty"`
}

func cursorJSON(c ledger.Cursor) (int64, string) {
	if c.IsZero() {
		return 0, ""
	}
	return c.LeaseUntil.UnixMilli(), c.Key
}

func jsonCursor(ms int64, key string) ledger.Cursor {
	if key == "" {
		return ledger.Cursor{}
	}
	return ledger.Cursor{LeaseUntil: time.UnixMilli(ms).UTC(), Key: key}
}

// position reads where the previous sweep stopped: the zero position when
// no sweep left one (or another sweeper is writing it right now).
func (s *Sweeper) position(ctx context.Context) (position, error) {
	rec, err := s.store.Get(ctx, s.cursorKey)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return position{}, nil
	case err != nil:
		return position{}, fmt.Errorf("reconcile: sweep: read the position: %w", err)
	case rec.State != ledger.StateFailed || rec.Tool != CursorTool:
		return position{}, nil
	}
	var p positionJSON
	if err := json.Unmarshal([]byte(rec.Reason), &p); err != nil {
		return position{}, nil // not a position this version wrote: start over
	}
	return position{Pending: jsonCursor(p.PendingLease, p.PendingKey), Uncertain: jsonCursor(p.UncertainLease, p.UncertainKey)}, nil
}

// keep writes where the next sweep starts: a claim of the position record
// and a definite failure whose reason holds the position. When another
// sweeper holds the record, its position stands.
func (s *Sweeper) keep(ctx context.Context, next position) error {
	var p positionJSON
	p.PendingLease, p.PendingKey = cursorJSON(next.Pending)
	p.UncertainLease, p.UncertainKey = cursorJSON(next.Uncertain)
	reason, err := json.Marshal(p)
	if err != nil {
		return err
	}
	now := s.cfg.Clock.Now()
	owner := s.cfg.NewOwner()
	wctx, cancel := writeContext(ctx)
	defer cancel()
	cr, err := s.store.Claim(wctx, ledger.ClaimParams{Key: s.cursorKey, Tool: CursorTool, RunID: s.cfg.RunID, Owner: owner,
		LeaseUntil: now.Add(time.Minute), Fingerprint: CursorTool, ExpiresAt: now.Add(CursorRetention)})
	switch {
	case err != nil:
		return fmt.Errorf("reconcile: sweep: keep the position: %w", err)
	case !cr.Claimed:
		return nil
	}
	if err := s.store.Fail(wctx, s.cursorKey, owner, ledger.Failure{Definite: true, Reason: string(reason)}); err != nil {
		return fmt.Errorf("reconcile: sweep: keep the position: %w", err)
	}
	return nil
}
