package ledgertest

import (
	"fmt"
	"sync"

	"github.com/oncely/oncely/ledger"
)

func testConcurrentClaims(h *h) {
	const goroutines, rounds = 64, 20
	for round := range rounds {
		key := fmt.Sprintf("k-race-%d", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]ledger.ClaimResult, goroutines)
			errs    = make([]error, goroutines)
		)
		for i := range goroutines {
			wg.Go(func() {
				<-start
				results[i], errs[i] = h.s.Claim(h.ctx, h.params(key, fmt.Sprintf("owner-%d", i)))
			})
		}
		close(start)
		wg.Wait()
		checkOneWinner(h, key, results, errs)
	}
}

// checkOneWinner checks that exactly one of the racing claims on key won and
// that every loser was shown the winner's pending record.
func checkOneWinner(h *h, key string, results []ledger.ClaimResult, errs []error) {
	h.Helper()
	winner := ""
	for i, res := range results {
		switch {
		case errs[i] != nil:
			h.Errorf("%s: claim by owner-%d: %v", key, i, errs[i])
		case res.Claimed && winner != "":
			h.Errorf("%s: two winners: %s and owner-%d", key, winner, i)
		case res.Claimed:
			winner = fmt.Sprintf("owner-%d", i)
		}
	}
	if winner == "" {
		h.Fatalf("%s: no claim won", key)
	}
	rec := h.get(key)
	if rec.Owner != winner || rec.State != ledger.StatePending {
		h.Errorf("%s: stored owner %s state %s, want %s pending", key, rec.Owner, rec.State, winner)
	}
	for i, res := range results {
		if errs[i] == nil && !res.Claimed && (res.Previous == nil || res.Previous.Owner != winner || res.Previous.State != ledger.StatePending) {
			h.Errorf("%s: losing claim by owner-%d saw %+v, want the winner's pending record", key, i, res.Previous)
		}
	}
}

func testConcurrentTakeovers(h *h) {
	const goroutines, rounds = 32, 6
	for round := range rounds {
		key := fmt.Sprintf("k-takeover-%d", round)
		first := h.params(key, "first")
		h.mustClaim(first)
		// Alternate between a failed record and an abandoned pending one.
		if round%2 == 0 {
			h.fail(key, first.Owner, ledger.Failure{Definite: true, Reason: "declined"})
		} else {
			h.clock.Advance(lease)
		}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]ledger.ClaimResult, goroutines)
			errs    = make([]error, goroutines)
		)
		for i := range goroutines {
			wg.Go(func() {
				<-start
				results[i], errs[i] = h.s.Claim(h.ctx, h.params(key, fmt.Sprintf("owner-%d", i)))
			})
		}
		close(start)
		wg.Wait()
		checkOneWinner(h, key, results, errs)
		for i, res := range results {
			if res.Claimed && (res.Previous == nil || res.Previous.Owner != first.Owner) {
				h.Errorf("%s: winning takeover by owner-%d reported previous %+v, want the record of %s", key, i, res.Previous, first.Owner)
			}
		}
	}
}
