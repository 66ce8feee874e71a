package integration

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

var faultPairs = flag.Bool("faultpoints.pairs", false, "TestFaultPoints also fails every pair of points (memory and SQLite)")

// The fault-point enumeration. A scenario is one action of one tool class
// and outcome class, delivered as an agent delivers it: a first call, the
// model calling again, a sweep after the documented bound, a call after
// it. Every operation on that path (each ledger call of every process, each
// provider request and lookup) is a point; a run fails exactly one point
// (or, with -faultpoints.pairs, two) in one way, then redelivers without
// faults until the action settles, and checks the provider's journal
// against everything the model was told.
//
// The provider here is a model in this process (a journal of effects by
// downstream key, deduplicating or not, with a consistent lookup), not an
// HTTP fake: the points are the executor's and the ledger's boundaries,
// which the fakes' own fault rules (TestChaos, TestFailureCases) reach
// through real HTTP.

// faultKind is how a point fails.
type faultKind int

const (
	// fRefuse: refused before it applies (nothing written, nothing sent).
	fRefuse faultKind = iota
	// fLost: applied, and the reply lost (the caller sees ErrUnavailable;
	// a provider request: a timeout after it committed).
	fLost
	// fCrash: applied, then the process dies: it writes and sends nothing
	// more, and its caller is never answered.
	fCrash
	// fDelay: applied, answered only after the lease has run out, while
	// another process redelivers the call.
	fDelay
	// fRepeat: the driver sends the command twice (the first reply lost
	// inside the driver); the caller sees the second reply.
	fRepeat
	// fJumpLease, fJumpInFlight, fJumpRetention: the clock jumps past the
	// lease, the in-flight bound or the retention just before the point.
	fJumpLease
	fJumpInFlight
	fJumpRetention
	numFaultKinds
)

func (k faultKind) String() string {
	return [...]string{"refused", "applied-reply-lost", "applied-then-crash", "delayed-past-lease",
		"repeated-by-driver", "clock-past-lease", "clock-past-inflight", "clock-past-retention"}[k]
}

// The bounds the enumeration uses: the executor's lease and retention and
// the reconciler's in-flight bound.
const (
	fpLease     = 2 * time.Minute
	fpRetention = 24 * time.Hour
	fpInFlight  = 30 * time.Second
)

// toolClass is how the provider recognises a repeat and how an uncertain
// attempt is looked up.
type toolClass int

const (
	// tKeyed: the provider deduplicates by the downstream key and has a
	// lookup (Stripe).
	tKeyed toolClass = iota
	// tSearch: no deduplication; a consistent search by the key (mail).
	tSearch
	// tPlain: no deduplication, no lookup: an operator settles what stays
	// uncertain.
	tPlain
)

func (c toolClass) String() string { return [...]string{"keyed", "search", "plain"}[c] }

// outcomeClass is what the provider does with the action's first request.
type outcomeClass int

const (
	oDone      outcomeClass = iota // succeeds
	oDefinite                      // refuses it (retryable); later requests succeed
	oPermanent                     // refuses every request, permanently
	oAmbiguous                     // commits it, then times out
	oUnmarked                      // commits it, then answers an error nobody classified
)

func (o outcomeClass) String() string {
	return [...]string{"done", "definite-failure", "permanent-failure", "ambiguous", "unmarked-error"}[o]
}

// fpFault is one failed point.
type fpFault struct {
	point int
	kind  faultKind
}

// fpWorld is one scenario run: the shared ledger and clock, the provider's
// journal, and the points counted so far.
type fpWorld struct {
	t      testing.TB
	store  ledger.Store
	clock  *clock.Fake
	run    string
	tool   toolClass
	class  outcomeClass
	faults []fpFault

	mu      sync.Mutex
	points  int      // operations counted so far
	ops     []string // what each point was
	expired int      // effects before the record last expired
	// enumerated is the number of points on the path the faults are
	// applied to (the settling phase after it runs without faults).
	enumerated int
	effects    int             // effects of the action committed
	byKey      map[string]bool // downstream keys committed (what a lookup finds)
	dedup      map[string]bool // downstream keys a keyed provider still replays
	requests   int             // requests that reached the provider
	maybeSent  int             // requests whose outcome their sender could not know
	told       []string        // what the model was told, in order, with the effects then
	problems   []string
	inHook     bool // a delayed point's redelivery is running
	// queue: the action arrives as a queue message (consume), not as a
	// model's call (deliver); acked says the broker deleted it.
	queue bool
	acked bool
}

// point counts one operation and returns the fault to apply to it, if any.
func (w *fpWorld) point(op string) (faultKind, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.points
	w.points++
	w.ops = append(w.ops, op)
	for _, f := range w.faults {
		if f.point == p {
			if f.kind == fCrash || f.kind == fDelay {
				// Others cannot tell a process that died, or whose reply
				// is late past its lease, from one whose request may be
				// taking effect: settling it may need an operator.
				w.maybeSent++
			}
			return f.kind, true
		}
	}
	return 0, false
}

// fpProcess is one agent process: its executor, and whether it was killed.
type fpProcess struct {
	w    *fpWorld
	dead atomic.Bool
	// committed counts the effects its own requests committed.
	committed atomic.Int64
}

var errKilled = errors.New("integration: the process was killed")

// faultStore is a process's view of the ledger: every call is a point.
type faultStore struct {
	ledger.Store
	p *fpProcess
}

// do runs one ledger call through its point.
func do[T any](s *faultStore, op string, call func() (T, error)) (T, error) {
	var zero T
	w := s.p.w
	if s.p.dead.Load() {
		// A dead process does nothing; ErrInvalid ends its retries.
		return zero, fmt.Errorf("%w: %w", ledger.ErrInvalid, errKilled)
	}
	w.clock.Advance(time.Millisecond) // time passes between operations
	kind, faulty := w.point("ledger " + op)
	if !faulty {
		return call()
	}
	unavailable := fmt.Errorf("%w: connection reset by peer (%s, injected)", ledger.ErrUnavailable, kind)
	switch kind {
	case fRefuse:
		return zero, unavailable
	case fLost:
		_, _ = call()
		return zero, unavailable
	case fCrash:
		_, _ = call()
		s.p.dead.Store(true)
		return zero, fmt.Errorf("%w: %w", ledger.ErrInvalid, errKilled)
	case fDelay:
		v, err := call()
		w.clock.Advance(fpLease + time.Second)
		w.redeliverInside()
		return v, err
	case fRepeat:
		_, _ = call()
		return call()
	default:
		w.jump(kind)
	}
	return call()
}

func (s *faultStore) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	return do(s, "claim", func() (ledger.ClaimResult, error) { return s.Store.Claim(ctx, p) })
}

func (s *faultStore) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	_, err := do(s, "complete", func() (struct{}, error) { return struct{}{}, s.Store.Complete(ctx, key, owner, c) })
	return err
}

func (s *faultStore) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	_, err := do(s, "fail", func() (struct{}, error) { return struct{}{}, s.Store.Fail(ctx, key, owner, f) })
	return err
}

func (s *faultStore) Extend(ctx context.Context, key, owner string, lease time.Time) error {
	_, err := do(s, "extend", func() (struct{}, error) { return struct{}{}, s.Store.Extend(ctx, key, owner, lease) })
	return err
}

func (s *faultStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	return do(s, "get", func() (*ledger.Record, error) { return s.Store.Get(ctx, key) })
}

func (s *faultStore) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	return do(s, "list", func() ([]ledger.Record, error) { return s.Store.List(ctx, f) })
}

// commit is the provider's side of one request of p with downstream key
// dk (a deduplicating provider replays a committed key).
func (w *fpWorld) commit(p *fpProcess, dk string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tool == tKeyed && w.dedup[dk] {
		return
	}
	w.byKey[dk], w.dedup[dk] = true, true
	w.effects++
	p.committed.Add(1)
	if w.effects-w.expired > 1 {
		w.problems = append(w.problems, fmt.Sprintf("duplicate: effect %d (downstream key %s)", w.effects-w.expired, dk))
	}
}

// effectCount is the number of effects of the action since its record
// last expired.
func (w *fpWorld) effectCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.effects - w.expired
}

// jump moves the clock as a clock-jump fault says.
func (w *fpWorld) jump(kind faultKind) {
	switch kind {
	case fJumpLease:
		w.clock.Advance(fpLease + time.Second)
	case fJumpInFlight:
		w.clock.Advance(fpInFlight + time.Second)
	case fJumpRetention:
		w.jumpRetention()
	}
}

// jumpRetention moves the clock past the retention. A done or failed
// record then expires, and a repeat of the action is a new action by the
// contract (Config.Retention): its effects are counted afresh. A pending
// or uncertain record never expires, and nothing changes for it.
func (w *fpWorld) jumpRetention() {
	w.clock.Advance(fpRetention + time.Second)
	rec, err := w.store.Get(context.Background(), w.key())
	w.mu.Lock()
	defer w.mu.Unlock()
	clear(w.dedup) // the provider's window (the retention) has passed too
	if errors.Is(err, ledger.ErrNotFound) || err == nil && ledger.Expires(rec.State) {
		w.expired = w.effects
	}
}

// request is one request of the tool's process p to the provider. It
// counts the requests whose outcome the caller could not know.
func (w *fpWorld) request(p *fpProcess, dk string) (client.Effect, error) {
	eff, err := w.send(p, dk)
	if c := errclass.Of(err); err != nil && c != errclass.Definite && c != errclass.Permanent {
		w.mu.Lock()
		w.maybeSent++
		w.mu.Unlock()
	}
	return eff, err
}

// send is the provider's answer to one request, with its fault.
func (w *fpWorld) send(p *fpProcess, dk string) (client.Effect, error) {
	if p.dead.Load() {
		return client.Effect{}, client.Definite(fmt.Errorf("not sent: %w", errKilled))
	}
	w.clock.Advance(time.Millisecond)
	kind, faulty := w.point("provider request")
	w.mu.Lock()
	w.requests++
	first := w.requests == 1
	w.mu.Unlock()
	// What the provider does with the request, faults aside.
	act := func() (client.Effect, error) {
		switch {
		case w.class == oPermanent:
			return client.Effect{}, client.Permanent(errors.New("400 invalid recipient"))
		case w.class == oDefinite && first:
			return client.Effect{}, client.Definite(errors.New("429 too many requests, nothing done"))
		}
		w.commit(p, dk)
		switch {
		case w.class == oAmbiguous && first:
			return client.Effect{}, client.Ambiguous(errors.New("timeout after the request was sent"))
		case w.class == oUnmarked && first:
			return client.Effect{}, errors.New("unreadable answer after the provider committed")
		}
		return client.Effect{Summary: "sent " + dk[:8], Ref: "ref_" + dk[:8]}, nil
	}
	if !faulty {
		return act()
	}
	switch kind {
	case fRefuse:
		return client.Effect{}, client.Definite(fmt.Errorf("dial tcp: connection refused (%s, injected)", kind))
	case fLost:
		_, _ = act()
		return client.Effect{}, client.Ambiguous(fmt.Errorf("timeout after the request was sent (%s, injected)", kind))
	case fCrash:
		_, _ = act()
		p.dead.Store(true)
		return client.Effect{}, client.Ambiguous(errKilled)
	case fDelay:
		// The request commits only after the lease has ended and another
		// process has redelivered the call.
		w.clock.Advance(fpLease + time.Second)
		w.redeliverInside()
		return act()
	case fRepeat:
		if w.tool == tKeyed { // only a request with a key is repeated by the transport
			_, _ = act()
		}
		return act()
	default:
		w.jump(kind)
	}
	return act()
}

// adapter is the provider's lookup, for the reconcile policy.
type fpAdapter struct{ w *fpWorld }

func (a fpAdapter) Capabilities() providers.Capabilities {
	c := providers.Capabilities{Lookup: providers.Consistent}
	if a.w.tool == tKeyed {
		c.DedupWindow = fpRetention
	}
	return c
}

func (a fpAdapter) Lookup(ctx context.Context, dk string) (providers.LookupResult, error) {
	w := a.w
	w.clock.Advance(time.Millisecond)
	kind, faulty := w.point("provider lookup")
	if faulty {
		switch kind {
		case fRefuse, fLost, fCrash, fDelay:
			return providers.LookupResult{}, fmt.Errorf("lookup: connection reset (%s, injected)", kind)
		default:
			w.jump(kind)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byKey[dk] {
		return providers.LookupResult{Status: providers.Found, Ref: "ref_" + dk[:8], Summary: "sent " + dk[:8]}, nil
	}
	return providers.LookupResult{Status: providers.NotFound}, nil
}

// tool is the scenario's tool as process p runs it.
func (w *fpWorld) toolFor(p *fpProcess) client.Tool {
	t := client.Tool{
		Name:     "send",
		Identity: []client.Field{{Path: "id", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			return w.request(p, inv.DownstreamKey)
		},
	}
	if w.tool != tPlain {
		t.Reconciler = reconcile.New(fpAdapter{w}, &reconcile.Config{
			Clock: w.clock, InFlight: fpInFlight, MaxWait: 10 * time.Second,
			Sleep: func(ctx context.Context, d time.Duration) error { w.clock.Advance(d); return ctx.Err() },
		})
	}
	return t
}

// deliver is one call of the action by a new process, as the model makes
// it; what it was told is kept unless the process was killed.
func (w *fpWorld) deliver(ctx context.Context) {
	p := &fpProcess{w: w}
	exec := client.New(&faultStore{Store: w.store, p: p}, &client.Config{
		Clock: w.clock, Liveness: fpLease, Retention: fpRetention, Wait: -1,
		// Generous: one fault costs one backoff interval, and a slow machine
		// must not turn a repeat into a give-up.
		RecordTimeout: 30 * time.Second,
	})
	if err := exec.Register(w.toolFor(p)); err != nil {
		w.t.Fatal(err)
	}
	res, _ := exec.Execute(ctx, w.run, client.Call{Tool: "send", Input: json.RawMessage(`{"id":"42"}`), ID: "toolu_1"})
	if p.dead.Load() {
		return // nobody heard the answer
	}
	after := w.effectCount()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told = append(w.told, fmt.Sprintf("%s [effects %d, %d by this call]", res.Text, after, p.committed.Load()))
	switch {
	case strings.HasPrefix(res.Text, "Failed, nothing was done") && p.committed.Load() > 0:
		w.problems = append(w.problems, "untruthful: told "+res.Text+" while the call's request took effect")
	case (res.Outcome == client.Executed || res.Outcome == client.AlreadyDone) && w.effects == 0:
		w.problems = append(w.problems, "untruthful: told "+res.Text+" with no effect")
	}
}

// redeliverInside redelivers the call while a delayed point holds its
// process, once.
func (w *fpWorld) redeliverInside() {
	w.mu.Lock()
	if w.inHook {
		w.mu.Unlock()
		return
	}
	w.inHook = true
	w.mu.Unlock()
	if w.queue {
		w.consume(context.Background())
		return
	}
	w.deliver(context.Background())
}

// sweep runs the sweeper once, as its own process.
func (w *fpWorld) sweep(ctx context.Context) {
	p := &fpProcess{w: w}
	s := reconcile.NewSweeper(&faultStore{Store: w.store, p: p}, []client.Tool{w.toolFor(p)},
		&reconcile.SweeperConfig{Clock: w.clock, Lease: fpLease, Retention: fpRetention, RunID: w.run})
	_, _ = s.Sweep(ctx)
}

// past moves the clock past every bound a stuck record waits for.
func (w *fpWorld) past() { w.clock.Advance(fpLease + fpInFlight + time.Minute) }

// scenario runs the enumerated path, then settles the action without
// faults as an agent and an operator would, and checks the end.
func (w *fpWorld) scenario() {
	ctx := context.Background()
	w.deliver(ctx) // the first call
	w.deliver(ctx) // the model calls again at once
	w.past()
	w.sweep(ctx)
	w.deliver(ctx) // the call after the documented bound

	// Settling, without faults: past the bounds again, a sweep, and an
	// operator who settles what no reconciler can from the journal.
	w.mu.Lock()
	w.enumerated, w.faults = w.points, nil
	w.mu.Unlock()
	for range 3 {
		w.past()
		w.sweep(ctx)
		w.deliver(ctx)
		key := w.key()
		rec, err := w.store.Get(ctx, key)
		if err != nil || rec.State != ledger.StateUncertain || w.tool != tPlain {
			continue
		}
		if w.maybeSent == 0 && w.effectCount() == 0 {
			w.problems = append(w.problems, "lost: an operator had to settle the action although no request could have taken effect")
		}
		res := ledger.Resolution{By: "operator", Done: w.effectCount() > 0, Summary: "found in the journal", Reason: "not in the journal"}
		if at := ledger.FailableAt(rec, fpInFlight); !res.Done && w.clock.Now().Before(at) {
			w.clock.Set(at) // the operator waits for what may still be in flight
		}
		if _, err := ledger.Resolve(ctx, w.store, key, ledger.Resolution{By: res.By, Done: res.Done, Summary: res.Summary, Reason: res.Reason, InFlight: fpInFlight}, w.clock.Now()); err != nil {
			w.problems = append(w.problems, "resolve: "+err.Error())
		}
	}
	last := w.told[len(w.told)-1]
	switch {
	case w.class == oPermanent:
		if w.effectCount() != 0 || !strings.Contains(last, "Do not retry") {
			w.problems = append(w.problems, "permanent failure ended as: "+last)
		}
	case w.effectCount() > 1 || w.effects == 0:
		// After a record expired, a repeat may be answered from the
		// earlier effect, which a lookup of the same downstream key finds.
		w.problems = append(w.problems, fmt.Sprintf("lost: %d effects at the end (%d in all)", w.effectCount(), w.effects))
	case !strings.HasPrefix(last, "Already done") && !strings.HasPrefix(last, "Done"):
		w.problems = append(w.problems, "lost or stuck: the last call was told "+last)
	}
}

func (w *fpWorld) key() string {
	t := w.toolFor(&fpProcess{w: w})
	k, err := t.Key(w.run, client.Call{Tool: "send", Input: json.RawMessage(`{"id":"42"}`)}, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return k
}

// fpTally counts the runs of one ledger.
type fpTally struct {
	runs, points                 int
	duplicates, lost, untruthful int
	first                        []string
}

func (t *fpTally) add(w *fpWorld, label string) {
	t.runs++
	for _, p := range w.problems {
		switch {
		case strings.HasPrefix(p, "duplicate"):
			t.duplicates++
		case strings.HasPrefix(p, "untruthful"):
			t.untruthful++
		default:
			t.lost++
		}
	}
	if len(w.problems) > 0 && len(t.first) < fpShow {
		t.first = append(t.first, fmt.Sprintf("%s: %s\n    told: %s", label, strings.Join(w.problems, "; "), strings.Join(w.told, " | ")))
	}
}

// enumerate runs every scenario with each single point failed in each way
// (pairs: every two points, in a reduced set of ways) on store.
//
// On a network ledger (ledger only) the points are its own calls, for the
// outcome classes whose paths differ in them (done, a definite failure, an
// ambiguous one): the provider's points do not depend on the ledger, and
// the memory and SQLite ledgers run every one.
func enumerate(t testing.TB, store ledger.Store, clock *clock.Fake, pairs, ledgerOnly bool) *fpTally {
	tally := &fpTally{}
	n := 0
	newWorld := func(tool toolClass, class outcomeClass, faults []fpFault) *fpWorld {
		n++
		return &fpWorld{t: t, store: store, clock: clock, run: fmt.Sprintf("fp-%p-%d", tally, n),
			tool: tool, class: class, faults: faults, byKey: map[string]bool{}, dedup: map[string]bool{}}
	}
	for tool := tKeyed; tool <= tPlain; tool++ {
		for class := oDone; class <= oUnmarked; class++ {
			if ledgerOnly && class != oDone && class != oDefinite && class != oAmbiguous {
				continue
			}
			dry := newWorld(tool, class, nil)
			dry.scenario()
			tally.add(dry, fmt.Sprintf("%s/%s without faults", tool, class))
			points := dry.enumerated
			tally.points += points
			for p := 0; p < points; p++ {
				if ledgerOnly && !strings.HasPrefix(dry.ops[p], "ledger ") {
					continue
				}
				for kind := faultKind(0); kind < numFaultKinds; kind++ {
					w := newWorld(tool, class, []fpFault{{p, kind}})
					w.scenario()
					tally.add(w, fmt.Sprintf("%s/%s, point %d %s", tool, class, p, kind))
					if !pairs {
						continue
					}
					for q := p + 1; q < points; q++ {
						for _, k2 := range []faultKind{fRefuse, fLost, fCrash} {
							w := newWorld(tool, class, []fpFault{{p, kind}, {q, k2}})
							w.scenario()
							tally.add(w, fmt.Sprintf("%s/%s, points %d %s and %d %s", tool, class, p, kind, q, k2))
						}
					}
				}
			}
		}
	}
	return tally
}

// TestFaultPoints enumerates the fault points on every ledger and prints
// one line: the runs, points and ledgers, and the three counts.
func TestFaultPoints(t *testing.T) {
	t.Parallel()
	type result struct {
		name  string
		tally *fpTally
	}
	var (
		mu      sync.Mutex
		results []result
	)
	t.Run("ledgers", func(t *testing.T) {
		for _, b := range backends {
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				clock := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
				store, _ := b.open(t, clock)
				local := b.name == "memory" || b.name == "sqlite"
				tally := enumerate(t, store, clock, *faultPairs && local, !local)
				for _, f := range tally.first {
					t.Error(f)
				}
				mu.Lock()
				results = append(results, result{b.name, tally})
				mu.Unlock()
			})
		}
	})
	var runs, points, dup, lost, untruthful int
	for _, r := range results {
		runs += r.tally.runs
		points = max(points, r.tally.points) // the full path (memory, SQLite)
		dup += r.tally.duplicates
		lost += r.tally.lost
		untruthful += r.tally.untruthful
	}
	t.Logf("faultpoints: %d runs over %d points × %d ledgers, %d duplicates, %d lost, %d untruthful",
		runs, points, len(results), dup, lost, untruthful)
	fmt.Printf("faultpoints: %d runs over %d points × %d ledgers, %d duplicates, %d lost, %d untruthful\n",
		runs, points, len(results), dup, lost, untruthful)
}

// fpShow bounds the failed runs a ledger reports.
var fpShow = 5
