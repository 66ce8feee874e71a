package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/oncelytest"
)

// actionSeq numbers the actions of the failure cases, so that every case
// acts on its own order, ticket or contact.
var actionSeq atomic.Int64

// TestFailureCases runs the failure cases for every side-effecting adapter
// on every ledger: TestFailureCases/<ledger>/<adapter>/<case>.
func TestFailureCases(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			for i := range scenarios {
				s := &scenarios[i]
				t.Run(s.name, func(t *testing.T) {
					t.Parallel()
					oncelytest.FailureCases(t, func(t *testing.T, clock clock.Clock) oncelytest.Harness {
						return harness(t, b, s, clock)
					})
					if b.name != "memory" { // a memory ledger dies with its process
						t.Run("killed_after_effect", func(t *testing.T) {
							t.Parallel()
							killedAfterEffect(t, b, s)
						})
					}
				})
			}
		})
	}
}

// action is one prepared action of a scenario on a fresh fake.
type action struct {
	k     *kit
	s     *scenario
	n     int
	ref   string
	input json.RawMessage
}

func newAction(t *testing.T, s *scenario, clock *clock.Fake) *action {
	t.Helper()
	k := newKit(t, kitOptions{seed: 1, clock: clock}, s.provider)
	a := &action{k: k, s: s, n: int(actionSeq.Add(1))}
	ref, err := prepare(context.Background(), k, s, fmt.Sprintf("fc-%d", a.n), a.n)
	if err != nil {
		t.Fatal(err)
	}
	a.ref = ref
	a.input = s.input(a.n, ref, "Hello, we have processed your request.")
	return a
}

// effectList returns the effects of the action's kind on its fake.
func (a *action) effectList() []fakes.Effect {
	var out []fakes.Effect
	for _, e := range a.k.server(a.s.provider).journal() {
		if e.Kind == a.s.kind && !strings.HasPrefix(e.Key, setupPrefix) {
			out = append(out, e)
		}
	}
	return out
}

func (a *action) effects() int { return len(a.effectList()) }

func harness(t *testing.T, b backend, s *scenario, clk clock.Clock) oncelytest.Harness {
	fake, ok := clk.(*clock.Fake)
	if !ok {
		t.Fatalf("the failure cases' clock is a %T, want a *clock.Fake", clk)
	}
	a := newAction(t, s, fake)
	store, _ := b.open(t, clk)
	faults := a.k.server(s.provider).faults
	return oncelytest.Harness{
		Store:   store,
		Tool:    a.k.tools[s.name],
		Input:   a.input,
		Recall:  s.input(a.n, a.ref, "All set! I took care of that for you."),
		Effects: a.effects,
		TimeoutAfterSuccess: func() {
			// The next create is held until the client gives up (on a
			// signal, see holdTransport), then committed.
			faults.Add(fault.Rule{Route: s.route, Attempt: 1, Action: fault.Delay})
		},
		Config: &client.Config{Wait: 10 * time.Second},
	}
}

// killedAfterEffect runs the call in a child process that is killed right
// after the provider call returned, before the ledger write, then resumes
// the run here on the same ledger once the child's lease has run out.
func killedAfterEffect(t *testing.T, b backend, s *scenario) {
	t0 := time.Now().Truncate(time.Second)
	clock := clock.NewFake(t0)
	a := newAction(t, s, clock)
	store, env := b.open(t, clock)
	runID := fmt.Sprintf("killed-%s-%d", s.name, a.n)
	u, err := json.Marshal(a.k.urls)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(append(os.Environ(), env...),
		helperEnv+"=killed_after_effect", "ONCELY_SCENARIO="+s.name, "ONCELY_URLS="+string(u),
		"ONCELY_RUN="+runID, "ONCELY_INPUT="+string(a.input), fmt.Sprintf("ONCELY_T0=%d", t0.UnixMilli()))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != killedExit {
		t.Fatalf("child process: %v, want exit code %d; output:\n%s", err, killedExit, out)
	}
	if n := a.effects(); n != 1 {
		t.Fatalf("the child made %d effects before it died, want 1; output:\n%s", n, out)
	}

	tool := a.k.tools[s.name]
	call := client.Call{Tool: tool.Name, Input: a.input, ID: "toolu_resumed"}
	key, err := tool.Key(runID, call, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if rec, err := store.Get(ctx, key); err != nil || rec.State != ledger.StatePending {
		t.Fatalf("record after the kill: %+v, %v; want pending", rec, err)
	}
	clock.Advance(lease + time.Second) // the dead process's lease has run out
	exec := client.New(store, &client.Config{Clock: clock, Liveness: lease})
	if err := exec.Register(tool); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Execute(ctx, runID, call)
	// Already done when the lookup found the effect; executed when the
	// request was resent and the provider replayed its first answer.
	if err != nil || res.Outcome != client.AlreadyDone && res.Outcome != client.Executed {
		t.Fatalf("resumed call: %s %q, %v; want done", res.Outcome, res.Text, err)
	}
	if effs := a.effectList(); len(effs) != 1 || effs[0].ID != res.Ref {
		t.Errorf("effects after the resume: %+v, want one, %s", effs, res.Ref)
	}
	if rec, err := store.Get(ctx, key); err != nil || rec.State != ledger.StateDone || rec.Ref != res.Ref {
		t.Errorf("record after the resume: %+v, %v; want done with ref %s", rec, err, res.Ref)
	}
}
