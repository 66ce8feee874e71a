package integration

import "testing"

// The chaos run on the GitHub scenarios alone (they are also among those
// TestChaos draws from): issues and comments opened once each, whatever
// the faults, crashes and model repeats.
func TestChaosGitHub(t *testing.T) {
	t.Parallel()
	for i, name := range []string{"github_issue", "github_comment"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			seed := int64(250 + i)
			sum := runChaos(t, chaosConfig{seed: seed, runs: 100, scenario: name})
			if sum.failed() {
				t.Errorf("chaos seed %d on %s: %d duplicates, %d lost, %d untruthful\n%s", seed, name, sum.duplicates, sum.lost, sum.untruthful, sum.report())
			}
			if sum.runs != 100 || sum.actions == 0 {
				t.Errorf("%d runs with %d actions, want 100 runs", sum.runs, sum.actions)
			}
		})
	}
}

// The checker sees GitHub's lack of deduplication: with blind retry
// instead of reconciliation, the GitHub issues are opened twice.
func TestChaosCheckerCatchesGitHubDuplicatesWithoutReconcile(t *testing.T) {
	t.Parallel()
	sum := runChaos(t, chaosConfig{seed: 252, runs: 150, blind: true, scenario: "github_issue"})
	if sum.duplicates == 0 {
		t.Errorf("blind retry: %d duplicates in %d runs, want some (lost %d, untruthful %d)", sum.duplicates, sum.runs, sum.lost, sum.untruthful)
	}
	t.Logf("blind retry: %d runs, %d duplicates, %d lost, %d untruthful", sum.runs, sum.duplicates, sum.lost, sum.untruthful)
}
