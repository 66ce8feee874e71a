package providers

import (
	"testing"
	"time"
)

func TestSettle(t *testing.T) {
	t.Parallel()
	quiet := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	eventual := Capabilities{Lookup: Eventual, IndexLag: time.Minute}
	found := LookupResult{Status: Found, Ref: "msg_1"}
	empty := LookupResult{Status: Inconclusive}
	for _, tc := range []struct {
		name  string
		caps  Capabilities
		r     LookupResult
		quiet time.Time
		now   time.Time
		want  LookupStatus
	}{
		{"inside the lag", eventual, empty, quiet, quiet.Add(30 * time.Second), Inconclusive},
		{"exactly the lag", eventual, empty, quiet, quiet.Add(time.Minute), Inconclusive},
		{"past the lag", eventual, empty, quiet, quiet.Add(time.Minute + time.Millisecond), NotFound},
		{"unknown quiet time", eventual, empty, time.Time{}, quiet.Add(time.Hour), Inconclusive},
		{"clock behind", eventual, empty, quiet, quiet.Add(-time.Hour), Inconclusive},
		{"found stays found", eventual, found, quiet, quiet.Add(time.Hour), Found},
		{"consistent inconclusive is a bounded scan, not lag", Capabilities{Lookup: Consistent}, empty, quiet, quiet.Add(time.Hour), Inconclusive},
		{"no lookup", Capabilities{}, empty, quiet, quiet.Add(time.Hour), Inconclusive},
	} {
		if got := tc.caps.Settle(tc.r, tc.quiet, tc.now); got.Status != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got.Status, tc.want)
		}
	}
	if got := eventual.Settle(found, quiet, quiet); got != found {
		t.Errorf("found result changed: %+v", got)
	}
}

func TestZeroValuesClaimNothing(t *testing.T) {
	t.Parallel()
	var r LookupResult
	var c Capabilities
	if r.Status != Inconclusive || c.Lookup != NoLookup {
		t.Fatalf("zero LookupResult is %v, zero Consistency is %v", r.Status, c.Lookup)
	}
	for v, want := range map[string]string{
		Inconclusive.String(): "inconclusive", Found.String(): "found", NotFound.String(): "not found",
		NoLookup.String(): "none", Consistent.String(): "consistent", Eventual.String(): "eventual",
	} {
		if v != want {
			t.Errorf("%q, want %q", v, want)
		}
	}
}
