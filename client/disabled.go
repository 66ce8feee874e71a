package client

import (
	"fmt"
	"strings"
)

// DisabledEnv is the environment variable that turns Config.Disabled on
// for every Executor made by New: set to 1, true, yes or on (in any case;
// t and y too, as Powertools reads POWERTOOLS_IDEMPOTENCY_DISABLED). 0,
// false, no, off (f, n) or empty leave Config as it is. Any other value
// makes New panic, naming it: "enabled" or "ture" could mean either, and
// guessing wrong either repeats effects or silently keeps a switch off.
const DisabledEnv = "ONCELY_DISABLED"

// parseDisabled reads v, the value of DisabledEnv.
func parseDisabled(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "t", "yes", "y", "on":
		return true, nil
	case "", "0", "false", "f", "no", "n", "off":
		return false, nil
	default:
		return false, fmt.Errorf("client: %s=%q: want 1, true, yes or on to disable oncely, or 0, false, no, off or nothing", DisabledEnv, v)
	}
}
