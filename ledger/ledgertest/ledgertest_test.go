package ledgertest_test

import "testing"

// TestExampleConformance runs the package example's conformance test, on
// the memory ledger, so that the example shown is one that passes.
func TestExampleConformance(t *testing.T) {
	conformance(t)
}
