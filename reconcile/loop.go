package reconcile

import (
	"context"
	"errors"
	"time"
)

// Run sweeps at once and then every interval until ctx ends, which is its
// only way to return: it returns ctx's cause. A failed sweep does not end
// the loop (a ledger or provider outage passes); report, when not nil,
// receives every sweep's Report and error, in order, before the next
// sweep starts (also the sweep that ctx's end interrupted). A sweep that takes longer than interval is followed by
// the next one at once. A non-positive interval is an error.
//
// Run is what a sidecar or cron-like process runs next to the executors
// (oncely reconcile --watch); a scheduled function calls Sweep once per
// invocation instead.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration, report func(Report, error)) error {
	if interval <= 0 {
		return errors.New("reconcile: Run needs a positive interval")
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		rep, err := s.Sweep(ctx)
		if report != nil {
			report(rep, err)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
		}
	}
}
