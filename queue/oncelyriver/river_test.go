package oncelyriver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/oncelyfunc"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(pgtest.Main(m.Run))
}

// RefundArgs is the job of the tests: refund an order.
type RefundArgs struct {
	OrderID string `json:"order_id"`
	Amount  int    `json:"amount"`
}

func (RefundArgs) Kind() string { return "refund" }

// Refunded is the work's output.
type Refunded struct {
	RefundID string `json:"refund_id"`
}

// env is one test's River schema (which holds the ledger too) and pool.
type env struct {
	pool   *pgxpool.Pool
	schema string
	store  *ledgerpg.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	lcfg := &ledgerpg.Config{Schema: schema}
	if err := ledgerpg.Migrate(ctx, pool, lcfg); err != nil {
		t.Fatal(err)
	}
	store, err := ledgerpg.New(pool, lcfg)
	if err != nil {
		t.Fatal(err)
	}
	return &env{pool: pool, schema: schema, store: store}
}

// immediate retries a failed job at once, so that a test of its retries
// waits for no backoff.
type immediate struct{}

func (immediate) NextRetry(*rivertype.JobRow) time.Time { return time.Now() }

func (e *env) config(workers *river.Workers, maxWorkers int) *river.Config {
	return &river.Config{
		Schema:      e.schema,
		Queues:      map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers:     workers,
		RetryPolicy: immediate{},
		// Jobs are fetched at once when inserted (LISTEN/NOTIFY) and
		// polled for this often otherwise.
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond,
		JobTimeout: 30 * time.Second,
		TestOnly:   true,
	}
}

func (e *env) start(t testing.TB, cfg *river.Config) *river.Client[pgx.Tx] {
	t.Helper()
	rc, err := river.NewClient(riverpgxv5.New(e.pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rc.Stop(ctx); err != nil {
			t.Errorf("stop the River client: %v", err)
		}
	})
	return rc
}

// waitJobs polls until every job is in one of the final states and
// returns the jobs.
func waitJobs(t *testing.T, rc *river.Client[pgx.Tx], ids []int64, want ...rivertype.JobState) []*rivertype.JobRow {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var rows []*rivertype.JobRow
		ok := true
		for _, id := range ids {
			row, err := rc.JobGet(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, row)
			in := false
			for _, s := range want {
				in = in || row.State == s
			}
			ok = ok && in
		}
		if ok {
			return rows
		}
		if time.Now().After(deadline) {
			for _, r := range rows {
				t.Logf("job %d: %s attempt %d errors %v", r.ID, r.State, r.Attempt, r.Errors)
			}
			t.Fatalf("jobs not %v in time", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func insert(t *testing.T, rc *river.Client[pgx.Tx], n int, args RefundArgs, opts *river.InsertOpts) []int64 {
	t.Helper()
	var ids []int64
	for range n {
		res, err := rc.Insert(context.Background(), args, opts)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	return ids
}

func output(t *testing.T, row *rivertype.JobRow) Refunded {
	t.Helper()
	var out Refunded
	if err := json.Unmarshal(row.Output(), &out); err != nil {
		t.Fatalf("job %d output %q: %v", row.ID, row.Output(), err)
	}
	return out
}

var byOrder = Options{Identity: []oncelyfunc.Key{{Expr: "args.order_id", Norm: client.String}}}

// The same work inserted 5 times runs once; every job completes, each
// with the first run's output (a handler's result returned again).
func TestRiverFiveDeliveriesOneEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true})
	var runs atomic.Int32
	workers := river.NewWorkers()
	cfg := e.config(workers, 1)
	w, err := New(exec, cfg, byOrder, func(ctx context.Context, job *river.Job[RefundArgs]) (Refunded, error) {
		n := runs.Add(1)
		return Refunded{RefundID: fmt.Sprintf("re_%d_%s", n, oncelyfunc.DownstreamKey(ctx)[:8])}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	river.AddWorker(workers, w)
	rc := e.start(t, cfg)
	ids := insert(t, rc, 5, RefundArgs{OrderID: "ord_5", Amount: 700}, nil)
	rows := waitJobs(t, rc, ids, rivertype.JobStateCompleted)
	if got := runs.Load(); got != 1 {
		t.Errorf("the work ran %d times for 5 deliveries, want 1", got)
	}
	first := output(t, rows[0])
	if !strings.HasPrefix(first.RefundID, "re_1_") {
		t.Errorf("first job's output %+v, want the first run's", first)
	}
	for _, r := range rows[1:] {
		if got := output(t, r); got != first {
			t.Errorf("job %d output %+v, want the first run's %+v", r.ID, got, first)
		}
	}
}

// 8 copies of one job worked at once by 8 River clients (each with its
// own executor, as 8 processes): one runs; the other 7 find the action in
// flight, are snoozed, and complete without running once it is done.
func TestRiverEightConcurrentOneRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	release := make(chan struct{})
	opts := byOrder
	opts.Snooze = 10 * time.Millisecond
	// Insert all 8 before the clients start.
	ins, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{Schema: e.schema})
	if err != nil {
		t.Fatal(err)
	}
	ids := insert(t, ins, 8, RefundArgs{OrderID: "ord_8", Amount: 800}, nil)
	var rc *river.Client[pgx.Tx]
	for range 8 {
		exec := client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true, Wait: -1})
		workers := river.NewWorkers()
		cfg := e.config(workers, 1)
		w, err := New(exec, cfg, opts, func(ctx context.Context, job *river.Job[RefundArgs]) (Refunded, error) {
			runs.Add(1)
			<-release
			return Refunded{RefundID: "re_8"}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		river.AddWorker(workers, w)
		rc = e.start(t, cfg)
	}
	// Release the run once the 7 others found it in flight (snoozed, or
	// worked again after a snooze).
	deadline := time.Now().Add(30 * time.Second)
	for {
		var snoozed int
		if err := e.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM "+pgx.Identifier{e.schema, "river_job"}.Sanitize()+" WHERE (metadata->>'snoozes')::int > 0").Scan(&snoozed); err != nil {
			t.Fatal(err)
		}
		if snoozed == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 7 duplicates were snoozed", snoozed)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	rows := waitJobs(t, rc, ids, rivertype.JobStateCompleted)
	if got := runs.Load(); got != 1 {
		t.Errorf("the work ran %d times for 8 concurrent copies, want 1", got)
	}
	for _, r := range rows {
		if got := output(t, r); got.RefundID != "re_8" {
			t.Errorf("job %d output %+v, want the run's", r.ID, got)
		}
	}
}

// A configuration whose claim could outlive River's rescue is refused,
// naming both values.
func TestRiverRescueRefused(t *testing.T) {
	t.Parallel()
	exec := client.New(newMem(), &client.Config{NoCounters: true})
	work := func(context.Context, *river.Job[RefundArgs]) (Refunded, error) { return Refunded{}, nil }
	for _, c := range []struct {
		name string
		cfg  *river.Config
		opts Options
		want []string
	}{
		{"timeout at rescue", &river.Config{JobTimeout: time.Hour, RescueStuckJobsAfter: time.Hour}, Options{}, []string{"(1h0m0s)", "RescueStuckJobsAfter (1h0m0s)"}},
		{"no timeout", &river.Config{JobTimeout: -1}, Options{}, []string{"-1", "RescueStuckJobsAfter (1h0m0s)"}},
		{"worker timeout", &river.Config{RescueStuckJobsAfter: 10 * time.Minute}, Options{Timeout: 15 * time.Minute}, []string{"(15m0s)", "(10m0s)"}},
	} {
		_, err := New(exec, c.cfg, c.opts, work)
		if err == nil {
			t.Errorf("%s: New accepted the configuration", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", c.name, err, w)
			}
		}
	}
	if _, err := New(exec, &river.Config{JobTimeout: time.Minute, RescueStuckJobsAfter: time.Hour}, Options{}, work); err != nil {
		t.Errorf("a timeout below the rescue: %v", err)
	}
}

// A job whose work always fails is tried MaxAttempts times; the
// dead-letter hook fires once and River discards it.
func TestRiverAlwaysFailsDeadLetterOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true})
	var runs, hooks atomic.Int32
	workers := river.NewWorkers()
	cfg := e.config(workers, 1)
	opts := byOrder
	opts.OnDeadLetter = func(ctx context.Context, job *rivertype.JobRow, err error) { hooks.Add(1) }
	w, err := New(exec, cfg, opts, func(ctx context.Context, job *river.Job[RefundArgs]) (Refunded, error) {
		runs.Add(1)
		return Refunded{}, client.Definite(errors.New("card processor unavailable"))
	})
	if err != nil {
		t.Fatal(err)
	}
	river.AddWorker(workers, w)
	rc := e.start(t, cfg)
	ids := insert(t, rc, 1, RefundArgs{OrderID: "ord_fail", Amount: 1}, &river.InsertOpts{MaxAttempts: 3})
	rows := waitJobs(t, rc, ids, rivertype.JobStateDiscarded)
	if got := runs.Load(); got != 3 {
		t.Errorf("the work ran %d times, want 3 (MaxAttempts)", got)
	}
	if got := hooks.Load(); got != 1 {
		t.Errorf("the dead-letter hook fired %d times, want 1", got)
	}
	if rows[0].Attempt != 3 {
		t.Errorf("job attempts %d, want 3", rows[0].Attempt)
	}
}

// The record and the job commit together: a done record always has a
// completed job.
func TestRiverTxCompletesJobWithRecord(t *testing.T) { // not parallel: it sets faultPoint
	e := newEnv(t)
	exec := client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true})
	workers := river.NewWorkers()
	cfg := e.config(workers, 1)
	var seen sync.Map
	w, err := New(exec, cfg, Options{}, func(ctx context.Context, job *river.Job[RefundArgs]) (Refunded, error) {
		return Refunded{RefundID: "re_tx"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Check inside the transaction: the job is completed by the same
	// transaction that records the action.
	prev := faultPoint
	t.Cleanup(func() { faultPoint = prev })
	faultPoint = func(p string) { seen.Store(p, true) }
	river.AddWorker(workers, w)
	rc := e.start(t, cfg)
	ids := insert(t, rc, 1, RefundArgs{OrderID: "ord_tx", Amount: 5}, nil)
	waitJobs(t, rc, ids, rivertype.JobStateCompleted)
	for _, p := range []string{"recorded", "job-completed", "committed"} {
		if _, ok := seen.Load(p); !ok {
			t.Errorf("point %s not passed: the job was not completed in the record's transaction", p)
		}
	}
	recs, err := e.store.List(context.Background(), ledger.Filter{State: ledger.StateDone, Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("done records %v, %v", recs, err)
	}
}

// A job that is no longer running when its action is recorded (here its
// row is gone, as after an operator deleted it) leaves the record done
// all the same: the effect happened.
func TestRiverJobGoneRecordStillDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true})
	workers := river.NewWorkers()
	cfg := e.config(workers, 1)
	ran := make(chan int64, 1)
	w, err := New(exec, cfg, byOrder, func(ctx context.Context, job *river.Job[RefundArgs]) (Refunded, error) {
		if _, err := e.pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{e.schema, "river_job"}.Sanitize()+" WHERE id = $1", job.ID); err != nil {
			return Refunded{}, client.Definite(err)
		}
		ran <- job.ID
		return Refunded{RefundID: "re_gone"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	river.AddWorker(workers, w)
	rc := e.start(t, cfg)
	insert(t, rc, 1, RefundArgs{OrderID: "ord_gone", Amount: 3}, nil)
	<-ran
	deadline := time.Now().Add(30 * time.Second)
	for {
		recs, err := e.store.List(context.Background(), ledger.Filter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 1 && recs[0].State == ledger.StateDone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("records %+v: want one done", recs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
