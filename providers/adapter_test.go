package providers

import (
	"context"
	"testing"
	"time"
)

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

// The attempt's start travels to Lookup through the context; a zero time
// is not carried (the lookup then uses its own look-back).
func TestWithAttempt(t *testing.T) {
	t.Parallel()
	began := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got, ok := AttemptFrom(WithAttempt(context.Background(), began)); !ok || !got.Equal(began) {
		t.Fatalf("AttemptFrom = %v, %v; want %v", got, ok, began)
	}
	if got, ok := AttemptFrom(WithAttempt(context.Background(), time.Time{})); ok {
		t.Fatalf("a zero start was carried: %v", got)
	}
	if _, ok := AttemptFrom(context.Background()); ok {
		t.Fatal("AttemptFrom without WithAttempt reported a start")
	}
}
