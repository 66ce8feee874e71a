// Package ledgercache puts a bounded in-memory cache of done records in
// front of any ledger.Store, so that a repeat of an action this process
// has already seen done costs no ledger request.
//
// Only done records are cached: done is terminal (no claim, Resolve or
// conditional write changes it), so a cached copy stays true until the
// record's retention ends. Pending, uncertain and failed records change
// under other processes' claims and always go to the ledger.
//
// Invalidation: an entry is dropped when the record's ExpiresAt passes,
// when it has been cached longer than Config.TTL (a bound on staleness if
// an operator deletes records by hand), when the least recently used
// entry makes room for a new one (Config.Size), and by Purge.
package ledgercache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// Defaults of Config.
const (
	DefaultSize = 4096
	DefaultTTL  = 5 * time.Minute
)

// Config tunes a Store. A nil *Config, or a zero field, means the default.
type Config struct {
	// Size caps the number of cached records (default DefaultSize).
	Size int
	// TTL caps how long a record stays cached (default DefaultTTL); the
	// record's own ExpiresAt caps it further.
	TTL time.Duration
	// Clock tells the time (default: the system clock). Use the clock of
	// the wrapped store.
	Clock clock.Clock
}

// Stats counts the cache's answers.
type Stats struct {
	Hits, Misses int64
}

// Store is a ledger.Store that answers repeats of done actions from
// memory and passes everything else to the store it wraps. It is safe for
// concurrent use.
type Store struct {
	next  ledger.Store
	cfg   Config
	cache *lru.Cache[string, entry]

	mu     sync.Mutex
	claims map[string]claim // this process's live claims, by key and owner
	stats  Stats
}

// claim is what a Complete needs to cache the record it settles.
type claim struct {
	p         ledger.ClaimParams
	attempt   int
	attemptAt time.Time
}

type entry struct {
	rec      ledger.Record
	cachedAt time.Time
}

var (
	_ ledger.Store   = (*Store)(nil)
	_ io.Closer      = (*Store)(nil)
	_ ledger.Purger  = (*Store)(nil)
	_ ledger.Watcher = (*Store)(nil)

	_ ledger.RunIndexer = (*Store)(nil)
)

// New returns a Store caching the done records of next. cfg may be nil.
func New(next ledger.Store, cfg *Config) *Store {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Size <= 0 {
		c.Size = DefaultSize
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	cache, _ := lru.New[string, entry](c.Size) // only a non-positive size fails
	return &Store{next: next, cfg: c, cache: cache, claims: map[string]claim{}}
}

// Close releases nothing: next is the caller's to close. It is there so
// that every backend's Store closes the same way.
func (s *Store) Close() error { return nil }

// Watch implements ledger.Watcher by passing the watch to the wrapped
// store; it returns ledger.ErrNoWatch when that store is no
// ledger.Watcher, and the caller polls.
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w, ok := s.next.(ledger.Watcher)
	if !ok {
		return nil, nil, fmt.Errorf("ledgercache: %T: %w", s.next, ledger.ErrNoWatch)
	}
	return w.Watch(ctx, key)
}

// RunsIndexed implements ledger.RunIndexer with the wrapped store's answer.
func (s *Store) RunsIndexed() bool { return ledger.RunsIndexed(s.next) }

// Unwrap returns the wrapped store.
func (s *Store) Unwrap() ledger.Store { return s.next }

// Stats returns the hit and miss counts of Claim and Get.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// lookup returns a copy of the cached done record of key, if it is still
// valid at now.
func (s *Store) lookup(key string) (*ledger.Record, bool) {
	now := s.cfg.Clock.Now()
	e, ok := s.cache.Get(key)
	if ok && (e.rec.Expired(now) || !now.Before(e.cachedAt.Add(s.cfg.TTL))) {
		s.cache.Remove(key)
		ok = false
	}
	s.mu.Lock()
	if ok {
		s.stats.Hits++
	} else {
		s.stats.Misses++
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	rec := e.rec
	rec.Result = append([]byte(nil), e.rec.Result...)
	return &rec, true
}

func (s *Store) keep(rec *ledger.Record) {
	if rec == nil || rec.State != ledger.StateDone {
		return
	}
	c := *rec
	c.Result = append([]byte(nil), rec.Result...)
	s.cache.Add(rec.Key, entry{rec: c, cachedAt: s.cfg.Clock.Now()})
}

// Claim answers from the cache when the key's record is done; otherwise
// it claims in the wrapped store and caches a done record that blocked
// the claim.
func (s *Store) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if rec, ok := s.lookup(p.Key); ok {
		return ledger.ClaimResult{Previous: rec}, nil
	}
	// The attempt of a new record begins at the claim; read the time
	// before it, so that the cached AttemptAt is never later than the
	// stored one.
	before := s.cfg.Clock.Now().Truncate(time.Millisecond)
	res, err := s.next.Claim(ctx, p)
	if err != nil {
		return res, err
	}
	if res.Claimed {
		c := claim{p: p, attempt: res.Attempt, attemptAt: before}
		if res.Previous != nil {
			c.attemptAt = res.Previous.AttemptAt // claims keep the attempt's start
		}
		s.mu.Lock()
		if len(s.claims) >= s.cfg.Size {
			// Claims this process abandoned (it never recorded them) lapse
			// with their lease; drop them rather than grow.
			now := s.cfg.Clock.Now()
			for id, c := range s.claims {
				if !now.Before(c.p.LeaseUntil) {
					delete(s.claims, id)
				}
			}
		}
		s.claims[p.Key+"\x00"+p.Owner] = c
		s.mu.Unlock()
	} else {
		s.keep(res.Previous)
	}
	return res, nil
}

func (s *Store) forget(key, owner string) (claim, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := key + "\x00" + owner
	c, ok := s.claims[id]
	delete(s.claims, id)
	return c, ok
}

// Complete records the completion in the wrapped store and, when this
// process made the claim, caches the done record.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	err := s.next.Complete(ctx, key, owner, c)
	if errors.Is(err, ledger.ErrUnavailable) {
		return err // the claim is still ours to retry with
	}
	cl, ok := s.forget(key, owner)
	if err != nil || !ok {
		return err
	}
	p, now := cl.p, s.cfg.Clock.Now().Truncate(time.Millisecond)
	exp := p.ExpiresAt
	if c.Retention > 0 {
		exp = now.Add(c.Retention)
	}
	s.keep(&ledger.Record{
		Key: key, Tool: p.Tool, RunID: p.RunID, State: ledger.StateDone, Owner: owner,
		LeaseUntil: now, ExpiresAt: exp, Fingerprint: p.Fingerprint,
		Attempt: cl.attempt, AttemptAt: cl.attemptAt,
		Summary: c.Summary, Ref: c.Ref, Result: c.Result, Truncated: c.Truncated, UpdatedAt: now,
	})
	return nil
}

// Fail passes through; failed and uncertain records are never cached.
func (s *Store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	err := s.next.Fail(ctx, key, owner, f)
	if !errors.Is(err, ledger.ErrUnavailable) {
		s.forget(key, owner)
	}
	return err
}

// Extend passes through.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	return s.next.Extend(ctx, key, owner, leaseUntil)
}

// Get answers from the cache when the record is done; otherwise it reads
// the wrapped store and caches a done record.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if rec, ok := s.lookup(key); ok {
		return rec, nil
	}
	rec, err := s.next.Get(ctx, key)
	if err == nil {
		s.keep(rec)
	}
	return rec, err
}

// List passes through: listings are for operators and sweepers, which
// must see the ledger itself.
func (s *Store) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	return s.next.List(ctx, f)
}

// Purge empties the cache and purges the wrapped store when it is a
// ledger.Purger.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	s.cache.Purge()
	p, ok := s.next.(ledger.Purger)
	if !ok {
		return 0, fmt.Errorf("ledgercache: %T does not purge: %w", s.next, errors.ErrUnsupported)
	}
	return p.Purge(ctx, before)
}
