package integration

import (
	"context"
	"encoding/json"
	"errors"
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

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/reconcile"
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
// reconciler that always says "resend safe") it reports duplicates on the
// mail provider, which has no deduplication.
func TestChaosCheckerCatchesDuplicatesWithoutReconcile(t *testing.T) {
	t.Parallel()
	sum := runChaos(t, chaosConfig{seed: 42, runs: 200, blind: true, scenario: "mail_send"})
	if sum.duplicates == 0 {
		t.Errorf("blind retry: %d duplicates in %d runs, want some (lost %d, untruthful %d)", sum.duplicates, sum.runs, sum.lost, sum.untruthful)
	}
	t.Logf("blind retry: %d runs, %d duplicates, %d lost, %d untruthful", sum.runs, sum.duplicates, sum.lost, sum.untruthful)
}

// The checker is not blind to a resend by an owner that lost its claim:
// with a ledger whose Extend always succeeds (as if the executor resent
// without renewing), the takeovers in the middle of a reconciliation make
// duplicates on the mail provider, which has no deduplication.
func TestChaosCheckerCatchesResendAfterTakeover(t *testing.T) {
	t.Parallel()
	sum := runChaos(t, chaosConfig{seed: 43, runs: 100, extendLies: true, takeoverRate: 1, scenario: "mail_send"})
	if sum.duplicates == 0 {
		t.Errorf("resend after a takeover: %d duplicates in %d runs, want some (lost %d, untruthful %d)", sum.duplicates, sum.runs, sum.lost, sum.untruthful)
	}
	t.Logf("resend after a takeover: %d runs, %d duplicates, %d lost, %d untruthful", sum.runs, sum.duplicates, sum.lost, sum.untruthful)
}

// The checker is not blind to an action never performed although nothing
// was done: without the resumed delivery after the uncertainty bound, the
// mail actions whose first request never committed stay unperformed.
func TestChaosCheckerCatchesUnperformedActions(t *testing.T) {
	t.Parallel()
	sum := runChaos(t, chaosConfig{seed: 44, runs: 200, noResume: true, scenario: "mail_send"})
	if sum.lost == 0 {
		t.Errorf("no resume: %d lost in %d runs, want some (duplicates %d, untruthful %d)", sum.lost, sum.runs, sum.duplicates, sum.untruthful)
	}
	t.Logf("no resume: %d runs, %d duplicates, %d lost, %d untruthful", sum.runs, sum.duplicates, sum.lost, sum.untruthful)
}

type chaosConfig struct {
	seed  int64
	runs  int
	blind bool
	// extendLies makes every process's ledger report a lease renewal as
	// done without doing it: an executor that resends without a renewal.
	extendLies bool
	// takeoverRate is the share of actions whose reconciliation is
	// overtaken by another process (0: the default share).
	takeoverRate float64
	// scenario, when set, is the only scenario the runs act on.
	scenario string
	// noResume skips the resumed delivery after the uncertainty bound.
	noResume bool
	pgSchema string // the workers' PostgreSQL ledger (set by runChaos)
}

// Shape of the chaos.
const (
	chaosWorkers   = 16
	faultRate      = 0.12
	sqliteShare    = 0.15 // of runs on SQLite; the rest on memory
	redisShare     = 0.15 // of runs on Redis
	postgresShare  = 0.15 // of runs on PostgreSQL
	maxActions     = 3
	maxResumes     = 4
	maxModelRounds = 3
	executorWait   = 2 * time.Second
	// Shares of the actions that meet the classes of failure below.
	caseVariantRate = 0.05 // the model first sends case-variant keys
	takeoverRate    = 0.1  // another process takes over mid-reconciliation
	extendFailRate  = 0.1  // the first processes' lease renewals fail
	longToolRate    = 0.02 // the tool outlives the record's retention
	// retention is the executors' Retention, on the fake clock: above
	// anything a run advances its clock by.
	retention = time.Hour
	// A long tool's process claims with a short lease and retention, so
	// that its heartbeat — real timers, every half lease — keeps up with
	// the clock the tool advances in steps of half a lease: the tool takes
	// about the record's retention (at least a lease and a second) in real
	// time.
	longLease, longRetention = 200 * time.Millisecond, time.Second
	// uncertainBound is the longest an action stays uncertain with the
	// default reconcile configuration (see docs/concepts.md): from the record's
	// lease end or settlement, InFlight plus the lookup's index lag.
	uncertainBound = lease + reconcile.DefaultInFlight + indexLagBound + time.Second
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
	clock  *clock.Fake
	mem    ledger.Store
	sqlite ledger.Store
	redis  ledger.Store
	pg     ledger.Store
	tools  []client.Tool
}

func newWorker(t *testing.T, cfg chaosConfig, id int) *worker {
	w := &worker{id: id, clock: clock.NewFake(time.Now().Truncate(time.Second))}
	w.kit = newKit(t, kitOptions{seed: cfg.seed + int64(id), clock: w.clock, blind: cfg.blind})
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
	return w
}

// faults turns the random faults of the worker's fakes on or off.
func (w *worker) faults(on bool) {
	for _, name := range providerNames {
		if f := w.kit.server(name).faults; on {
			f.SetRandomRules(faultRate, faultTemplates...)
		} else {
			f.Clear()
		}
	}
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
	cfg     chaosConfig
	w       *worker
	i       int
	runID   string
	rng     *rand.Rand
	store   ledger.Store
	backend string
	actions []*chaosAction
	mu      sync.Mutex // guards log and the actions' results while processes run
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
	// caseVariant: the model first sends the input with an identity field
	// repeated under a case-variant name and another value.
	caseVariant bool
	// takeover: the first reconciliation of the action advances the clock
	// past the owner's lease and another process delivers the call.
	takeover, tookOver bool
	// extendFails: the first delivery's processes cannot renew a lease.
	extendFails bool
	// long: the first run of the tool outlives the record's retention,
	// renewing its lease, and the call is delivered again meanwhile.
	long, ranLong bool
	// outlived is the record right after a long action: a later delivery
	// may find its retention over, which makes it a new action.
	outlived *ledger.Record
	results  []client.Result
	variant  int
}

func (r *chaosRun) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, fmt.Sprintf(format, args...))
}

func (w *worker) run(cfg chaosConfig, i int) *chaosRun {
	r := &chaosRun{cfg: cfg, w: w, i: i, runID: fmt.Sprintf("chaos-%d-%d", cfg.seed, i),
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
	w.faults(true)
	for _, name := range providerNames {
		s := w.kit.server(name)
		r.journalFrom[name] = len(s.journal())
		r.faultFrom[name] = len(s.faults.Log())
	}
	takeovers := takeoverRate
	if cfg.takeoverRate > 0 {
		takeovers = cfg.takeoverRate
	}
	ctx := context.Background()
	for j := range 1 + r.rng.IntN(maxActions) {
		a := &chaosAction{s: &scenarios[r.rng.IntN(len(scenarios))], n: i*10 + j}
		if cfg.scenario != "" {
			a.s = scenarioByName(cfg.scenario)
		}
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
		a.caseVariant = r.rng.Float64() < caseVariantRate
		a.takeover = r.rng.Float64() < takeovers
		a.extendFails = r.rng.Float64() < extendFailRate
		if r.rng.Float64() < longToolRate {
			// One delivery, no fault: once the record has outlived its
			// retention, any later delivery is a new action.
			a.long, a.crash, a.double, a.recall, a.disobey, a.takeover, a.extendFails = true, noCrash, false, false, false, false, false
		}
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
		r.logf("action %d: %s n=%d key=%.12s crash=%s resumes=%d double=%v recall=%v disobey=%v case-variant=%v takeover=%v extend-fails=%v long=%v",
			j, a.s.name, a.n, a.key, crashNames[a.crash], a.resumes, a.double, a.recall, a.disobey,
			a.caseVariant, a.takeover, a.extendFails, a.long)
		if a.caseVariant {
			r.deliverCaseVariant(a)
		}
		if a.long {
			w.faults(false)
		}
		r.perform(a, call)
		if a.long {
			w.faults(true)
			r.keepOutlived(a)
		}
	}
	r.resume()
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

// deliverCaseVariant delivers a's input with its first identity field
// repeated under an upper-case name and another value: two readers could
// read it differently, so it must be refused, with no record and (checked
// at the end) no effect.
func (r *chaosRun) deliverCaseVariant(a *chaosAction) {
	call := a.call(r, "variant")
	field := r.w.kit.tools[a.s.name].Identity[0].Path
	var in map[string]any
	if err := json.Unmarshal(call.Input, &in); err != nil {
		panic(err)
	}
	in[strings.ToUpper(field)] = 1000 + a.n
	var err error
	if call.Input, err = json.Marshal(in); err != nil {
		panic(err)
	}
	d := r.execute(call, process{})
	r.logf("  %s (%s): %s", call.ID, call.Input, d)
	if d.res.Outcome != client.InvalidInput {
		r.problem(&r.untruthful, "case-variant keys %s: %s, want invalid input", call.Input, d.res.Outcome)
	}
	if rec, err := r.store.Get(context.Background(), a.key); !errors.Is(err, ledger.ErrNotFound) {
		r.problem(&r.untruthful, "case-variant keys %s left a record: %+v (%v)", call.Input, rec, err)
	}
}

// keepOutlived keeps the record of a long action as it stands after its
// delivery, before its retention runs out.
func (r *chaosRun) keepOutlived(a *chaosAction) {
	rec, err := r.store.Get(context.Background(), a.key)
	if err != nil {
		r.problem(&r.lost, "long action: no record after its delivery: %v", err)
		return
	}
	a.outlived = rec
}

// perform delivers an action the way the plan says, then lets the model
// react to what it was told.
func (r *chaosRun) perform(a *chaosAction, call client.Call) {
	first := process{a: a, extendFails: a.extendFails, long: a.long}
	var seen []client.Result
	switch {
	case a.crash == crashBeforeClaim:
		r.logf("  the process died before it delivered the call")
	case a.crash != noCrash:
		first.crash = a.crash
		d := r.execute(call, first)
		switch {
		case !d.returned:
			r.logf("  %s: the process died %s", call.ID, crashNames[a.crash])
		case a.crash == crashAfterRecord:
			r.addResult(a, d.res) // checked, though the model never saw it
			r.logf("  %s: %s; the process died before the model saw it", call.ID, d)
		default:
			seen = r.record(a, call, d)
		}
	case a.double:
		seen = r.concurrently(a, call, 2, first)
	default:
		seen = r.record(a, call, r.execute(call, first))
	}
	if a.crash != noCrash {
		// Whatever died, its lease runs out; the run resumes from its
		// checkpoint and delivers the same call again, maybe from several
		// processes at once.
		r.w.clock.Advance(lease + time.Second)
		seen = r.concurrently(a, call, a.resumes, process{a: a})
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
		seen = r.record(a, next, r.execute(next, process{a: a}))
	}
}

// resume is the run resumed once every action is past the uncertainty
// bound, with the providers healthy: a reconcile job sweeps, then the agent
// delivers every call again from its checkpoint. Every action must then be
// done exactly once, or refused by the provider.
func (r *chaosRun) resume() {
	if r.cfg.noResume {
		return
	}
	r.w.faults(false)
	defer r.w.faults(true)
	r.w.clock.Advance(uncertainBound)
	r.sweep()
	for _, a := range r.actions {
		if a.long {
			continue // its retention is over: a delivery would be a new action
		}
		call := a.call(r, "resumed")
		r.record(a, call, r.execute(call, process{}))
	}
}

// sweep runs a sweeper over the run's records, as a reconcile job would.
func (r *chaosRun) sweep() {
	sweeper := reconcile.NewSweeper(r.store, r.w.tools, &reconcile.SweeperConfig{Clock: r.w.clock, RunID: r.runID})
	rep, err := sweeper.Sweep(context.Background())
	r.logf("sweep: %+v (error: %v)", rep, err)
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

func (r *chaosRun) addResult(a *chaosAction, res client.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a.results = append(a.results, res)
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
		r.addResult(a, d.res)
		seen = append(seen, d.res)
	}
	return seen
}

// process is how one process that delivers a call behaves.
type process struct {
	a     *chaosAction // the action delivered, for its hooks (nil: none)
	crash crashPoint
	// extendFails: the process's lease renewals fail (ledger unavailable).
	extendFails bool
	// wait is the executor's Wait (0: executorWait).
	wait time.Duration
	// long: the process runs a long tool (longLease, longRetention).
	long bool
}

// execute runs call in a new process (an executor of its own over the
// run's ledger) that behaves as p says.
func (r *chaosRun) execute(call client.Call, p process) delivery {
	store := r.store
	switch {
	case r.cfg.extendLies:
		store = extendLies{store}
	case p.extendFails:
		store = extendFails{store}
	}
	wait := executorWait
	if p.wait != 0 {
		wait = p.wait
	}
	cfg := &client.Config{Clock: r.w.clock, Liveness: lease, Wait: wait, Retention: retention}
	if p.long {
		cfg.Liveness, cfg.Retention = longLease, longRetention
	}
	exec := client.New(store, cfg)
	for _, tool := range r.w.tools {
		run := tool.Run
		tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			if p.crash == crashAfterClaim {
				runtime.Goexit()
			}
			if p.a != nil && p.a.long && r.once(&p.a.ranLong) {
				r.outliveRetention(ctx, p.a, inv)
			}
			eff, err := run(ctx, inv)
			if p.crash == crashAfterEffect {
				runtime.Goexit()
			}
			return eff, err
		}
		if rec := tool.Reconciler; rec != nil && p.a != nil && p.a.takeover {
			tool.Reconciler = client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
				if r.once(&p.a.tookOver) {
					r.takeOver(p.a, call)
				}
				return rec.Reconcile(ctx, inv)
			})
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

// once sets *flag and reports whether it was unset.
func (r *chaosRun) once(flag *bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	was := *flag
	*flag = true
	return !was
}

// takeOver is called by a process that owns a's record as it begins to
// reconcile: its lease runs out (and the uncertainty bound passes), and
// another process delivers the call and takes the record over. The owner
// then reconciles, and must not resend: its renewal answers ErrNotOwner.
func (r *chaosRun) takeOver(a *chaosAction, call client.Call) {
	r.w.clock.Advance(uncertainBound)
	r.logf("  the owner's lease ran out while it reconciled; another process delivers the call")
	r.record(a, call, r.execute(call, process{}))
}

// outliveRetention is a long run of a's tool: it advances the clock past
// the record's retention in steps of half a lease, each time waiting for
// the executor's heartbeat to renew the lease, then the call is delivered
// again from another process. That delivery must not run the tool: the
// record is pending under a live lease.
func (r *chaosRun) outliveRetention(ctx context.Context, a *chaosAction, inv client.Invocation) {
	rec, err := r.store.Get(ctx, inv.Key)
	if err != nil {
		r.problem(&r.lost, "long tool: no record while it runs: %v", err)
		return
	}
	guard := time.Now().Add(hangGuard)
	for !r.w.clock.Now().After(rec.ExpiresAt) {
		r.w.clock.Advance(longLease / 2)
		for {
			cur, err := r.store.Get(ctx, inv.Key)
			if err == nil && cur.LeaseUntil.After(r.w.clock.Now().Add(longLease/2)) {
				break // renewed since the step
			}
			if ctx.Err() != nil {
				// The fence ended the run first (a renewal the executor
				// could not confirm in time): nothing is sent.
				r.logf("  the tool's run ended: %v", context.Cause(ctx))
				return
			}
			if time.Now().After(guard) {
				r.problem(&r.lost, "long tool: the heartbeat did not renew the lease (%v)", err)
				return
			}
			time.Sleep(time.Millisecond) // poll for the heartbeat's write
		}
	}
	r.logf("  the tool ran past the record's retention (%s)", rec.ExpiresAt.Format(time.RFC3339Nano))
	again := a.call(r, "mid-tool")
	d := r.execute(again, process{wait: -1})
	r.record(a, again, d)
	if d.res.Outcome != client.InProgress {
		r.problem(&r.duplicates, "long tool: a delivery while it ran: %s, want in progress", d.res.Outcome)
	}
}

// extendFails is a ledger whose lease renewals fail as if it were
// unreachable.
type extendFails struct{ ledger.Store }

func (s extendFails) Extend(context.Context, string, string, time.Time) error {
	return fmt.Errorf("chaos: renewals fail: %w", ledger.ErrUnavailable)
}

// extendLies is a ledger that reports every lease renewal as done and
// does nothing: a stand-in for an executor that resends unfenced.
type extendLies struct{ ledger.Store }

func (s extendLies) Extend(context.Context, string, string, time.Time) error { return nil }

// concurrently delivers call from n processes at once.
func (r *chaosRun) concurrently(a *chaosAction, call client.Call, n int, p process) []client.Result {
	ds := make([]delivery, n)
	var wg, start sync.WaitGroup
	start.Add(1)
	for i := range ds {
		wg.Go(func() {
			start.Wait()
			ds[i] = r.execute(call, p)
		})
	}
	start.Done()
	wg.Wait()
	return r.record(a, call, ds...)
}

func (r *chaosRun) problem(counter *int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	*counter++
	r.problems = append(r.problems, msg)
	r.mu.Unlock()
	r.logf("PROBLEM: %s", msg)
}

// finish checks the run: the providers' journals against the intended
// actions, the ledger, and every result. After the resumed deliveries
// every action must have exactly one effect and a done record, unless the
// provider refused it definitively (a failed record, the model told not to
// retry, no effect); an action never performed although nothing was done
// is lost. Without the resumed deliveries (noResume), the run's clock
// passes the leases and a sweep settles what it can first.
func (r *chaosRun) finish() {
	ctx := context.Background()
	if r.cfg.noResume {
		r.w.clock.Advance(lease + time.Second)
		r.sweep()
	}
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
		if a.outlived != nil {
			rec, err = a.outlived, nil // kept before its retention ran out
		}
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
		var last client.Result
		if len(a.results) > 0 {
			last = a.results[len(a.results)-1]
		}
		refused := err == nil && rec.State == ledger.StateFailed && last.Outcome == client.Failed && !last.Retryable
		switch {
		case err != nil:
			r.problem(&r.lost, "action %d (%s): no record at the end: %v", j, a.s.name, err)
		case rec.State == ledger.StateDone && !ids[rec.Ref]:
			r.problem(&r.untruthful, "action %d (%s): recorded done with ref %q, but the provider has %d effects", j, a.s.name, rec.Ref, len(effs))
		case rec.State == ledger.StateFailed && len(effs) > 0:
			r.problem(&r.untruthful, "action %d (%s): recorded failed (%s), but the provider has the effect", j, a.s.name, rec.Reason)
		case len(effs) == 0 && !refused:
			r.problem(&r.lost, "action %d (%s): never performed although nothing was done: record %s (%s)", j, a.s.name, rec.State, rec.Reason)
		case rec.State == ledger.StatePending:
			r.problem(&r.lost, "action %d (%s): still pending at the end", j, a.s.name)
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
