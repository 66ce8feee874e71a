package ledgertest

import (
	"sync"
	"time"
)

// Clock is a fake ledger.Clock for tests: it stands still until moved. It is
// safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock that reads t0. Prefer a whole-second t0: stores
// keep times at millisecond precision and may truncate ExpiresAt to seconds.
func NewClock(t0 time.Time) *Clock { return &Clock{now: t0} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
