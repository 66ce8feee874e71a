package console

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/internal/listmerge"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

// pageSize is how many records a list page shows.
const pageSize = 50

// mergeStates returns up to limit records after `after`, in the order of
// ledger.Cursor, merged from one listing per filter: each listing is
// served by its state's index, never by a scan of the whole ledger.
func mergeStates(ctx context.Context, s ledger.Store, filters []ledger.Filter, after ledger.Cursor, limit int) ([]ledger.Record, error) {
	fetch := func(ctx context.Context, reqs []listmerge.Request) ([]listmerge.Reply, error) {
		out := make([]listmerge.Reply, len(reqs))
		g, ctx := errgroup.WithContext(ctx)
		for i, r := range reqs {
			g.Go(func() error {
				f := filters[r.Source]
				f.After, f.Limit = r.After, r.N
				recs, err := s.List(ctx, f)
				if err != nil {
					return err
				}
				out[i] = listmerge.Reply{Records: recs, Next: r.After, Done: len(recs) < r.N}
				if len(recs) > 0 {
					out[i].Next = ledger.CursorOf(&recs[len(recs)-1])
				}
				return nil
			})
		}
		return out, g.Wait()
	}
	return listmerge.Merge(ctx, len(filters), after, limit, fetch)
}

// stuckFilters select what needs attention at now: pending records whose
// lease ran out, and uncertain ones.
func stuckFilters(now time.Time) []ledger.Filter {
	return []ledger.Filter{{State: ledger.StatePending, LeaseBefore: now}, {State: ledger.StateUncertain}}
}

// attentionOpts filter and sort the attention list.
type attentionOpts struct {
	Tool, Run string
	State     string // "", "uncertain" or "lapsed"
	Sort      string // "" or "oldest" (by lease end, paged), "newest", "tool"
}

// sortCap bounds the records the attention list reads to sort them other
// than by the ledger's own order (newest first, by tool).
const sortCap = 1000

// attentionResult is one page of the attention list.
type attentionResult struct {
	Records []ledger.Record
	Next    ledger.Cursor // zero when there is no next page
	Note    string
}

// attention is one page of the actions that need attention: oldest first
// by default, a page at a time from the state indexes; filtered by tool
// and run here (at most scanBudget records read a page); sorted newest
// first or by tool among the first sortCap that match.
func (c *Console) attention(ctx context.Context, o attentionOpts, after ledger.Cursor, now time.Time) (attentionResult, error) {
	filters := stuckFilters(now)
	switch o.State {
	case "lapsed":
		filters = filters[:1]
	case "uncertain":
		filters = filters[1:]
	}
	match := func(r *ledger.Record) bool {
		return !reserved(r) && (o.Tool == "" || r.Tool == o.Tool) && (o.Run == "" || r.RunID == o.Run)
	}
	var res attentionResult
	if o.Sort == "newest" || o.Sort == "tool" {
		var all []ledger.Record
		read := 0
		for cur := (ledger.Cursor{}); read < scanBudget && len(all) < sortCap; {
			recs, err := mergeStates(ctx, c.cfg.Store, filters, cur, 500)
			if err != nil {
				return res, err
			}
			read += len(recs)
			for i := range recs {
				if match(&recs[i]) && len(all) < sortCap {
					all = append(all, recs[i])
				}
			}
			if len(recs) < 500 {
				break
			}
			cur = ledger.CursorOf(&recs[len(recs)-1])
			if read >= scanBudget || len(all) >= sortCap {
				res.Note = fmt.Sprintf("sorted among the oldest %d actions that need attention (read %d records); filter to narrow the list", len(all), read)
			}
		}
		slices.SortStableFunc(all, func(a, b ledger.Record) int {
			if o.Sort == "tool" {
				if c := strings.Compare(a.Tool, b.Tool); c != 0 {
					return c
				}
				return ledger.CursorOf(&a).Compare(ledger.CursorOf(&b))
			}
			return ledger.CursorOf(&b).Compare(ledger.CursorOf(&a))
		})
		res.Records = all[:min(len(all), pageSize)]
		if len(all) > pageSize {
			res.Note = strings.TrimPrefix(res.Note+"; ", "; ") + fmt.Sprintf("showing the first %d of %d; filter to narrow the list", pageSize, len(all))
		}
		return res, nil
	}
	filtered := o.Tool != "" || o.Run != ""
	read := 0
	for read < scanBudget {
		n := pageSize + 1
		if filtered {
			n = min(500, scanBudget-read)
		}
		recs, err := mergeStates(ctx, c.cfg.Store, filters, after, n)
		if err != nil {
			return res, err
		}
		read += len(recs)
		for i := range recs {
			if !match(&recs[i]) {
				continue
			}
			if len(res.Records) == pageSize {
				res.Next = ledger.CursorOf(&res.Records[pageSize-1])
				return res, nil
			}
			res.Records = append(res.Records, recs[i])
		}
		if len(recs) < n {
			return res, nil
		}
		after = ledger.CursorOf(&recs[len(recs)-1])
	}
	res.Next = after
	res.Note = fmt.Sprintf("read %d records; the next page reads on", read)
	return res, nil
}

// reserved reports a record oncely keeps for itself, not an action: a
// sweeper's position or a counter record.
func reserved(r *ledger.Record) bool {
	return r.Tool == reconcile.CursorTool || r.Tool == ledger.CountersRun
}

// conclusion says when the reconciler can settle rec on its own: from
// SentBy (the record's lease end) plus the in-flight bound, plus the
// index lag of a provider whose lookups are eventually consistent. ok is
// false when the tool has no adapter configured.
func (c *Console) conclusion(rec *ledger.Record) (at time.Time, lag time.Duration, ok bool) {
	a, found := c.cfg.Adapters[rec.Tool]
	if !found || a == nil {
		return time.Time{}, 0, false
	}
	caps := a.Capabilities()
	if caps.Lookup == providers.Eventual {
		lag = caps.IndexLag
	}
	return ledger.FailableAt(rec, c.cfg.InFlight).Add(lag), lag, true
}

// query is a search.
type query struct {
	Run, Tool, Prefix, DownstreamKey string
	State                            ledger.State
	From, To                         time.Time // settled (or lease end) within [From, To)
	After                            ledger.Cursor
	Resolved                         bool // only the records settled by hand (ledger.Record.ResolvedBy)
}

// scanBudget bounds the records one search page reads when it filters by
// tool or key prefix, which no index serves: a page reports how far it
// read, and the next page continues from there.
const scanBudget = 2000

// searchResult is one page of a search.
type searchResult struct {
	Records []ledger.Record
	// Next is where the next page starts; zero when the search is done.
	Next ledger.Cursor
	// Scanned is how many records this page read (with a tool or prefix
	// filter, more than it shows).
	Scanned int
	// Exact: the search named one record by its key or downstream key.
	Exact bool
	// RunScan: the search by run reads the records by time, a bounded
	// number a page, as the store keeps no index of runs.
	RunScan bool
}

// parseDownstream splits a downstream key into its action key and
// attempt (client.DownstreamKey): "KEY" is attempt 1, "KEY-N" attempt N.
func parseDownstream(dk string) (string, int) {
	if i := strings.LastIndexByte(dk, '-'); i > 0 {
		if n, err := strconv.Atoi(dk[i+1:]); err == nil && n > 1 {
			return dk[:i], n
		}
	}
	return dk, 1
}

// search runs q: a downstream key or a full key is one Get; otherwise the
// records are read in the order of ledger.Cursor from the state indexes
// (every state merged when q names none), filtered by run in the store
// and by tool and key prefix here, a bounded number at a time.
func (c *Console) search(ctx context.Context, q query, now time.Time) (searchResult, error) {
	s := c.cfg.Store
	if q.DownstreamKey != "" {
		key, attempt := parseDownstream(q.DownstreamKey)
		rec, err := s.Get(ctx, key)
		if errors.Is(err, ledger.ErrNotFound) && key != q.DownstreamKey {
			key, attempt = q.DownstreamKey, 1
			rec, err = s.Get(ctx, key)
		}
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return searchResult{Exact: true}, nil
		case err != nil:
			return searchResult{}, err
		case client.DownstreamKey(rec.Key, rec.Attempt) != q.DownstreamKey && attempt > rec.Attempt:
			return searchResult{Exact: true}, nil // a later attempt than the record has made
		}
		return searchResult{Records: []ledger.Record{*rec}, Exact: true}, nil
	}
	if len(q.Prefix) == 64 {
		rec, err := s.Get(ctx, q.Prefix)
		switch {
		case errors.Is(err, ledger.ErrNotFound):
			return searchResult{Exact: true}, nil
		case err != nil:
			return searchResult{}, err
		}
		return searchResult{Records: []ledger.Record{*rec}, Exact: true}, nil
	}
	// A run's records are listed by the run alone where the store keeps
	// an index of runs (SQLite; ledgerpg with Config.RunIndex: a run holds
	// few records; its state is filtered here); otherwise each state's
	// listing is served by the index of that state, and a run, a tool and
	// a key prefix are filtered here, a bounded number of records a page.
	var res searchResult
	byRun := q.Run != "" && ledger.RunsIndexed(s)
	res.RunScan = q.Run != "" && !byRun
	var filters []ledger.Filter
	switch {
	case byRun:
		filters = []ledger.Filter{{RunID: q.Run, LeaseBefore: q.To}}
	case q.State != "":
		filters = []ledger.Filter{{State: q.State, LeaseBefore: q.To}}
	case q.Resolved:
		filters = []ledger.Filter{{State: ledger.StateDone, LeaseBefore: q.To}, {State: ledger.StateFailed, LeaseBefore: q.To}}
	default:
		for _, st := range []ledger.State{ledger.StatePending, ledger.StateDone, ledger.StateFailed, ledger.StateUncertain} {
			filters = append(filters, ledger.Filter{State: st, LeaseBefore: q.To})
		}
	}
	after := q.After
	if after.IsZero() && !q.From.IsZero() {
		// Every key sorts after "": the records from From on.
		after = ledger.Cursor{LeaseUntil: q.From}
	}
	filtered := q.Tool != "" || q.Prefix != "" || q.Run != "" || q.Resolved
	for res.Scanned < scanBudget {
		n := pageSize + 1
		if filtered {
			n = min(500, scanBudget-res.Scanned)
		}
		recs, err := mergeStates(ctx, s, filters, after, n)
		if err != nil {
			return res, err
		}
		res.Scanned += len(recs)
		for i := range recs {
			r := &recs[i]
			if reserved(r) || (q.Tool != "" && r.Tool != q.Tool) || !strings.HasPrefix(r.Key, q.Prefix) ||
				(q.State != "" && r.State != q.State) || (q.Run != "" && r.RunID != q.Run) || (q.Resolved && r.ResolvedBy() == "") {
				continue
			}
			if len(res.Records) == pageSize {
				res.Next = after
				return res, nil
			}
			res.Records = append(res.Records, *r)
		}
		if len(recs) < n {
			return res, nil
		}
		after = ledger.CursorOf(&recs[len(recs)-1])
	}
	res.Next = after
	return res, nil
}

// reconcileNow runs the tool's reconciler on one record, as a sweep
// would: it settles the record when the provider's answer is conclusive
// and leaves it as it is otherwise. It reports the sweep's verdict.
func (c *Console) reconcileNow(ctx context.Context, rec *ledger.Record) (reconcile.Report, error) {
	a, ok := c.cfg.Adapters[rec.Tool]
	if !ok || a == nil {
		return reconcile.Report{}, fmt.Errorf("no reconciler is configured for tool %s", rec.Tool)
	}
	pol := reconcile.New(a, &reconcile.Config{Clock: c.cfg.Clock, InFlight: c.cfg.InFlight, MaxWait: reconcileWait})
	one := &oneRecord{Store: c.cfg.Store, key: rec.Key, now: c.cfg.Clock.Now}
	sw := reconcile.NewSweeper(one, []client.Tool{{Name: rec.Tool, Reconciler: pol}},
		&reconcile.SweeperConfig{Clock: c.cfg.Clock, Limit: 1, Concurrency: 1})
	return sw.Sweep(ctx)
}

// reconcileWait bounds how long reconcile now asks the provider again
// after an inconclusive answer, so that the page answers.
const reconcileWait = 5 * time.Second

// oneRecord is a view of a store that lists only one record, so that a
// sweep over it reconciles that record alone, and that keeps no sweep
// position (the position records of the ledger's own sweepers stay as
// they are). It is no ledger.Purger on purpose: a purge through a view of
// one record would purge the whole ledger; the sweep it is made for
// neither purges nor watches.
type oneRecord struct {
	ledger.Store
	key string
	now func() time.Time
}

func (o *oneRecord) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	rec, err := o.Store.Get(ctx, o.key)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if f.Limit <= 0 || !f.Matches(rec, o.now()) || (f.LeaseBefore.IsZero() && rec.State == ledger.StatePending) {
		return nil, nil
	}
	return []ledger.Record{*rec}, nil
}

func (o *oneRecord) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if strings.HasPrefix(key, reconcile.CursorTool) {
		return nil, ledger.ErrNotFound
	}
	return o.Store.Get(ctx, key)
}

func (o *oneRecord) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if p.Tool == reconcile.CursorTool {
		return ledger.ClaimResult{Previous: &ledger.Record{Key: p.Key, Tool: p.Tool, State: ledger.StatePending}}, nil
	}
	return o.Store.Claim(ctx, p)
}

// overviewRange is a time range of the overview.
type overviewRange struct {
	Name    string
	Span    time.Duration
	Buckets int
}

var ranges = []overviewRange{
	{"1h", time.Hour, 12},
	{"6h", 6 * time.Hour, 24},
	{"24h", 24 * time.Hour, 24},
	{"7d", 7 * 24 * time.Hour, 28},
}

// bucketCap bounds the done and failed records the overview reads per
// time bucket, and stuckCap the uncertain and pending ones it reads over
// the whole range: a chart with more shows its counts as "at least".
// countersCap bounds the counter records it reads over the range (an
// equal share per bucket).
const (
	bucketCap   = 100
	stuckCap    = 1000
	countersCap = 2400
)

// outcome is a column of the overview: a state, or resolved by hand.
type outcome string

const (
	outDone      outcome = "done"
	outFailed    outcome = "failed"
	outUncertain outcome = "uncertain"
	outPending   outcome = "pending"
	outResolved  outcome = "resolved"
)

var outcomes = []outcome{outDone, outFailed, outUncertain, outPending, outResolved}

// bucket is one time bucket of the overview.
type bucket struct {
	From, To time.Time
	Counts   map[outcome]int
	Capped   bool // some state had more than bucketCap records in it
}

// overview is what the overview page shows.
type overview struct {
	Range           overviewRange
	Tool            string
	Buckets         []bucket
	Totals          map[outcome]int
	ByTool          map[string]map[outcome]int
	Tools           []string
	Capped          bool
	lapsed          int // pending records whose lease ran out before now
	OldestUncertain *ledger.Record
	OldestLapsed    *ledger.Record
	// HandRate is the share of the settled records (done or failed) an
	// operator settled; StuckRate the share of all records that are
	// uncertain or pending past their lease.
	HandRate, StuckRate float64
	// Rates are the replay and reconcile rates per tool over the range,
	// from the counter records (client.Config.NoCounters) and, for the
	// resolutions by hand, the records; RatesAll sums them.
	Rates    []toolRate
	RatesAll toolRate
	// Counters is how many counter records were read; CountersCapped: more
	// exist in the range than countersCap.
	Counters       int
	CountersCapped bool
}

// toolRate is one tool's line of the rates.
type toolRate struct {
	Tool string
	counters.Counts
	// Hand: resolved by an operator (from the records read).
	Hand int
}

// Calls is the number of calls the counters saw: executed, replayed or
// merged.
func (t toolRate) Calls() int64 { return t.Executed + t.Replayed + t.Merged }

// ReplayRate is the share of the calls answered without running the tool
// (replayed from the ledger or merged in flight).
func (t toolRate) ReplayRate() float64 {
	if t.Calls() == 0 {
		return 0
	}
	return float64(t.Replayed+t.Merged) / float64(t.Calls())
}

// ReconcileRate is the share of the actions settled after an unknown
// outcome that a reconciler settled, rather than an operator by hand.
func (t toolRate) ReconcileRate() float64 {
	if n := t.Reconciled + int64(t.Hand); n > 0 {
		return float64(t.Reconciled) / float64(n)
	}
	return 0
}

// settledBy reports a record an operator settled by hand (Resolve).
func settledBy(r *ledger.Record) outcome {
	if r.ResolvedBy() != "" {
		return outResolved
	}
	return ""
}

// overviewOf counts the records settled (or whose lease ends) in each
// bucket of rng before now, per state, reading at most bucketCap records
// per state and bucket from the state index.
func (c *Console) overviewOf(ctx context.Context, rng overviewRange, tool string, now time.Time) (*overview, error) {
	ov := &overview{Range: rng, Tool: tool, Totals: map[outcome]int{}, ByTool: map[string]map[outcome]int{}}
	step := rng.Span / time.Duration(rng.Buckets)
	end := now.Truncate(step).Add(step)
	start := end.Add(-rng.Span)
	ov.Buckets = make([]bucket, rng.Buckets)
	for i := range ov.Buckets {
		ov.Buckets[i] = bucket{From: start.Add(time.Duration(i) * step), To: start.Add(time.Duration(i+1) * step), Counts: map[outcome]int{}}
	}
	// Done and failed records, the many, are read per bucket, at most
	// bucketCap of each; uncertain and pending ones, the few, in one
	// listing each over the whole range, at most stuckCap of them.
	type cell struct {
		recs   []ledger.Record
		capped bool
	}
	settled := []ledger.State{ledger.StateDone, ledger.StateFailed}
	cells := make([][]cell, len(ov.Buckets))
	var stuck [2]cell
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	list := func(st ledger.State, from, to time.Time, limit int, out *cell) func() error {
		return func() error {
			recs, err := c.cfg.Store.List(gctx, ledger.Filter{State: st, LeaseBefore: to, Limit: limit + 1,
				After: ledger.Cursor{LeaseUntil: from}}) // every key sorts after "": the records from `from` on
			if err != nil {
				return err
			}
			*out = cell{recs: recs[:min(len(recs), limit)], capped: len(recs) > limit}
			return nil
		}
	}
	// The counter records are done records too, listed among the
	// actions': they are read first, at most countersCap over the range:
	// in one listing when the range holds no more (a store without an
	// index of them by time, SQLite, reads them all by run), else the
	// same share from each bucket, so that the rates sample the whole
	// range. Each bucket's listing of done records then reads as many more
	// as it holds of them.
	countCells := make([]cell, len(ov.Buckets))
	all, err := c.cfg.Store.List(ctx, ledger.Filter{State: ledger.StateDone, RunID: ledger.CountersRun, LeaseBefore: end,
		After: ledger.Cursor{LeaseUntil: start}, Limit: countersCap + 1})
	if err != nil {
		return nil, err
	}
	if len(all) <= countersCap {
		for _, r := range all {
			if k := int(r.LeaseUntil.Sub(start) / step); k >= 0 && k < len(countCells) {
				countCells[k].recs = append(countCells[k].recs, r)
			}
		}
	} else {
		perBucket := max(1, countersCap/len(ov.Buckets))
		cg, cctx := errgroup.WithContext(ctx)
		cg.SetLimit(8)
		for i, b := range ov.Buckets {
			cg.Go(func() error {
				recs, err := c.cfg.Store.List(cctx, ledger.Filter{State: ledger.StateDone, RunID: ledger.CountersRun, LeaseBefore: b.To,
					After: ledger.Cursor{LeaseUntil: b.From}, Limit: perBucket + 1})
				countCells[i] = cell{recs: recs[:min(len(recs), perBucket)], capped: len(recs) > perBucket}
				return err
			})
		}
		if err := cg.Wait(); err != nil {
			return nil, err
		}
	}
	var countRecs []ledger.Record
	extra := make([]int, len(ov.Buckets))
	for i, cc := range countCells {
		extra[i] = len(cc.recs)
		if cc.capped {
			extra[i]++ // the one more it read
			ov.CountersCapped = true
		}
		countRecs = append(countRecs, cc.recs...)
	}
	for i, b := range ov.Buckets {
		cells[i] = make([]cell, len(settled))
		for j, st := range settled {
			limit := bucketCap
			if st == ledger.StateDone {
				limit += extra[i]
			}
			g.Go(list(st, b.From, b.To, limit, &cells[i][j]))
		}
	}
	for j, st := range []ledger.State{ledger.StateUncertain, ledger.StatePending} {
		g.Go(list(st, start, end, stuckCap, &stuck[j]))
	}
	g.Go(func() error {
		recs, err := c.cfg.Store.List(gctx, ledger.Filter{State: ledger.StateUncertain, Limit: 1})
		if len(recs) > 0 {
			ov.OldestUncertain = &recs[0]
		}
		return err
	})
	g.Go(func() error {
		recs, err := c.cfg.Store.List(gctx, ledger.Filter{State: ledger.StatePending, LeaseBefore: now, Limit: 1})
		if len(recs) > 0 {
			ov.OldestLapsed = &recs[0]
		}
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for _, st := range stuck { // into the cells of their buckets
		if st.capped {
			ov.Capped = true
		}
		for _, r := range st.recs {
			i := int(r.LeaseUntil.Sub(start) / step)
			if i >= 0 && i < len(cells) {
				cells[i] = append(cells[i], cell{recs: []ledger.Record{r}})
			}
		}
	}
	tools := map[string]bool{}
	for i := range cells {
		b := &ov.Buckets[i]
		for j := range cells[i] {
			if cells[i][j].capped {
				b.Capped, ov.Capped = true, true
			}
			for k := range cells[i][j].recs {
				r := &cells[i][j].recs[k]
				if reserved(r) {
					continue
				}
				tools[r.Tool] = true
				if tool != "" && r.Tool != tool {
					continue
				}
				out := []outcome{outcome(r.State)}
				if by := settledBy(r); by != "" {
					out = append(out, by)
				}
				if ov.ByTool[r.Tool] == nil {
					ov.ByTool[r.Tool] = map[outcome]int{}
				}
				if r.State == ledger.StatePending && r.LeaseExpired(now) {
					ov.lapsed++
				}
				for _, o := range out {
					b.Counts[o]++
					ov.Totals[o]++
					ov.ByTool[r.Tool][o]++
				}
			}
		}
	}
	ov.Counters = len(countRecs)
	rates := map[string]*toolRate{}
	rate := func(t string) *toolRate {
		if rates[t] == nil {
			rates[t] = &toolRate{Tool: t}
		}
		return rates[t]
	}
	for i := range countRecs {
		n, ok := counters.Decode(&countRecs[i])
		if !ok {
			continue
		}
		tools[n.Tool] = true
		if tool == "" || n.Tool == tool {
			rate(n.Tool).Add(n)
		}
	}
	for t, m := range ov.ByTool {
		if m[outResolved] > 0 {
			rate(t).Hand = m[outResolved]
		}
	}
	for _, r := range rates {
		ov.Rates = append(ov.Rates, *r)
		ov.RatesAll.Add(r.Counts)
		ov.RatesAll.Hand += r.Hand
	}
	slices.SortFunc(ov.Rates, func(a, b toolRate) int { return strings.Compare(a.Tool, b.Tool) })
	for t := range tools {
		ov.Tools = append(ov.Tools, t)
	}
	slices.Sort(ov.Tools)
	if settled := ov.Totals[outDone] + ov.Totals[outFailed]; settled > 0 {
		ov.HandRate = float64(ov.Totals[outResolved]) / float64(settled)
	}
	if all := ov.Totals[outDone] + ov.Totals[outFailed] + ov.Totals[outUncertain] + ov.Totals[outPending]; all > 0 {
		ov.StuckRate = float64(ov.Totals[outUncertain]+ov.lapsed) / float64(all)
	}
	return ov, nil
}
