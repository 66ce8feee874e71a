package oncelyriver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/oncelyfunc"
)

func newMem() ledger.Store { return ledgermem.New(nil) }

// The child process: a River worker on the test's schema that makes the
// effect (a row in the effects table, committed on its own, as a
// provider's would be) and is killed with SIGKILL at the point named by
// childEnv: after the effect ("effect"), inside the completing
// transaction after the record ("recorded"), after the job's completion
// ("job-completed"), or after the commit ("committed").
const (
	childEnv    = "ONCELY_RIVER_CHILD"
	childSchema = "ONCELY_RIVER_CHILD_SCHEMA"
	childURL    = "ONCELY_RIVER_CHILD_URL"
)

// rescueAfter is the rescue of the crash tests: the dead child's job is
// rescued this long after its attempt began. The child's job timeout is
// below it, as New requires.
const rescueAfter = 2 * time.Second

func effects(schema string) string { return pgx.Identifier{schema, "effects"}.Sanitize() }

// reconciler looks the effect up by its downstream key, as an adapter
// looks a provider's object up.
func reconciler(pool *pgxpool.Pool, schema string) client.Reconciler {
	return client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+effects(schema)+" WHERE key = $1", inv.DownstreamKey).Scan(&n); err != nil {
			return client.Reconciliation{}, err
		}
		if n > 0 {
			return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "refund found"}}, nil
		}
		return client.Reconciliation{Verdict: client.VerdictAbsent}, nil
	})
}

// work makes the effect: one row per downstream key.
func work(pool *pgxpool.Pool, schema string) func(context.Context, *river.Job[RefundArgs]) (Refunded, error) {
	return func(ctx context.Context, job *river.Job[RefundArgs]) (Refunded, error) {
		key := oncelyfunc.DownstreamKey(ctx)
		if _, err := pool.Exec(ctx, "INSERT INTO "+effects(schema)+" (key, order_id) VALUES ($1, $2)", key, job.Args.OrderID); err != nil {
			return Refunded{}, client.Definite(err)
		}
		if p := os.Getenv(childEnv); p == "effect" || p == "plain:effect" {
			kill()
		}
		return Refunded{RefundID: "re_" + job.Args.OrderID}, nil
	}
}

func kill() {
	fmt.Println("KILLING")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func childMain() int {
	ctx := context.Background()
	point, schema := os.Getenv(childEnv), os.Getenv(childSchema)
	pool, err := pgxpool.New(ctx, os.Getenv(childURL))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	store, err := ledgerpg.New(pool, &ledgerpg.Config{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return 1
	}
	// "plain:" points run on the ledgerpg Store without TxStore, as on
	// any other ledger: the record and the job's completion are apart.
	var ledgerStore ledger.Store = NewTxStore(store, pool)
	if p, ok := strings.CutPrefix(point, "plain:"); ok {
		point, ledgerStore = p, store
	}
	faultPoint = func(p string) {
		if p == point {
			kill()
		}
	}
	exec := client.New(ledgerStore, &client.Config{NoCounters: true})
	workers := river.NewWorkers()
	cfg := &river.Config{Schema: schema, Workers: workers, JobTimeout: rescueAfter / 2, RescueStuckJobsAfter: rescueAfter,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 1}}, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond}
	opts := byOrder
	opts.Reconciler = reconciler(pool, schema)
	w, err := New(exec, cfg, opts, work(pool, schema))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	river.AddWorker(workers, w)
	rc, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	if err := rc.Start(ctx); err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("READY")
	select {}
}

// A worker process killed (SIGKILL) at each point between its effect and
// its job's completion: River rescues the job, the rescued attempt
// settles the action once (reconciling the dead claim, or replaying the
// committed record), the job ends completed, and the dead worker's late
// completion is refused. Points are enumerated in the order they are
// passed: with TxStore, after the effect, after the record inside the
// transaction, after the job's completion inside it, after the commit,
// and when the worker returns; without it (plain:, as on any ledger but
// ledgerpg in River's database), after the effect, and after the record
// when the worker returns, before River completes the job.
func TestRiverKillAtEveryPoint(t *testing.T) {
	for _, point := range []string{"effect", "recorded", "job-completed", "committed", "done", "plain:effect", "plain:done"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			if _, err := e.pool.Exec(ctx, "CREATE TABLE "+effects(e.schema)+" (key text, order_id text)"); err != nil {
				t.Fatal(err)
			}
			ins, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{Schema: e.schema})
			if err != nil {
				t.Fatal(err)
			}
			ids := insert(t, ins, 1, RefundArgs{OrderID: "ord_kill_" + strings.ReplaceAll(point, ":", "_"), Amount: 9}, &river.InsertOpts{MaxAttempts: 5})

			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+point, childSchema+"="+e.schema, childURL+"="+e.pool.Config().ConnString())
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var lines []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child ended with %v, output %q; want killed by SIGKILL at %s", err, lines, point)
			}
			if !strings.Contains(strings.Join(lines, "\n"), "KILLING") {
				t.Fatalf("child output %q: it did not reach %s", lines, point)
			}
			var n int
			if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+effects(e.schema)).Scan(&n); err != nil || n != 1 {
				t.Fatalf("effects after the kill: %d, %v; want 1", n, err)
			}
			recs, err := e.store.List(ctx, ledger.Filter{Limit: 10})
			if err != nil || len(recs) != 1 {
				t.Fatalf("records after the kill: %+v, %v", recs, err)
			}
			dead := recs[0]
			// The dead worker's leadership would expire with River's leader
			// TTL; drop it so that this process leads and rescues at once.
			if _, err := e.pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{e.schema, "river_leader"}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			// River rescues a job that has run rescueAfter: poll the
			// database's clock until the killed attempt is that old.
			deadline := time.Now().Add(30 * time.Second)
			for {
				var stuck bool
				if err := e.pool.QueryRow(ctx, "SELECT coalesce(bool_and(state <> 'running' OR attempted_at < now() - $1::interval), true) FROM "+
					pgx.Identifier{e.schema, "river_job"}.Sanitize(), rescueAfter.String()).Scan(&stuck); err != nil {
					t.Fatal(err)
				}
				if stuck {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the killed attempt never became old enough to rescue")
				}
				time.Sleep(50 * time.Millisecond)
			}
			exec := client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true})
			workers := river.NewWorkers()
			cfg := e.config(workers, 1)
			cfg.JobTimeout, cfg.RescueStuckJobsAfter = rescueAfter/2, rescueAfter
			opts := byOrder
			opts.Reconciler = reconciler(e.pool, e.schema)
			w, err := New(exec, cfg, opts, work(e.pool, e.schema))
			if err != nil {
				t.Fatal(err)
			}
			river.AddWorker(workers, w)
			rc := e.start(t, cfg)
			waitJobs(t, rc, ids, rivertype.JobStateCompleted)
			if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+effects(e.schema)).Scan(&n); err != nil || n != 1 {
				t.Errorf("effects after the redelivery: %d, %v; want 1", n, err)
			}
			rec, err := e.store.Get(ctx, dead.Key)
			if err != nil || rec.State != ledger.StateDone {
				t.Fatalf("record after the redelivery: %+v, %v; want done", rec, err)
			}
			// The dead worker's completion, arriving late, is refused.
			if dead.State == ledger.StatePending {
				if rec.Owner == dead.Owner {
					t.Fatalf("the record is still the dead owner's: %+v", rec)
				}
				err := e.store.Complete(ctx, dead.Key, dead.Owner, ledger.Completion{Summary: "late"})
				if !errors.Is(err, ledger.ErrNotOwner) {
					t.Errorf("the dead owner's late completion: %v, want ledger.ErrNotOwner", err)
				}
			} else if dead.State != ledger.StateDone {
				t.Errorf("record after the kill %s, want pending or done", dead.State)
			}
		})
	}
}
