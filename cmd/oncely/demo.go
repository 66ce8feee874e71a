package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// Timing of the demo. The ledgers, reconcilers and fakes read one fake
// clock per worker; only a provider request's timeout is real.
const (
	// workloadTimeout bounds one provider request while faults are on; a
	// Delay fault holds a request until then, and then commits it.
	workloadTimeout = time.Second
	// recoveryTimeout bounds one request once the outage is over.
	recoveryTimeout = 30 * time.Second
	// indexLag is the fakes' search lag (fake time); the adapters are
	// told a bound above it.
	indexLag, indexLagBound = 2 * time.Second, 4 * time.Second
	// demoLease is the executors' lease (fake time).
	demoLease = 5 * time.Minute
	// demoWorkers run the runs in parallel, each on its own fakes, fake
	// clock and ledger connection.
	demoWorkers = 8

	maxActions     = 3
	maxResumes     = 3
	maxModelRounds = 3
	recoveryRounds = 5
)

// demoFaults is every fault the fakes inject, drawn at random per request.
var demoFaults = []fault.Rule{
	{Action: fault.FailBeforeCommit, Status: http.StatusInternalServerError},
	{Action: fault.FailBeforeCommit, Status: http.StatusServiceUnavailable},
	{Action: fault.FailBeforeCommit, Status: http.StatusTooManyRequests, RetryAfter: time.Second},
	{Action: fault.DropBeforeCommit},
	{Action: fault.CommitThenDrop},
	{Action: fault.CommitThenError},
	{Action: fault.CommitThenError, Status: http.StatusBadGateway, SaveError: true},
	{Action: fault.Delay}, // until the client gives up, then commit: a timeout after success
}

// Where a process dies while it handles a call.
type crashPoint int

const (
	noCrash          crashPoint = iota
	crashBeforeCall             // before the call reached the tool
	crashAfterClaim             // claimed, before the provider call
	crashAfterEffect            // after the provider call, before the record
	crashAfterRecord            // recorded, the result never reached the model
)

// action is one action an agent run means to perform, and how it is
// repeated. Both sides play the same actions.
type action struct {
	sc      *scenario
	run     string
	id      string // run/index: tags the naive side's effects
	n       int    // numbers the action's objects
	pi      string // the PaymentIntent a refund refunds (per side)
	crash   crashPoint
	resumes int  // processes resuming after the crash
	double  bool // approved twice at once
	recall  bool // the model calls again after success, rephrased, types drifted
	disobey bool // the model retries although told not to
	variant int
}

// plan draws the runs of a seed: the same on both sides.
func plan(seed int64, runs int) [][]*action {
	out := make([][]*action, runs)
	for i := range out {
		rng := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
		run := fmt.Sprintf("demo-%d-%d", seed, i)
		for j := range 1 + rng.IntN(maxActions) {
			a := &action{sc: scenarios[rng.IntN(len(scenarios))], run: run, id: fmt.Sprintf("%s/%d", run, j), n: i*10 + j}
			switch x := rng.Float64(); {
			case x < 0.5:
			case x < 0.6:
				a.crash = crashBeforeCall
			case x < 0.75:
				a.crash = crashAfterClaim
			case x < 0.9:
				a.crash = crashAfterEffect
			default:
				a.crash = crashAfterRecord
			}
			a.resumes = 1 + rng.IntN(maxResumes)
			a.double = rng.Float64() < 0.2
			a.recall = rng.Float64() < 0.4
			a.disobey = rng.Float64() < 0.2
			out[i] = append(out[i], a)
		}
	}
	return out
}

var texts = []string{"Processing this as requested.", "Sure — taking care of it now!", "As discussed, doing it.", "Retrying the same thing."}

// call is the model's next call of a: rephrased text, and after the first
// call, identity values with drifted JSON types.
func (a *action) call() client.Call {
	a.variant++
	return client.Call{Tool: a.sc.tool, Input: a.sc.input(a.n, a.pi, texts[a.variant%len(texts)], a.variant > 1),
		ID: fmt.Sprintf("toolu_%d", a.variant)}
}

// tally is one side's counts for one scenario.
type tally struct {
	Intended   int `json:"intended"`
	Effects    int `json:"effects"`
	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	// Refused counts the requests the fakes refused as invalid (naive),
	// or the calls failed for good (oncely): a defect of the workload.
	Refused    int `json:"refused"`
	Replays    int `json:"replays"`
	Reconciled int `json:"reconciliations"`
	Uncertain  int `json:"uncertain_left"`
}

func (t *tally) add(o tally) {
	t.Intended += o.Intended
	t.Effects += o.Effects
	t.Duplicates += o.Duplicates
	t.Lost += o.Lost
	t.Refused += o.Refused
	t.Replays += o.Replays
	t.Reconciled += o.Reconciled
	t.Uncertain += o.Uncertain
}

// worker plays a share of the runs on its own fakes and clock.
type worker struct {
	clock   *clock.Fake // the worker's clock: it moves only when told
	conns   *connTracker
	fakes   *fakeSet
	rate    float64
	seed    int64
	tallies map[*scenario]*tally
	// refusal is the first refusal per scenario, to name it.
	refusal map[*scenario]string
	mu      sync.Mutex
}

// demoBackdate is how long before now the simulated clocks start: a run
// moves them ahead by about an hour per 40 runs, and a ledger the demo
// filled (--dir) then holds records of the last hours, as the console's
// overview shows them, rather than of the hours to come.
const demoBackdate = 12 * time.Hour

func newWorker(seed int64, rate float64) (*worker, error) {
	w := &worker{clock: clock.NewFake(time.Now().Add(-demoBackdate).Truncate(time.Millisecond)), conns: newConnTracker(), rate: rate,
		tallies: map[*scenario]*tally{}, refusal: map[*scenario]string{}}
	set, err := startFakes(fakeConfig{seed: seed, clock: w.clock, indexLag: indexLag, conns: w.conns})
	if err != nil {
		return nil, err
	}
	w.fakes = set
	for _, sc := range scenarios {
		w.tallies[sc] = &tally{}
	}
	return w, nil
}

func (w *worker) count(sc *scenario, f func(t *tally)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(w.tallies[sc])
}

// refused counts a refusal and keeps the first of sc.
func (w *worker) refused(sc *scenario, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tallies[sc].Refused++
	if w.refusal[sc] == "" {
		w.refusal[sc] = err.Error()
	}
}

// setFaults turns the random faults on or off on every fake.
func (w *worker) setFaults(on bool) {
	for _, fs := range w.fakes.servers {
		fs.faults.Clear()
		if on && w.rate > 0 {
			fs.faults.SetRandomRules(w.rate, demoFaults...)
		}
	}
}

// prepare readies the actions for a side: the model's calls start over,
// and the PaymentIntents the refunds refund are created before the
// faults start (the setup is not part of the workload).
func (w *worker) prepare(ctx context.Context, runs [][]*action) error {
	st := stripe.New(w.fakes.servers["stripe"].url, &stripe.Config{APIKey: demoStripeKey,
		HTTP: providers.Config{HTTPClient: w.conns.client(), Timeout: recoveryTimeout}})
	for _, acts := range runs {
		for _, a := range acts {
			a.variant = 0
			if a.sc.label != "stripe refunds" {
				continue
			}
			pi, err := st.PaymentIntents.Create(ctx, setupPrefix+a.id, stripe.PaymentIntentParams{
				Amount: 100_000, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
			})
			if err != nil {
				return fmt.Errorf("demo setup: %w", err)
			}
			a.pi = pi.ID
		}
	}
	return nil
}

// setupPrefix marks the keys of the setup's objects; no action explains
// them.
const setupPrefix = "setup-"

// sleep is the reconcilers' pause: it lets every request already sent
// finish at the fakes (a delayed one commits when its client gives up),
// then moves the clock. However slow the machine, a lookup after it sees
// every effect of an earlier request.
func (w *worker) sleep(ctx context.Context, d time.Duration) error {
	if err := w.conns.quiet(ctx); err != nil {
		return err
	}
	w.clock.Advance(d)
	return nil
}

// ---- naive side ----

func (w *worker) playNaive(ctx context.Context, runs [][]*action, progress func()) {
	nc := newNaiveClient(w.fakes, w.conns, workloadTimeout)
	// send makes one tool call: a request, retried by the client.
	send := func(a *action, call client.Call) bool {
		args, err := parseArgs(call.Input)
		if err == nil {
			err = a.sc.naive(ctx, nc.on(a.sc.fake), args, a.id)
		}
		if r := (*refusal)(nil); errors.As(err, &r) {
			w.refused(a.sc, r)
		}
		return err == nil
	}
	exec := func(a *action) bool { return send(a, a.call()) }
	// parallel delivers the same call from n processes at once.
	parallel := func(a *action, n int) bool {
		call := a.call()
		oks := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { oks[i] = send(a, call) })
		}
		wg.Wait()
		return slices.Contains(oks, true)
	}
	done := map[*action]bool{}
	w.setFaults(true)
	for _, acts := range runs {
		for _, a := range acts {
			ok := false
			switch {
			case a.crash == crashBeforeCall || a.crash == crashAfterClaim:
				// Died before the request left.
			case a.crash != noCrash:
				exec(a) // the request went out; the process died before the model saw the answer
			case a.double:
				ok = parallel(a, 2)
			default:
				ok = exec(a)
			}
			if a.crash != noCrash {
				// Resumed from the checkpoint before the call: the call again.
				ok = parallel(a, a.resumes)
			}
			// The model retries a failure, and may call again after a
			// success, rephrased.
			recalled := false
			for range maxModelRounds {
				if ok {
					if !a.recall || recalled {
						break
					}
					recalled = true
				}
				ok = exec(a) || ok
			}
			done[a] = ok
		}
		progress()
	}
	// The outage ends; the agent retries what it believes failed.
	w.setFaults(false)
	for _, acts := range runs {
		for _, a := range acts {
			for range recoveryRounds {
				if done[a] {
					break
				}
				done[a] = exec(a)
			}
		}
	}
	w.countNaive(runs)
}

func (w *worker) countNaive(runs [][]*action) {
	by := map[string]int{}
	for _, fs := range w.fakes.servers {
		for _, e := range fs.handler.Journal() {
			id := e.Params["metadata."+metaAction] + e.Params["fields."+metaAction] + actionFromTag(e.Params["tag."+metaAction])
			if l, ok := strings.CutPrefix(e.Params["labels"], metaAction+"="); ok { // a GitHub issue's label
				id += l
			}
			if id != "" {
				by[id]++
			}
		}
	}
	for _, acts := range runs {
		for _, a := range acts {
			n := by[a.id]
			w.count(a.sc, func(t *tally) {
				t.Intended++
				t.Effects += n
				t.Duplicates += max(n-1, 0)
				if n == 0 {
					t.Lost++
				}
			})
		}
	}
}

// ---- oncely side ----

// countingPolicy counts the reconciliations of one scenario.
type countingPolicy struct {
	*reconcile.Policy
	n *atomic.Int64
}

func (p countingPolicy) Reconcile(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
	p.n.Add(1)
	return p.Policy.Reconcile(ctx, inv)
}

func (p countingPolicy) ReconcileByLookup(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
	p.n.Add(1)
	return p.Policy.ReconcileByLookup(ctx, inv)
}

// oncelySide is a worker's oncely setup.
type oncelySide struct {
	w          *worker
	store      ledger.Store
	tools      []client.Tool // during the outage
	recovery   []client.Tool // after it
	reconciled map[*scenario]*atomic.Int64
	keys       map[*action]string
	mu         sync.Mutex
}

func (w *worker) newOncelySide(store ledger.Store) *oncelySide {
	s := &oncelySide{w: w, store: store, reconciled: map[*scenario]*atomic.Int64{}, keys: map[*action]string{}}
	for _, sc := range scenarios {
		s.reconciled[sc] = new(atomic.Int64)
	}
	pcfg := &reconcile.Config{
		Clock: w.clock, Sleep: w.sleep, InFlight: 2 * time.Second, MaxWait: 20 * time.Second,
		InitialInterval: 250 * time.Millisecond, MaxInterval: 4 * time.Second,
	}
	build := func(timeout time.Duration) []client.Tool {
		k := newKit(w.fakes, w.conns, w.clock, timeout)
		var tools []client.Tool
		for _, sc := range scenarios {
			tools = append(tools, client.Tool{
				Name: sc.tool, Identity: sc.identity, Validated: sc.validate,
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					a, err := parseArgs(inv.Input)
					if err != nil {
						return client.Effect{}, err
					}
					return sc.act(ctx, k, a, inv.DownstreamKey)
				},
				Reconciler: countingPolicy{reconcile.New(sc.adapter(k), pcfg), s.reconciled[sc]},
			})
		}
		return tools
	}
	s.tools, s.recovery = build(workloadTimeout), build(recoveryTimeout)
	return s
}

// delivery is the end of one process's handling of a call.
type delivery struct {
	res      client.Result
	returned bool // false: the process died first
}

// execute runs call in a new process (its own executor over the ledger)
// that dies at crash.
func (s *oncelySide) execute(tools []client.Tool, a *action, call client.Call, crash crashPoint) delivery {
	exec := client.New(s.store, &client.Config{Clock: s.w.clock, Liveness: demoLease})
	for _, t := range tools {
		run := t.Run
		t.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			if crash == crashAfterClaim {
				runtime.Goexit()
			}
			eff, err := run(ctx, inv)
			if crash == crashAfterEffect {
				runtime.Goexit()
			}
			return eff, err
		}
		_ = exec.Register(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // a dead process's heartbeat dies with it
	var d delivery
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.res, _ = exec.Execute(ctx, a.run, call)
		d.returned = crash != crashAfterRecord
	}()
	<-done
	if d.returned {
		// A process that lives on writes its counts within a minute; this
		// one ends here, and writes them as it exits.
		_ = exec.FlushCounters(context.Background())
	}
	switch {
	case !d.returned:
	case d.res.Outcome == client.AlreadyDone:
		s.w.count(a.sc, func(t *tally) { t.Replays++ })
	case d.res.Outcome == client.Failed && !d.res.Retryable:
		s.w.refused(a.sc, fmt.Errorf("%s refused: %s", a.sc.tool, d.res.Text))
	}
	return d
}

func (s *oncelySide) concurrently(a *action, call client.Call, n int) []client.Result {
	ds := make([]delivery, n)
	var wg sync.WaitGroup
	for i := range ds {
		wg.Go(func() { ds[i] = s.execute(s.tools, a, call, noCrash) })
	}
	wg.Wait()
	var seen []client.Result
	for _, d := range ds {
		if d.returned {
			seen = append(seen, d.res)
		}
	}
	return seen
}

// perform delivers an action the way its plan says, then lets the model
// react to what it was told.
func (s *oncelySide) perform(a *action) {
	call := a.call()
	if tool := toolNamed(s.tools, a.sc.tool); tool != nil {
		if key, err := tool.Key(a.run, call, 0); err == nil {
			s.mu.Lock()
			s.keys[a] = key
			s.mu.Unlock()
		}
	}
	var seen []client.Result
	switch {
	case a.crash == crashBeforeCall:
	case a.crash != noCrash:
		if d := s.execute(s.tools, a, call, a.crash); d.returned {
			seen = []client.Result{d.res}
		}
	case a.double:
		seen = s.concurrently(a, call, 2)
	default:
		seen = []client.Result{s.execute(s.tools, a, call, noCrash).res}
	}
	if a.crash != noCrash {
		// The dead process's lease runs out; the run resumes from its
		// checkpoint, maybe in several processes at once.
		s.w.clock.Advance(demoLease + time.Second)
		seen = s.concurrently(a, call, a.resumes)
	}
	recalled, disobeyed := false, false
	for range maxModelRounds {
		if len(seen) == 0 {
			return
		}
		switch last := seen[0]; {
		case last.Outcome == client.Failed && last.Retryable:
		case (last.Outcome == client.Executed || last.Outcome == client.AlreadyDone) && a.recall && !recalled:
			recalled = true
		case (last.Outcome == client.Uncertain || last.Outcome == client.InProgress) && a.disobey && !disobeyed:
			disobeyed = true
		default:
			return
		}
		seen = []client.Result{s.execute(s.tools, a, a.call(), noCrash).res}
	}
}

func toolNamed(tools []client.Tool, name string) *client.Tool {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}

// recover settles a run once the outage is over, as a reconcile job and
// the agent would: sweep what is stuck, after the leases ran out; then
// call again every action that is not done. A record left uncertain by a
// sweep is looked at again after the documented bound (the clock moves
// past the lease, the in-flight time and the index lag).
func (s *oncelySide) recover(ctx context.Context, acts []*action) {
	for range recoveryRounds {
		var open []*action
		for _, a := range acts {
			if rec, err := s.store.Get(ctx, s.keys[a]); err != nil || rec.State != ledger.StateDone {
				open = append(open, a)
			}
		}
		if len(open) == 0 {
			return
		}
		s.w.clock.Advance(demoLease + time.Second)
		sw := reconcile.NewSweeper(s.store, s.recovery, &reconcile.SweeperConfig{Clock: s.w.clock, RunID: acts[0].run, Lease: demoLease})
		_, _ = sw.Sweep(ctx)
		for _, a := range open {
			if rec, err := s.store.Get(ctx, s.keys[a]); err == nil && rec.State == ledger.StateDone {
				continue
			}
			s.execute(s.recovery, a, a.call(), noCrash)
		}
	}
}

func (w *worker) playOncely(ctx context.Context, store ledger.Store, runs [][]*action, progress func()) {
	s := w.newOncelySide(store)
	w.setFaults(true)
	for _, acts := range runs {
		for _, a := range acts {
			s.perform(a)
		}
		progress()
	}
	w.setFaults(false)
	for _, acts := range runs {
		s.recover(ctx, acts)
	}
	w.countOncely(ctx, s, runs)
}

func (w *worker) countOncely(ctx context.Context, s *oncelySide, runs [][]*action) {
	explained := map[string]bool{}
	for _, acts := range runs {
		for _, a := range acts {
			key := s.keys[a]
			n := 0
			for _, e := range w.fakes.servers[a.sc.fake].handler.Journal() {
				if isKind(e, a.sc.kinds) && (e.Key == key || strings.HasPrefix(e.Key, key+"-")) {
					n++
					explained[fmt.Sprintf("%s/%d", a.sc.fake, e.Seq)] = true
				}
			}
			uncertain := 0
			if rec, err := s.store.Get(ctx, key); err == nil && rec.State == ledger.StateUncertain {
				uncertain = 1
			}
			w.count(a.sc, func(t *tally) {
				t.Intended++
				t.Effects += n
				t.Duplicates += max(n-1, 0)
				if n == 0 {
					t.Lost++
				}
				t.Uncertain += uncertain
			})
		}
	}
	// An effect no action explains is a duplicate too.
	for _, sc := range scenarios {
		for _, e := range w.fakes.servers[sc.fake].handler.Journal() {
			if isKind(e, sc.kinds) && !strings.HasPrefix(e.Key, setupPrefix) && !explained[fmt.Sprintf("%s/%d", sc.fake, e.Seq)] {
				w.count(sc, func(t *tally) { t.Effects++; t.Duplicates++ })
			}
		}
		w.count(sc, func(t *tally) { t.Reconciled += int(s.reconciled[sc].Load()) })
	}
}

func isKind(e fakes.Effect, kinds []string) bool { return slices.Contains(kinds, e.Kind) }

// ---- the whole demo ----

// demoOptions are the demo's flags.
type demoOptions struct {
	runs   int
	seed   int64
	faults float64
	dir    string
	// open, when set, opens the ledger the oncely side plays on with a
	// worker's clock (tests: a PostgreSQL ledger); otherwise oncely.db in
	// dir.
	open func(ctx context.Context, clk clock.Clock) (ledger.Store, func() error, error)
}

// demoResult is what the demo found.
type demoResult struct {
	Runs    int       `json:"runs"`
	Seed    int64     `json:"seed"`
	Faults  float64   `json:"fault_rate"`
	Ledger  string    `json:"ledger"`
	Seconds float64   `json:"seconds"`
	Rows    []demoRow `json:"providers"`
	Naive   tally     `json:"naive_total"`
	Oncely  tally     `json:"oncely_total"`
	// Refusals names the first refusal per side and provider.
	Refusals []string `json:"refusals,omitempty"`
}

// demoRow is one provider's counts on both sides.
type demoRow struct {
	Provider string `json:"provider"`
	Naive    tally  `json:"naive"`
	Oncely   tally  `json:"oncely"`
}

// runDemo plays the workload on both sides. progress is told when a run
// ends on a side ("naive" or "oncely").
func runDemo(ctx context.Context, o demoOptions, progress func(side string)) (*demoResult, error) {
	start := time.Now()
	runs := plan(o.seed, o.runs)
	workers := min(demoWorkers, o.runs)
	share := func(id int) [][]*action {
		var out [][]*action
		for i := id; i < len(runs); i += workers {
			out = append(out, runs[i])
		}
		return out
	}
	path := filepath.Join(o.dir, "oncely.db")
	res := &demoResult{Runs: o.runs, Seed: o.seed, Faults: o.faults, Ledger: "sqlite://" + path}
	played := map[string][]*worker{} // by side, then worker id
	for _, side := range sides {
		played[side] = make([]*worker, workers)
		var wg sync.WaitGroup
		errs := make([]error, workers)
		for id := range workers {
			wg.Go(func() {
				played[side][id], errs[id] = playSide(ctx, side, o, int64(id), path, share(id), func() { progress(side) })
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	for _, sc := range scenarios {
		row := demoRow{Provider: sc.label}
		for _, side := range sides {
			t := &row.Naive
			if side == "oncely" {
				t = &row.Oncely
			}
			first := ""
			for _, w := range played[side] {
				t.add(*w.tallies[sc])
				if first == "" {
					first = w.refusal[sc]
				}
			}
			if first != "" {
				res.Refusals = append(res.Refusals, fmt.Sprintf("%s %s: %s", side, sc.label, first))
			}
		}
		res.Naive.add(row.Naive)
		res.Oncely.add(row.Oncely)
		res.Rows = append(res.Rows, row)
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// sides are the demo's two sides, in the order they play.
var sides = []string{"naive", "oncely"}

// playSide plays one worker's share on one side and returns the worker,
// with its counts.
func playSide(ctx context.Context, side string, o demoOptions, id int64, path string, runs [][]*action, progress func()) (*worker, error) {
	w, err := newWorker(o.seed*1000+id, o.faults)
	if err != nil {
		return nil, err
	}
	defer w.fakes.close()
	if err := w.prepare(ctx, runs); err != nil {
		return nil, err
	}
	if side == "naive" {
		w.playNaive(ctx, runs, progress)
		return w, nil
	}
	if o.open != nil {
		l, closeL, err := o.open(ctx, w.clock)
		if err != nil {
			return nil, err
		}
		defer closeL()
		w.playOncely(ctx, l, runs, progress)
		return w, nil
	}
	l, err := ledgersqlite.Open(ctx, path, &ledgersqlite.Config{Clock: w.clock})
	if err != nil {
		return nil, err
	}
	defer l.Close()
	w.playOncely(ctx, l, runs, progress)
	return w, nil
}
