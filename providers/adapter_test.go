package providers

import "testing"

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
