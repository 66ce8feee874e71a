// Package clock is the time source oncely's components read: the
// executor, the reconcile policy and sweeper, every ledger, the HTTP
// layer, the provider adapters and the fakes each take a Clock in their
// Config (the system clock when nil), so that tests move time without
// sleeping. Fake is the clock those tests move.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time. It has the method set of cenkalti/backoff's Clock,
// so a Clock paces backoffs too.
type Clock interface {
	Now() time.Time
}

// System is the wall clock.
type System struct{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// Fake is a Clock for tests: it stands still until moved. It is safe for
// concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a Fake that reads t0. Prefer a whole-second t0: ledgers
// keep times at millisecond precision and may truncate ExpiresAt to
// seconds.
func NewFake(t0 time.Time) *Fake { return &Fake{now: t0} }

// Now returns the clock's current time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
