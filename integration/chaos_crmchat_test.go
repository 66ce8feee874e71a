package integration

import (
	"fmt"
	"testing"
)

// TestChaos draws its actions from every scenario, the HubSpot and Slack
// ones included; these runs give each of them a whole chaos run of its
// own, so that every fault meets them however the draw falls.
func TestChaosHubSpotSlack(t *testing.T) {
	t.Parallel()
	for i, name := range []string{"hubspot_upsert", "slack_post"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			seed := int64(2500 + i)
			sum := runChaos(t, chaosConfig{seed: seed, runs: 200, scenario: name})
			fmt.Printf("chaos %s: %d runs, seed %d, %d duplicates, %d lost, %d untruthful\n", name, sum.runs, seed, sum.duplicates, sum.lost, sum.untruthful)
			if sum.failed() || sum.runs != 200 {
				t.Errorf("%s seed %d: %d runs, %d duplicates, %d lost, %d untruthful\n%s", name, seed, sum.runs, sum.duplicates, sum.lost, sum.untruthful, sum.report())
			}
		})
	}
}

// The checker is not blind on Slack either: with blind retry instead of
// reconciliation it reports duplicate messages, since Slack does not
// deduplicate.
func TestChaosCheckerCatchesDuplicatesWithoutReconcileSlack(t *testing.T) {
	t.Parallel()
	sum := runChaos(t, chaosConfig{seed: 42, runs: 100, blind: true, scenario: "slack_post"})
	if sum.duplicates == 0 {
		t.Errorf("blind retry: %d duplicates in %d runs, want some (lost %d, untruthful %d)", sum.duplicates, sum.runs, sum.lost, sum.untruthful)
	}
	t.Logf("blind retry on Slack: %d runs, %d duplicates, %d lost, %d untruthful", sum.runs, sum.duplicates, sum.lost, sum.untruthful)
}
