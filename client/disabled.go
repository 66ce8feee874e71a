package client

import (
	"errors"
	"fmt"
	"strings"
)

// DisabledEnv is the environment variable that turns Config.Disabled on
// for every Executor made by New: set to 1, true, yes or on (in any case;
// t and y too, as Powertools reads POWERTOOLS_IDEMPOTENCY_DISABLED). 0,
// false, no, off (f, n) or empty leave Config as it is. Any other value is
// refused, not guessed at: "enabled" or "ture" could mean either, and
// guessing wrong either repeats effects or silently keeps a switch off.
// The program still starts (a typo in the environment must not crash
// it), New logs the error, and Register and every Execute of the Executor
// fail with ErrDisabledEnv, naming the variable, its value and the values
// it accepts.
const DisabledEnv = "ONCELY_DISABLED"

// ErrDisabledEnv is matched by the error of Register and Execute when
// DisabledEnv held a value New does not know; so is ErrHostInput.
var ErrDisabledEnv = errors.New("client: unknown value of " + DisabledEnv)

// disabledEnvError names DisabledEnv, its value and the accepted values.
type disabledEnvError struct{ value string }

func (e *disabledEnvError) Error() string {
	return fmt.Sprintf("client: %s=%q is not a value it takes: set 1, true, yes or on to disable oncely, or 0, false, no, off or nothing to keep it on", DisabledEnv, e.value)
}

func (e *disabledEnvError) Is(target error) bool {
	return target == ErrDisabledEnv || target == ErrHostInput
}

// parseDisabled reads v, the value of DisabledEnv.
func parseDisabled(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "t", "yes", "y", "on":
		return true, nil
	case "", "0", "false", "f", "no", "n", "off":
		return false, nil
	default:
		return false, &disabledEnvError{value: v}
	}
}
