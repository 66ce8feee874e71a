package ledger_test

import (
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

func TestRecordExpired(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	exp := t0.Add(time.Minute)
	for _, c := range []struct {
		state ledger.State
		lease time.Time
		now   time.Time
		want  bool
	}{
		{ledger.StateDone, t0, exp.Add(-time.Millisecond), false},
		{ledger.StateDone, t0, exp, true},
		{ledger.StateFailed, t0, exp, true},
		// An uncertain record never expires either: its effect may exist.
		{ledger.StateUncertain, t0, exp, false},
		{ledger.StateUncertain, t0, exp.Add(time.Hour), false},
		// A pending record never expires: not while its lease is live, and
		// not once it has lapsed (its effect may exist).
		{ledger.StatePending, exp.Add(time.Hour), exp, false},
		{ledger.StatePending, t0, exp, false},
		{ledger.StatePending, t0, exp.Add(24 * time.Hour), false},
	} {
		r := &ledger.Record{State: c.state, LeaseUntil: c.lease, ExpiresAt: exp}
		if got := r.Expired(c.now); got != c.want {
			t.Errorf("%s record, lease %v, expiry %v: Expired(%v) = %v, want %v", c.state, c.lease.Sub(t0), exp.Sub(t0), c.now.Sub(t0), got, c.want)
		}
		if got := (ledger.Filter{}).Matches(r, c.now); got == c.want {
			t.Errorf("%s record at %v: Filter{}.Matches = %v, want %v", c.state, c.now.Sub(t0), got, !c.want)
		}
	}
}
