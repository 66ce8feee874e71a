// Package adaptertest holds what the adapters' tests share: a fast HTTP
// configuration, the table of fault cases every adapter
// runs against its fake, and the check of the invariant that table
// specifies.
package adaptertest

import (
	"errors"
	"testing"
	"time"

	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/providers"
)

// Timeout is the attempt timeout of HTTPConfig.
const Timeout = 300 * time.Millisecond

// HTTPConfig is a fast configuration of the HTTP layer: short attempt
// timeouts and backoff, and a Retry-After cap below the fakes' one-second
// minimum, so that a 429 with Retry-After ends the call at once.
func HTTPConfig() providers.Config {
	return providers.Config{
		Timeout:       Timeout,
		MaxRetries:    3,
		RetryWaitMin:  2 * time.Millisecond,
		RetryWaitMax:  10 * time.Millisecond,
		MaxRetryAfter: 100 * time.Millisecond,
	}
}

// Want is the outcome a fault case expects.
type Want int

const (
	// Success: the call succeeds and exactly one effect exists.
	Success Want = iota
	// Definite: a definite failure (errclass.Definite) and no effect.
	Definite
	// Ambiguous: an ambiguous failure; Case.Effects effects exist (once the
	// provider finished a request the client gave up on).
	Ambiguous
	// SuccessOrAmbiguous: a race the test does not control (a delayed
	// first attempt against its retries); either outcome must be truthful.
	SuccessOrAmbiguous
)

func (w Want) String() string {
	return [...]string{"success", "definite", "ambiguous", "success or ambiguous"}[w]
}

// Case is one fault case.
type Case struct {
	Name  string
	Rules []fault.Rule
	Want  Want
	// Effects is the number of effects an Ambiguous outcome leaves.
	Effects int
}

// Faults returns the fault cases for a create on route. replays tells
// whether the adapter resends the create after a failure that may have
// reached the provider (a keyed request or an upsert); an adapter that
// does not (a plain create) sees every such failure as ambiguous.
func Faults(route string, replays bool) []Case {
	at1 := func(a fault.Action, status int, ra time.Duration) []fault.Rule {
		return []fault.Rule{{Route: route, Attempt: 1, Action: a, Status: status, RetryAfter: ra}}
	}
	every := func(a fault.Action, status int) []fault.Rule {
		return []fault.Rule{{Route: route, Action: a, Status: status}}
	}
	// The outcome of a failure of the first attempt: an adapter that
	// replays recovers; one that does not cannot tell what happened.
	first := func(effects int) (Want, int) {
		if replays {
			return Success, 1
		}
		return Ambiguous, effects
	}
	c := func(name string, rules []fault.Rule, w Want, effects int) Case {
		return Case{Name: name, Rules: rules, Want: w, Effects: effects}
	}
	w500, n500 := first(0)
	w503, n503 := first(0)
	wDrop, nDrop := first(1)
	wErr, nErr := first(1)
	wDropBefore, nDropBefore := first(0)
	delay := Ambiguous
	if replays {
		delay = SuccessOrAmbiguous
	}
	return []Case{
		c("no fault", nil, Success, 1),
		c("FailBeforeCommit 500 once", at1(fault.FailBeforeCommit, 500, 0), w500, n500),
		c("FailBeforeCommit 503 once", at1(fault.FailBeforeCommit, 503, 0), w503, n503),
		c("FailBeforeCommit 429 with Retry-After", at1(fault.FailBeforeCommit, 429, time.Second), Definite, 0),
		c("FailBeforeCommit 503 with Retry-After", at1(fault.FailBeforeCommit, 503, time.Second), Definite, 0),
		c("FailBeforeCommit 429 always", every(fault.FailBeforeCommit, 429), Definite, 0),
		c("FailBeforeCommit 500 always", every(fault.FailBeforeCommit, 500), Ambiguous, 0),
		c("CommitThenDrop once", at1(fault.CommitThenDrop, 0, 0), wDrop, nDrop),
		c("CommitThenError once", at1(fault.CommitThenError, 0, 0), wErr, nErr),
		c("CommitThenError always", every(fault.CommitThenError, 0), Ambiguous, 1),
		c("Delay past the client timeout", at1(fault.Delay, 0, 0), delay, 1),
		c("DropBeforeCommit once", at1(fault.DropBeforeCommit, 0, 0), wDropBefore, nDropBefore),
		c("DropBeforeCommit always", every(fault.DropBeforeCommit, 0), Ambiguous, 0),
	}
}

// Check asserts what a fault case promises: after a success exactly one
// effect; after a definite failure none; after an ambiguous one, c.Effects
// once the provider is done. effects returns the effects of the call's
// key.
func Check(t *testing.T, c Case, err error, effects func() []fakes.Effect) {
	t.Helper()
	want := c.Want
	if want == SuccessOrAmbiguous {
		want = Success
		if err != nil {
			want = Ambiguous
		}
	}
	if want == Success {
		if err != nil {
			t.Fatalf("%s: want success, got %v", c.Name, err)
		}
		if n := len(effects()); n != 1 {
			t.Fatalf("%s: success with %d effects, want 1", c.Name, n)
		}
		return
	}
	if err == nil {
		t.Fatalf("%s: want a %v failure, got success (%d effects)", c.Name, want, len(effects()))
	}
	var pe *providers.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("%s: error %v (%T) is not a *providers.ProviderError", c.Name, err, err)
	}
	class := errclass.Of(err)
	switch want {
	case Definite:
		if class != errclass.Definite {
			t.Fatalf("%s: class %v, want definite: %v", c.Name, class, err)
		}
		if n := len(effects()); n != 0 {
			t.Fatalf("%s: definite failure with %d effects", c.Name, n)
		}
	case Ambiguous:
		if class != errclass.Ambiguous {
			t.Fatalf("%s: class %v, want ambiguous: %v", c.Name, class, err)
		}
		// A request the client gave up on may still commit: wait for the
		// expected count, then make sure it is not exceeded.
		deadline := time.Now().Add(3 * time.Second)
		n := len(effects())
		for n < c.Effects && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
			n = len(effects())
		}
		if n != c.Effects {
			t.Fatalf("%s: ambiguous failure with %d effects, want %d", c.Name, n, c.Effects)
		}
	}
}
