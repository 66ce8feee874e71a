package integration

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/fakes"
	"github.com/idemkit/idemkit/fakes/fault"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgermem"
	"github.com/idemkit/idemkit/ledger/ledgerredis"
	"github.com/idemkit/idemkit/ledger/ledgerredis/redistest"
	"github.com/idemkit/idemkit/ledger/ledgerpg/pgtest"
	"github.com/idemkit/idemkit/ledger/ledgersqlite"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/reconcile"
)

var (
	chaosRuns = flag.Int("chaos.runs", 2000, "number of randomized agent runs of TestChaos")
	chaosSeed = flag.Int64("chaos.seed", 0, "seed of TestChaos (0: from the time, printed)")
)

// TestChaos runs randomized agent runs over every adapter and checks the
// providers' journals against the intended actions and what the model was
// told. It prints one line: the runs, the seed and the three counts.
func TestChaos(t *testing.T) {
	t.Parallel()
	seed := *chaosSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	sum := runChaos(t, chaosConfig{seed: seed, runs: *chaosRuns})
	fmt.Printf("chaos: %d runs, seed %d, %d duplicates, %d lost, %d untruthful\n", sum.runs, seed, sum.duplicates, sum.lost, sum.untruthful)
	if sum.failed() {
		t.Errorf("chaos seed %d: %d duplicates, %d lost, %d untruthful; rerun with -chaos.seed=%d -chaos.runs=%d\n%s",
			seed, sum.duplicates, sum.lost, sum.untruthful, seed, *chaosRuns, sum.report())
	}
	if sum.runs != *chaosRuns {
		t.Errorf("%d runs finished, want %d", sum.runs, *chaosRuns)
	}
}

// The checker is not blind: with blind retry instead of reconciliation (a
// reconciler that always says "not found") it reports duplicates.
func TestChaosCheckerCatchesDuplicatesWithoutReconcile(t *testing.T) {
	t.Parallel()
	sum := runChaos(t, chaosConfig{seed: 42, runs: 200, blind: true})
	if sum.duplicates == 0 {
		t.Errorf("blind retry: %d duplicates in %d runs, want some (lost %d, untruthful %d)", sum.duplicates, sum.runs, sum.lost, sum.untruthful)
	}
	t.Logf("blind retry: %d runs, %d duplicates, %d lost, %d untruthful", sum.runs, sum.duplicates, sum.lost, sum.untruthful)
}

type chaosConfig struct {
	seed     int64
	runs     int
	blind    bool
	pgSchema string // the workers' PostgreSQL ledger (set by runChaos)
}

// Shape of the chaos.
const (
	chaosWorkers   = 64
	faultRate      = 0.12
	sqliteShare    = 0.15 // of runs on SQLite; the rest on memory
	redisShare     = 0.15 // of runs on Redis
	postgresShare  = 0.15 // of runs on PostgreSQL
	maxActions     = 3
	maxResumes     = 4
	maxModelRounds = 3
	executorWait   = 2 * time.Second
)

// faultTemplates is every fault the fakes inject, drawn at random per
// request by each fake's seeded injector.
var faultTemplates = []fault.Rule{
	{Action: fault.FailBeforeCommit, Status: http.StatusInternalServerError},
	{Action: fault.FailBeforeCommit, Status: http.StatusServiceUnavailable},
	{Action: fault.FailBeforeCommit, Status: http.StatusServiceUnavailable, RetryAfter: time.Second},
	{Action: fault.FailBeforeCommit, Status: http.StatusTooManyRequests, RetryAfter: time.Second},
	{Action: fault.DropBeforeCommit},
	{Action: fault.CommitThenDrop},
	{Action: fault.CommitThenError},
	{Action: fault.CommitThenError, Status: http.StatusBadGateway, SaveError: true},
	{Action: fault.Delay}, // until the client gives up, then commit
}

// Where a process dies while it handles a call.
type crashPoint int

const (
	noCrash          crashPoint = iota
	crashBeforeClaim            // before the call reached the executor
	crashAfterClaim             // claimed, before the provider call
	crashAfterEffect            // after the provider call, before the record
	crashAfterRecord            // recorded, the result never reached the model
)

var crashNames = [...]string{"none", "before claim", "after claim", "after effect", "after record"}

// worker runs chaos runs one after another on its own fakes, clock and
// ledgers, so that moving its clock past a lease never cuts a lease of
// another run short.
type worker struct {
	id     int
	kit    *kit
	clock  *ledgertest.Clock
	mem    ledger.Store
	sqlite ledger.Store
	redis  ledger.Store
	pg     ledger.Store
	tools  []client.Tool
}

func newWorker(t *testing.T, cfg chaosConfig, id int) *worker {
	w := &worker{id: id, kit: newKit(t, kitOptions{seed: cfg.seed + int64(id), blind: cfg.blind})}
	w.clock = ledgertest.NewClock(time.Now().Truncate(time.Second))
	w.mem = ledgermem.New(&ledgermem.Config{Clock: w.clock})
	db, err := ledgersqlite.Open(context.Background(), filepath.Join(t.TempDir(), fmt.Sprintf("chaos-%d.db", id)),
		&ledgersqlite.Config{Clock: w.clock, Synchronous: ledgersqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w.sqlite = db
	url := redistest.URL(t)
	w.redis = ledgerredis.New(redistest.NewClient(t, url), &ledgerredis.Config{Clock: w.clock, Prefix: redistest.Prefix(t, url)})
	w.pg = postgresStore(t, cfg.pgSchema, w.clock)
	for _, s := range scenarios {
		w.tools = append(w.tools, w.kit.tools[s.name])
	}
	for _, name := range providerNames {
		w.kit.server(name).faults.SetRandomRules(faultRate, faultTemplates...)
	}
	return w
}

// chaosSummary adds up the checked runs.
type chaosSummary struct {
	mu                                 sync.Mutex
	runs, duplicates, lost, untruthful int
	failures                           []string // histories of failing runs
	actions                            int
	states                             map[ledger.State]int // of the actions' records at the end
	reasons                            map[string]int       // why records ended failed or uncertain
}

func (s *chaosSummary) failed() bool { return s.duplicates+s.lost+s.untruthful > 0 }

func (s *chaosSummary) add(r *chaosRun) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	s.actions += len(r.actions)
	for state, n := range r.states {
		s.states[state] += n
	}
	for reason, n := range r.reasons {
		s.reasons[reason] += n
	}
	s.duplicates += r.duplicates
	s.lost += r.lost
	s.untruthful += r.untruthful
	if r.duplicates+r.lost+r.untruthful > 0 && len(s.failures) < 3 {
		s.failures = append(s.failures, r.history())
	}
}

func (s *chaosSummary) report() string {
	return strings.Join(s.failures, "\n")
}

func runChaos(t *testing.T, cfg chaosConfig) *chaosSummary {
	t.Helper()
	workers := min(chaosWorkers, cfg.runs)
	cfg.pgSchema = pgtest.Schema(t, pgtest.Pool(t))
	sum := &chaosSummary{states: map[ledger.State]int{}, reasons: map[string]int{}}
	var wg sync.WaitGroup
	for id := range workers {
		w := newWorker(t, cfg, id)
		wg.Go(func() {
			// A fixed share of the runs per worker: a worker's fakes see
			// the same runs, in the same order, for the same seed.
			for i := id; i < cfg.runs; i += workers {
				sum.add(w.run(cfg, i))
			}
		})
	}
	wg.Wait()
	t.Logf("chaos seed %d: %d runs, %d actions ending %v", cfg.seed, sum.runs, sum.actions, sum.states)
	for reason, n := range sum.reasons {
		t.Logf("%5d %s", n, reason)
	}
	return sum
}

// chaosRun is one agent run: its plan, what happened, and the verdict.
type chaosRun struct {
	w       *worker
	i       int
	runID   string
	rng     *rand.Rand
	store   ledger.Store
	backend string
	actions []*chaosAction
	log     []string
	// where the fakes' journals and fault logs stood when the run began
	journalFrom, faultFrom map[string]int

	duplicates, lost, untruthful int
	problems                     []string
	states                       map[ledger.State]int
	reasons                      map[string]int
}

// chaosAction is one action the agent means to perform.
type chaosAction struct {
	s       *scenario
	n       int
	ref     string
	key     string
	crash   crashPoint
	resumes int  // processes resuming after a crash
	double  bool // the first delivery is approved twice at once
	recall  bool // the model calls again after success, rephrased
	disobey bool // the model retries although told not to
	results []client.Result
	variant int
}

func (r *chaosRun) logf(format string, args ...any) {
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (w *worker) run(cfg chaosConfig, i int) *chaosRun {
	r := &chaosRun{w: w, i: i, runID: fmt.Sprintf("chaos-%d-%d", cfg.seed, i),
		rng:   rand.New(rand.NewPCG(uint64(cfg.seed), uint64(i))),
		store: w.mem, backend: "memory", journalFrom: map[string]int{}, faultFrom: map[string]int{},
		states: map[ledger.State]int{}, reasons: map[string]int{}}
	switch x := r.rng.Float64(); {
	case x < sqliteShare:
		r.store, r.backend = w.sqlite, "sqlite"
	case x < sqliteShare+redisShare:
		r.store, r.backend = w.redis, "redis"
	case x < sqliteShare+redisShare+postgresShare:
		r.store, r.backend = w.pg, "postgres"
	}
	for _, name := range providerNames {
		s := w.kit.server(name)
		r.journalFrom[name] = len(s.journal())
		r.faultFrom[name] = len(s.faults.Log())
	}
	ctx := context.Background()
	for j := range 1 + r.rng.IntN(maxActions) {
		a := &chaosAction{s: &scenarios[r.rng.IntN(len(scenarios))], n: i*10 + j}
		switch x := r.rng.Float64(); {
		case x < 0.5:
		case x < 0.625:
			a.crash = crashBeforeClaim
		case x < 0.75:
			a.crash = crashAfterClaim
		case x < 0.875:
			a.crash = crashAfterEffect
		default:
			a.crash = crashAfterRecord
		}
		a.resumes = 1 + r.rng.IntN(maxResumes)
		a.double = r.rng.Float64() < 0.2
		a.recall = r.rng.Float64() < 0.3
		a.disobey = r.rng.Float64() < 0.2
		ref, err := prepare(ctx, w.kit, a.s, r.runID+fmt.Sprint(j), a.n)
		if err != nil {
			r.problem(&r.lost, "action %d: %v", j, err)
			continue
		}
		a.ref = ref
		call := a.call(r, "first")
		tool := w.kit.tools[a.s.name]
		if a.key, err = tool.Key(r.runID, call, 0); err != nil {
			r.problem(&r.untruthful, "action %d: key: %v", j, err)
			continue
		}
		r.actions = append(r.actions, a)
		r.logf("action %d: %s n=%d key=%.12s crash=%s resumes=%d double=%v recall=%v disobey=%v",
			j, a.s.name, a.n, a.key, crashNames[a.crash], a.resumes, a.double, a.recall, a.disobey)
		r.perform(a, call)
	}
	r.finish()
	return r
}

// call is the model's call of a: a new call id, and free text that
// varies between calls.
func (a *chaosAction) call(r *chaosRun, id string) client.Call {
	a.variant++
	texts := []string{"Processing this as requested.", "Sure — taking care of it now!", "As discussed, doing it.", "Retrying the same thing."}
	return client.Call{Tool: r.w.kit.tools[a.s.name].Name, Input: a.s.input(a.n, a.ref, texts[a.variant%len(texts)]),
		ID: fmt.Sprintf("toolu_%s_%d", id, a.variant)}
}

// perform delivers an action the way the plan says, then lets the model
// react to what it was told.
func (r *chaosRun) perform(a *chaosAction, call client.Call) {
	var seen []client.Result
	switch {
	case a.crash == crashBeforeClaim:
		r.logf("  the process died before it delivered the call")
	case a.crash != noCrash:
		d := r.execute(call, a.crash)
		switch {
		case !d.returned:
			r.logf("  %s: the process died %s", call.ID, crashNames[a.crash])
		case a.crash == crashAfterRecord:
			a.results = append(a.results, d.res) // checked, though the model never saw it
			r.logf("  %s: %s; the process died before the model saw it", call.ID, d)
		default:
			seen = r.record(a, call, d)
		}
	case a.double:
		seen = r.concurrently(a, call, 2)
	default:
		seen = r.record(a, call, r.execute(call, noCrash))
	}
	if a.crash != noCrash {
		// Whatever died, its lease runs out; the run resumes from its
		// checkpoint and delivers the same call again, maybe from several
		// processes at once.
		r.w.clock.Advance(lease + time.Second)
		seen = r.concurrently(a, call, a.resumes)
	}
	recalled, disobeyed := false, false
	for range maxModelRounds {
		if len(seen) == 0 {
			return
		}
		switch last := seen[0]; {
		case last.Outcome == client.Failed && last.Retryable:
		case (last.Outcome == client.Executed || last.Outcome == client.AlreadyDone) && a.recall && !recalled:
			recalled = true // the model calls again, rephrased, as models do
		case (last.Outcome == client.Uncertain || last.Outcome == client.InProgress) && a.disobey && !disobeyed:
			disobeyed = true // told not to retry, it retries anyway
		default:
			return
		}
		next := a.call(r, "again")
		seen = r.record(a, next, r.execute(next, noCrash))
	}
}

// delivery is the end of one process's handling of a call.
type delivery struct {
	res      client.Result
	err      error
	returned bool // false: the process died first
}

func (d delivery) String() string {
	s := fmt.Sprintf("%s attempt %d ref %q: %q", d.res.Outcome, d.res.Attempt, d.res.Ref, d.res.Text)
	if d.res.Shared {
		s += " (shared)"
	}
	if d.err != nil {
		s += fmt.Sprintf(" (executor error: %v)", d.err)
	}
	return s
}

// record keeps what the model was told.
func (r *chaosRun) record(a *chaosAction, call client.Call, ds ...delivery) []client.Result {
	var seen []client.Result
	for i, d := range ds {
		if !d.returned {
			continue
		}
		who := ""
		if len(ds) > 1 {
			who = fmt.Sprintf(" [process %d]", i+1)
		}
		r.logf("  %s%s: %s", call.ID, who, d)
		a.results = append(a.results, d.res)
		seen = append(seen, d.res)
	}
	return seen
}

// execute runs call in a new process (an executor of its own over the
// run's ledger) that dies at crash.
func (r *chaosRun) execute(call client.Call, crash crashPoint) delivery {
	exec := client.New(r.store, &client.Config{Clock: r.w.clock, Lease: lease, Wait: executorWait})
	for _, tool := range r.w.tools {
		run := tool.Run
		tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			if crash == crashAfterClaim {
				runtime.Goexit()
			}
			eff, err := run(ctx, inv)
			if crash == crashAfterEffect {
				runtime.Goexit()
			}
			return eff, err
		}
		if err := exec.Register(tool); err != nil {
			panic(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a dead process's lease heartbeat dies with it
	var d delivery
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.res, d.err = exec.Execute(ctx, r.runID, call)
		d.returned = true
	}()
	<-done
	return d
}

// concurrently delivers call from n processes at once.
func (r *chaosRun) concurrently(a *chaosAction, call client.Call, n int) []client.Result {
	ds := make([]delivery, n)
	var wg, start sync.WaitGroup
	start.Add(1)
	for i := range ds {
		wg.Go(func() {
			start.Wait()
			ds[i] = r.execute(call, noCrash)
		})
	}
	start.Done()
	wg.Wait()
	return r.record(a, call, ds...)
}

func (r *chaosRun) problem(counter *int, format string, args ...any) {
	*counter++
	msg := fmt.Sprintf(format, args...)
	r.problems = append(r.problems, msg)
	r.logf("PROBLEM: %s", msg)
}

// finish sweeps what the run left behind, as a reconcile job would, then
// checks the run: the providers' journals against the intended actions,
// the ledger, and every result.
func (r *chaosRun) finish() {
	ctx := context.Background()
	r.w.clock.Advance(lease + time.Second)
	sweeper := reconcile.NewSweeper(r.store, r.w.tools, &reconcile.SweeperConfig{Clock: r.w.clock, RunID: r.runID})
	rep, err := sweeper.Sweep(ctx)
	r.logf("final sweep: %+v (error: %v)", rep, err)

	explained := map[string]bool{} // provider/seq of the effects an action explains
	for j, a := range r.actions {
		effs := effectsOf(r.effects(a.s.provider), a.s.kind, a.key)
		ids := map[string]bool{}
		for _, e := range effs {
			explained[fmt.Sprintf("%s/%d", a.s.provider, e.Seq)] = true
			ids[e.ID] = true
		}
		if len(effs) > 1 {
			r.duplicates += len(effs) - 2 // problem counts one
			r.problem(&r.duplicates, "action %d (%s): %d effects", j, a.s.name, len(effs))
		}
		rec, err := r.store.Get(ctx, a.key)
		if err == nil {
			r.states[rec.State]++
			if rec.State == ledger.StateFailed || rec.State == ledger.StateUncertain {
				reason := rec.Reason
				if i := strings.IndexAny(reason, "0123456789"); i > 0 {
					reason = reason[:i]
				}
				r.reasons[string(rec.State)+": "+reason]++
			}
		}
		switch {
		case err != nil:
			r.problem(&r.lost, "action %d (%s): no record after the final sweep: %v", j, a.s.name, err)
		case rec.State == ledger.StatePending:
			r.problem(&r.lost, "action %d (%s): still pending after the final sweep", j, a.s.name)
		case rec.State == ledger.StateDone && !ids[rec.Ref]:
			r.problem(&r.untruthful, "action %d (%s): recorded done with ref %q, but the provider has %d effects", j, a.s.name, rec.Ref, len(effs))
		case rec.State == ledger.StateFailed && len(effs) > 0:
			r.problem(&r.untruthful, "action %d (%s): recorded failed (%s), but the provider has the effect", j, a.s.name, rec.Reason)
		default:
			r.logf("action %d: record %s attempt %d ref %q reason %q; %d effects", j, rec.State, rec.Attempt, rec.Ref, rec.Reason, len(effs))
		}
		for _, res := range a.results {
			switch res.Outcome {
			case client.Executed, client.AlreadyDone:
				if !ids[res.Ref] {
					r.problem(&r.untruthful, "action %d (%s): told %q, but the provider has no effect %q", j, a.s.name, res.Text, res.Ref)
				}
			case client.Failed:
				if k := client.DownstreamKey(a.key, res.Attempt); res.Attempt > 0 && hasKey(effs, k) {
					r.problem(&r.untruthful, "action %d (%s): told %q, but attempt %d took effect", j, a.s.name, res.Text, res.Attempt)
				}
			case client.Conflict, client.InvalidInput:
				r.problem(&r.untruthful, "action %d (%s): told %q for a repeat of the same action", j, a.s.name, res.Text)
			}
		}
	}
	for _, name := range providerNames {
		for _, e := range r.effects(name) {
			if !strings.HasPrefix(e.Key, setupPrefix) && !explained[fmt.Sprintf("%s/%d", name, e.Seq)] {
				r.problem(&r.duplicates, "effect %s %s (key %q) that no action explains", e.Kind, e.ID, e.Key)
			}
		}
	}
}

func hasKey(effs []fakes.Effect, key string) bool {
	for _, e := range effs {
		if e.Key == key {
			return true
		}
	}
	return false
}

// effects returns what the provider committed since the run began. Runs
// of a worker follow one another, so these are the run's.
func (r *chaosRun) effects(provider string) []fakes.Effect {
	return r.w.kit.server(provider).journal()[r.journalFrom[provider]:]
}

// history tells what happened in the run, for a failure report.
func (r *chaosRun) history() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--- run %d (%s, %s ledger, worker %d)\n", r.i, r.runID, r.backend, r.w.id)
	for _, line := range r.log {
		b.WriteString(line + "\n")
	}
	for _, name := range providerNames {
		s := r.w.kit.server(name)
		for _, f := range s.faults.Log()[r.faultFrom[name]:] {
			fmt.Fprintf(&b, "fault %s: %s\n", name, f)
		}
		for _, e := range r.effects(name) {
			fmt.Fprintf(&b, "effect %s #%d: %s %s key %q at %s\n", name, e.Seq, e.Kind, e.ID, e.Key, e.At.Format("15:04:05.000"))
		}
	}
	return b.String()
}
