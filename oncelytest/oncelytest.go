// Package oncelytest runs oncely's failure cases against your own tool, the
// way package integration runs them against the shipped adapters.
//
// You describe one action — your client.Tool (with its Reconciler), one
// call's input, a ledger, a way to count the effects your fake provider
// really committed, and a way to make the provider time out after it
// succeeded — and FailureCases checks, each in its own subtest, that every
// way an agent repeats the action ends in exactly one effect, and that
// every result claims no more than what happened:
//
//   - same_call_twice: the call is executed twice in a row.
//   - model_recall: the model calls again with rephrased free text
//     (Harness.Recall) and a new call id.
//   - crash_after_effect: the process dies right after the provider call,
//     before the ledger write; after the lease ran out the run resumes in a
//     new process. The death is simulated in-process: the goroutine running
//     the call exits (runtime.Goexit) and its claim is abandoned. Package
//     integration also kills real processes.
//   - parallel_resume/2 and /8: after such a crash, 2 (8) processes resume
//     the run at once.
//   - double_approval: a paused call is approved twice and both approvals
//     deliver it at the same moment.
//   - timeout_after_success: the provider commits, but the client sees a
//     failure (Harness.TimeoutAfterSuccess arranges it); the call must end
//     done without a second effect.
//
// Each "process" is its own client.Executor over the shared store. The
// executors read a fake clock (a *clock.Fake near the wall clock)
// that FailureCases moves past leases, so no case sleeps.
package oncelytest

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// Lease is the executors' liveness (client.Config.Liveness) in
// FailureCases; the fake clock moves past it to simulate that a crashed
// process's claim ran out (its heartbeats stopped).
const Lease = time.Minute

// Harness is one action under test. FailureCases makes a fresh one for
// every case.
type Harness struct {
	// Store is the ledger, reading the clock FailureCases passed.
	Store ledger.Store
	// Tool is the tool under test. Its Run must pass inv.DownstreamKey to
	// the provider, and its Reconciler must find the effect within its
	// own wait (a fake with a short index lag, or a fake clock).
	Tool client.Tool
	// Input is the call's input.
	Input json.RawMessage
	// Recall is the same action as the model may rephrase it: the same
	// identity fields, other free text. Empty: Input again.
	Recall json.RawMessage
	// Effects returns how many effects the provider committed since the
	// harness was made — counted from the fake's journal, never by the
	// code under test.
	Effects func() int
	// TimeoutAfterSuccess arranges for the next request that creates the
	// effect to commit and then fail on the client's side (for example a
	// fault.Rule CommitThenDrop or Delay on the create route).
	TimeoutAfterSuccess func()
	// Config tunes the executors (nil: defaults). Clock and Lease are
	// always set by FailureCases.
	Config *client.Config
}

// FailureCases runs the failure cases as subtests of t. newHarness is
// called once per case, with the clock the case moves; it must build the
// store on that clock.
func FailureCases(t *testing.T, newHarness func(t *testing.T, clock clock.Clock) Harness) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(*env)
	}{
		{"same_call_twice", sameCallTwice},
		{"model_recall", modelRecall},
		{"crash_after_effect", crashAfterEffect},
		{"parallel_resume/2", func(e *env) { parallelResume(e, 2) }},
		{"parallel_resume/8", func(e *env) { parallelResume(e, 8) }},
		{"double_approval", doubleApproval},
		{"timeout_after_success", timeoutAfterSuccess},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clock := clock.NewFake(time.Now().Truncate(time.Second))
			h := newHarness(t, clock)
			if h.Store == nil || h.Tool.Run == nil || len(h.Input) == 0 || h.Effects == nil || h.TimeoutAfterSuccess == nil {
				t.Fatal("oncelytest: the harness needs Store, Tool.Run, Input, Effects and TimeoutAfterSuccess")
			}
			c.run(&env{t: t, h: h, clock: clock, runID: fmt.Sprintf("oncelytest-%s-%d", t.Name(), clock.Now().UnixNano())})
		})
	}
}

// env is one case's world.
type env struct {
	t     *testing.T
	h     Harness
	clock *clock.Fake
	runID string
	calls atomic.Int64
}

// process is one executor: what one process of the agent would run. A
// process with crash set dies right after its tool's Run returns.
type process struct {
	e     *env
	exec  *client.Executor
	crash atomic.Bool
}

func (e *env) process() *process {
	e.t.Helper()
	p := &process{e: e}
	tool := e.h.Tool
	run := tool.Run
	tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		eff, err := run(ctx, inv)
		if p.crash.Load() {
			runtime.Goexit() // dies after the provider call, before the record
		}
		return eff, err
	}
	var cfg client.Config
	if e.h.Config != nil {
		cfg = *e.h.Config
	}
	cfg.Clock, cfg.Liveness = e.clock, Lease
	p.exec = client.New(e.h.Store, &cfg)
	if err := p.exec.Register(tool); err != nil {
		e.t.Fatalf("oncelytest: register: %v", err)
	}
	return p
}

// execute delivers input with a fresh call id, unless id is given.
func (p *process) execute(input json.RawMessage, id string) client.Result {
	e := p.e
	if id == "" {
		id = fmt.Sprintf("toolu_%d", e.calls.Add(1))
	}
	res, err := p.exec.Execute(context.Background(), e.runID, client.Call{Tool: e.h.Tool.Name, Input: input, ID: id})
	if err != nil {
		e.t.Errorf("oncelytest: execute: %v (result %q)", err, res.Text)
	}
	return res
}

// crashAfterEffect runs the call in a process that dies right after the
// provider call, then lets the claim's lease run out.
func (e *env) crashAfterEffect() {
	p := e.process()
	p.crash.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // stops the dead call's lease heartbeat
	died := make(chan struct{})
	go func() {
		defer close(died)
		_, _ = p.exec.Execute(ctx, e.runID, client.Call{Tool: e.h.Tool.Name, Input: e.h.Input, ID: "toolu_crashed"})
		e.t.Error("oncelytest: the call was expected to die after the provider call")
	}()
	<-died
	e.clock.Advance(Lease + time.Second)
}

// effects checks the provider committed exactly one effect.
func (e *env) effects() {
	e.t.Helper()
	if n := e.h.Effects(); n != 1 {
		e.t.Errorf("the provider committed %d effects, want 1", n)
	}
}

// truthful checks a result against the effect that exists: it must not say
// that nothing was done, nor report another outcome than it had.
func (e *env) truthful(res client.Result, allowed ...client.Outcome) {
	e.t.Helper()
	for _, o := range allowed {
		if res.Outcome == o {
			return
		}
	}
	e.t.Errorf("outcome %s (%q), want one of %v", res.Outcome, res.Text, allowed)
}

// settledDone checks that one more delivery of the call, after everything
// else, is answered from the record as already done.
func (e *env) settledDone() {
	e.t.Helper()
	res := e.process().execute(e.h.Input, "")
	e.truthful(res, client.AlreadyDone)
}

func sameCallTwice(e *env) {
	p := e.process()
	e.truthful(p.execute(e.h.Input, ""), client.Executed)
	e.truthful(p.execute(e.h.Input, ""), client.AlreadyDone)
	e.effects()
}

func modelRecall(e *env) {
	recall := e.h.Recall
	if len(recall) == 0 {
		recall = e.h.Input
	}
	e.truthful(e.process().execute(e.h.Input, "toolu_first"), client.Executed)
	e.truthful(e.process().execute(recall, "toolu_rephrased"), client.AlreadyDone)
	e.effects()
}

// The resumed call is told the action is done: already done when its
// reconciler found the effect, executed when it resent the request and the
// provider answered with the first response (a deduplicating provider).
func crashAfterEffect(e *env) {
	e.crashAfterEffect()
	e.truthful(e.process().execute(e.h.Input, ""), client.AlreadyDone, client.Executed)
	e.effects()
	e.settledDone()
}

func parallelResume(e *env, n int) {
	e.crashAfterEffect()
	// Whoever took the claim over found the effect (or resent); the others
	// saw it done, or still in progress if they stopped waiting first.
	e.oneExecuted(e.concurrently(n, ""), 0)
	e.effects()
	e.settledDone()
}

func doubleApproval(e *env) {
	e.oneExecuted(e.concurrently(2, "toolu_approved"), 1)
	e.effects()
	e.settledDone()
}

// oneExecuted checks the results of concurrent deliveries: each done, or
// in progress, and at most one (exactly want, if want is 1) executed.
func (e *env) oneExecuted(results []client.Result, want int) {
	e.t.Helper()
	executed := 0
	for _, res := range results {
		e.truthful(res, client.Executed, client.AlreadyDone, client.InProgress)
		if res.Outcome == client.Executed {
			executed++
		}
	}
	if executed > 1 || want == 1 && executed != 1 {
		e.t.Errorf("%d of %d deliveries executed the call, want %s", executed, len(results), map[int]string{0: "at most 1", 1: "1"}[want])
	}
}

func timeoutAfterSuccess(e *env) {
	e.h.TimeoutAfterSuccess()
	// Reconciled at once: it finds the effect, or resends with the same key
	// and gets the provider's replay.
	e.truthful(e.process().execute(e.h.Input, ""), client.Executed, client.AlreadyDone)
	e.effects()
	e.settledDone()
}

// concurrently delivers the call from n processes at once.
func (e *env) concurrently(n int, id string) []client.Result {
	procs := make([]*process, n)
	for i := range procs {
		procs[i] = e.process()
	}
	results := make([]client.Result, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i, p := range procs {
		wg.Go(func() {
			start.Wait()
			results[i] = p.execute(e.h.Input, id)
		})
	}
	start.Done()
	wg.Wait()
	return results
}
