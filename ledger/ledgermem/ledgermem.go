// Package ledgermem is an in-memory ledger.Store for tests and for single
// processes that need no durability.
//
// Records live in a map guarded by one mutex; they are copied in and out, so
// no caller shares a Result slice with the store. Times are kept at
// millisecond precision in UTC, like the durable stores keep them. The store
// passes the ledgertest conformance suite and implements ledger.Purger and
// ledger.Watcher (its settles signal the watches of the same Store).
package ledgermem

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/watch"
	"github.com/oncely/oncely/ledger"
)

// Config tunes a Store. The zero value selects the defaults.
type Config struct {
	// Clock tells the time (default: the system clock).
	Clock clock.Clock
}

// Store is an in-memory ledger.Store. The zero value is not usable; call New.
type Store struct {
	clock clock.Clock

	mu      sync.Mutex
	records map[string]*ledger.Record
	watches watch.Hub
}

var (
	_ ledger.Store   = (*Store)(nil)
	_ io.Closer      = (*Store)(nil)
	_ ledger.Purger  = (*Store)(nil)
	_ ledger.Watcher = (*Store)(nil)
)

// New returns an empty Store.
func New(cfg *Config) *Store {
	s := &Store{clock: clock.System{}, records: map[string]*ledger.Record{}}
	if cfg != nil && cfg.Clock != nil {
		s.clock = cfg.Clock
	}
	return s
}

// Close releases nothing; the records stay readable. It is there so that
// every backend's Store closes the same way.
func (s *Store) Close() error { return nil }

// ms reduces t to the millisecond precision the durable stores keep.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

// now reads the clock; the caller holds s.mu.
func (s *Store) now() time.Time { return ms(s.clock.Now()) }

// clone copies r, its Result included.
func clone(r *ledger.Record) *ledger.Record {
	c := *r
	c.Result = bytes.Clone(r.Result)
	return &c
}

// claimable reports whether a live record r gives way to the claim p at now.
func claimable(r *ledger.Record, p *ledger.ClaimParams, now time.Time) bool {
	switch r.State {
	case ledger.StateFailed:
		return true
	case ledger.StateUncertain:
		return r.Fingerprint == p.Fingerprint
	case ledger.StatePending:
		// A record pending under the claim's own owner token is the
		// claim's own earlier write, whatever its lease: Refused answers
		// it (ledger.Reclaimed), it is not taken over from itself.
		return r.Fingerprint == p.Fingerprint && r.Owner != p.Owner && (r.LeaseExpired(now) || r.Owner == p.Abandoned)
	}
	return false
}

// Claim implements ledger.Store.
func (s *Store) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return ledger.ClaimResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return ledger.ClaimResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	prev := s.records[p.Key]
	if prev != nil && prev.Expired(now) {
		prev = nil
	}
	if prev != nil && !claimable(prev, &p, now) {
		return ledger.Refused(clone(prev), p.Owner), nil
	}
	attempt, attemptAt := 1, now
	if prev != nil {
		attempt = prev.Attempt
		if prev.State != ledger.StateFailed { // over a failed record the attempt begins now
			attemptAt = prev.AttemptAt
		}
	}
	s.records[p.Key] = &ledger.Record{
		Key:         p.Key,
		Tool:        p.Tool,
		RunID:       p.RunID,
		State:       ledger.StatePending,
		Owner:       p.Owner,
		LeaseUntil:  ms(p.LeaseUntil),
		ExpiresAt:   ms(p.ExpiresAt),
		Fingerprint: p.Fingerprint,
		Attempt:     attempt,
		AttemptAt:   attemptAt,
		UpdatedAt:   now,
	}
	// prev left the map and was never handed out, so it needs no copy.
	return ledger.ClaimResult{Claimed: true, Attempt: attempt, Previous: prev}, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// update applies fn to the pending record key owned by owner, or
// returns ledger.ErrNotOwner.
func (s *Store) update(ctx context.Context, key, owner string, fn func(r *ledger.Record, now time.Time)) error {
	if key == "" || owner == "" {
		return fmt.Errorf("ledgermem: %w: key and owner are required", ledger.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r := s.records[key]
	if r == nil || r.Owner != owner || r.State != ledger.StatePending {
		return ledger.ErrNotOwner
	}
	fn(r, now)
	r.UpdatedAt = now
	return nil
}

// Complete implements ledger.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	result := bytes.Clone(c.Result)
	return s.settled(key, s.update(ctx, key, owner, func(r *ledger.Record, now time.Time) {
		r.State, r.LeaseUntil, r.Reason = ledger.StateDone, now, ""
		r.Summary, r.Ref, r.Result, r.Truncated = c.Summary, c.Ref, result, c.Truncated
		if c.Retention > 0 {
			r.ExpiresAt = now.Add(c.Retention)
		}
	}))
}

// settled signals the watches of key when err, a settle's, is nil.
func (s *Store) settled(key string, err error) error {
	if err == nil {
		s.watches.Signal(key)
	}
	return err
}

// Watch implements ledger.Watcher: a Complete or Fail of key through s
// signals the watches of key once the record is written.
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ch, stop := s.watches.Add(key)
	return ch, stop, nil
}

// Fail implements ledger.Store.
func (s *Store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return s.settled(key, s.update(ctx, key, owner, func(r *ledger.Record, now time.Time) {
		r.State, r.LeaseUntil, r.Reason = ledger.StateUncertain, now, f.Reason
		if f.Definite {
			r.State = ledger.StateFailed
			r.Attempt++
			r.AttemptAt = now
			if f.Retention > 0 {
				r.ExpiresAt = now.Add(f.Retention)
			}
		}
	}))
}

// Extend implements ledger.Store.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	if leaseUntil.IsZero() {
		return fmt.Errorf("ledgermem: %w: lease is required", ledger.ErrInvalid)
	}
	return s.update(ctx, key, owner, func(r *ledger.Record, _ time.Time) {
		r.LeaseUntil = ms(leaseUntil)
		r.ExpiresAt = maxTime(r.ExpiresAt, r.LeaseUntil)
	})
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if key == "" {
		return nil, fmt.Errorf("ledgermem: %w: key is required", ledger.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.records[key]
	if r == nil || r.Expired(s.now()) {
		return nil, ledger.ErrNotFound
	}
	return clone(r), nil
}

// List implements ledger.Store. It returns the records in the order of
// their LeaseUntil, oldest first, then of their keys.
func (s *Store) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit := f.Limit
	if limit <= 0 {
		limit = ledger.DefaultListLimit
	}
	s.mu.Lock()
	now := s.now()
	var out []ledger.Record
	for _, r := range s.records {
		if f.Matches(r, now) {
			out = append(out, *clone(r))
		}
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b ledger.Record) int {
		return cmp.Or(a.LeaseUntil.Compare(b.LeaseUntil), cmp.Compare(a.Key, b.Key))
	})
	return out[:min(len(out), limit)], nil
}

// Purge implements ledger.Purger.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, r := range s.records {
		if r.Expired(before) {
			delete(s.records, k)
			n++
		}
	}
	return n, nil
}
