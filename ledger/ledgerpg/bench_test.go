package ledgerpg_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// actionKey returns a key shaped like the executor's (hex sha256).
func actionKey(prefix string, i int) string {
	sum := sha256.Sum256([]byte(prefix + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// paired measures, within every iteration, the raw floor, the store and
// the executor in turn, through one pool on one table (the store's),
// with the statements sent in mode, and reports their times and ratios.
// Measuring the three side by side keeps the drift of a shared machine
// out of the ratios.
func paired(b *testing.B, mode pgx.QueryExecMode, raw, store, execute func(i int)) {
	var rawT, storeT, execT time.Duration
	for i := range b.N {
		t0 := time.Now()
		raw(i)
		t1 := time.Now()
		store(i)
		t2 := time.Now()
		execute(i)
		t3 := time.Now()
		rawT, storeT, execT = rawT+t1.Sub(t0), storeT+t2.Sub(t1), execT+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(rawT)/n, "raw-ns/op")
	b.ReportMetric(float64(storeT)/n, "store-ns/op")
	b.ReportMetric(float64(execT)/n, "execute-ns/op")
	b.ReportMetric(float64(storeT)/float64(rawT), "store/raw")
	b.ReportMetric(float64(execT)/float64(rawT), "execute/raw")
}

// benchSetup is a store on its own table, an executor on it, and the
// table's name.
func benchSetup(b *testing.B, mode pgx.QueryExecMode) (*ledgerpg.Store, *client.Executor, func(string) client.Call, string) {
	pool := pgtest.Pool(b)
	schema := pgtest.Schema(b, pool)
	s := newStore(b, pool, &ledgerpg.Config{Schema: schema, ExecMode: mode})
	exec, call, _ := newExecutor(b, s, nil)
	return s, exec, call, pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()
}

var benchModes = []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeCacheStatement}

// A new action: the raw floor is the INSERT of a pending row and the
// conditional UPDATE that records it done, as two statements through the
// same pool; the store does Claim and Complete; the executor runs a call
// of a tool that does nothing.
func BenchmarkFreshPaired(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			ctx := context.Background()
			s, exec, call, table := benchSetup(b, mode)
			pool := pgtest.Pool(b)
			insert := `INSERT INTO ` + table + ` (key, tool, run_id, state, owner, lease_until, expires_at, fingerprint, attempt, attempt_at, updated_at)
				VALUES ($1, 'send_reply', 'run-1', 'pending', 'owner', $2, $3, 'fp', 1, $4, $4)`
			update := `UPDATE ` + table + ` SET state = 'done', summary = $3, ref = $4, result = $5, truncated = false, lease_until = $6, updated_at = $6
				WHERE key = $1 AND owner = $2 AND state = 'pending' AND expires_at > $6`
			result := []byte(`{"id":"msg_1"}`)
			done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: result}
			paired(b, mode, func(i int) {
				now := time.Now()
				key := actionKey("raw", i)
				if _, err := pool.Exec(ctx, insert, mode, key, now.Add(time.Minute), now.Add(time.Hour), now); err != nil {
					b.Fatal(err)
				}
				if tag, err := pool.Exec(ctx, update, mode, key, "owner", "sent", "msg_1", result, time.Now()); err != nil || tag.RowsAffected() != 1 {
					b.Fatal(tag, err)
				}
			}, func(i int) {
				now := time.Now()
				p := ledger.ClaimParams{Key: actionKey("store", i), Tool: "send_reply", RunID: "run-1", Owner: "owner",
					LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
				if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
					b.Fatal(res, err)
				}
				if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
					b.Fatal(err)
				}
			}, func(i int) {
				if r, err := exec.Execute(ctx, "run-1", call(strconv.Itoa(i))); err != nil || r.Outcome != client.Executed {
					b.Fatal(r, err)
				}
			})
		})
	}
}

// A replay of a done action: the raw floor is one SELECT of the record by
// key; the store does a Claim the record refuses; the executor answers a
// repeated call.
func BenchmarkReplayPaired(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode.String(), func(b *testing.B) {
			ctx := context.Background()
			s, exec, call, table := benchSetup(b, mode)
			pool := pgtest.Pool(b)
			if r, err := exec.Execute(ctx, "run-1", call("replay")); err != nil || r.Outcome != client.Executed {
				b.Fatal(r, err)
			}
			rec, err := s.List(ctx, ledger.Filter{})
			if err != nil || len(rec) != 1 {
				b.Fatal(rec, err)
			}
			key := rec[0].Key
			get := `SELECT key, tool, run_id, state, owner, lease_until, expires_at, fingerprint, attempt, attempt_at,
				summary, ref, result, truncated, reason, updated_at FROM ` + table + ` WHERE key = $1 AND expires_at > $2`
			paired(b, mode, func(int) {
				var (
					r     ledger.Record
					state string
				)
				if err := pool.QueryRow(ctx, get, mode, key, time.Now()).Scan(&r.Key, &r.Tool, &r.RunID, &state, &r.Owner,
					&r.LeaseUntil, &r.ExpiresAt, &r.Fingerprint, &r.Attempt, &r.AttemptAt, &r.Summary, &r.Ref, &r.Result,
					&r.Truncated, &r.Reason, &r.UpdatedAt); err != nil {
					b.Fatal(err)
				}
			}, func(int) {
				now := time.Now()
				p := ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner-2",
					LeaseUntil: now.Add(time.Minute), Fingerprint: rec[0].Fingerprint, ExpiresAt: now.Add(time.Hour)}
				if res, err := s.Claim(ctx, p); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
					b.Fatal(res, err)
				}
			}, func(int) {
				if r, err := exec.Execute(ctx, "run-1", call("replay")); err != nil || r.Outcome != client.AlreadyDone {
					b.Fatal(r, err)
				}
			})
		})
	}
}

// 16 callers of fresh actions at once through one executor; see
// ledgerbench.ParallelFresh. Compare with BenchmarkFreshPaired's floor.
func BenchmarkParallelFresh(b *testing.B) {
	s, _, _, _ := benchSetup(b, pgx.QueryExecModeCacheStatement)
	ledgerbench.ParallelFresh(b, s, 16)
}

// 64 callers in this process, each with its own executor on one table,
// make the same call at once; the tool takes 50 ms. A waiter is woken in
// this process by the holder's settle. See ledgerbench.Contention;
// BenchmarkContentionProcesses is the case of callers in separate
// processes.
func BenchmarkContention(b *testing.B) {
	s, _, _, _ := benchSetup(b, pgx.QueryExecModeCacheStatement)
	ledgerbench.Contention(b, func() ledger.Store { return s }, 64, 50*time.Millisecond)
}

// scaleStores holds one store per size, on a table filled once per test
// binary run (a million rows take a while) and shared by the -count runs;
// its schema is dropped by pgtest.Main.
var scaleStores struct {
	sync.Mutex
	stores map[int]*ledgerpg.Store
}

// scaleStore returns a store on a table holding n done records, keyed
// actionKey("scale-", 0..n-1).
func scaleStore(b *testing.B, n int) *ledgerpg.Store {
	scaleStores.Lock()
	defer scaleStores.Unlock()
	if s, ok := scaleStores.stores[n]; ok {
		return s
	}
	ctx := context.Background()
	pool, schema := pgtest.ForExamples()
	cfg := &ledgerpg.Config{Schema: schema, ExecMode: pgx.QueryExecModeCacheStatement}
	s := newStore(b, pool, cfg)
	table := pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()
	if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
		fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
		SELECT encode(sha256(convert_to('scale-' || i, 'UTF8')), 'hex'), 'send_reply', 'run-' || (i / 10), 'done', 'owner',
			now(), now() + interval '1 day', 'fp', 1, now(), 'sent', 'msg_1', '{"id":"msg_1"}'::bytea, now()
		FROM generate_series(0, $1::int - 1) AS i`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+table); err != nil {
		b.Fatal(err)
	}
	if scaleStores.stores == nil {
		scaleStores.stores = map[int]*ledgerpg.Store{}
	}
	scaleStores.stores[n] = s
	return s
}

// Claim latency with 10^3 and 10^6 records in the table, paired: every
// iteration makes the same claim on both tables, so that drift of the
// machine cancels out of the ratio. replay claims a done key (drawn from
// 1000 spread over the table); fresh claims and completes a new key. The
// two sizes should cost the same (large/small near 1).
func BenchmarkScale(b *testing.B) {
	sizes := [2]int{1_000, 1_000_000}
	stores := [2]*ledgerpg.Store{scaleStore(b, sizes[0]), scaleStore(b, sizes[1])}
	ledgerbench.Scale(b, sizes, [2]ledger.Store{stores[0], stores[1]},
		func(n, i int) string { return actionKey("scale-", (i%1000)*(n/1000)) },
		func(int) string { return actionKey("scale-fresh-", int(scaleFresh.Add(1))) })
}

// scaleFresh numbers the fresh keys of BenchmarkScale across its runs.
var scaleFresh atomic.Int64

// Fresh actions while Purge deletes 20,000 expired records, PurgeBatch a
// statement, beside as many with no purge running; see
// ledgerbench.PurgeBlocking.
func BenchmarkPurgeBlocking(b *testing.B) {
	const expired = 20_000
	ctx := context.Background()
	s, _, _, table := benchSetup(b, pgx.QueryExecModeCacheStatement)
	pool := pgtest.Pool(b)
	ledgerbench.PurgeBlocking(b, s, func(round int) int {
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
			SELECT encode(sha256(convert_to('expired-' || $1::int || '-' || i, 'UTF8')), 'hex'), 'send_reply', 'run-' || (i / 10), 'done', 'owner',
				now() - interval '25 hours', now() - interval '1 hour', 'fp', 1, now() - interval '25 hours', 'sent', 'msg_1', '{"id":"msg_1"}'::bytea, now() - interval '25 hours'
			FROM generate_series(0, $2::int - 1) AS i`, round, expired); err != nil {
			b.Fatal(err)
		}
		return expired
	})
}

// Environment of BenchmarkContentionProcesses's caller processes.
const (
	envBenchURL    = "LEDGERPG_BENCH_URL"
	envBenchSchema = "LEDGERPG_BENCH_SCHEMA"
)

// benchChild opens the Store of a caller process of
// BenchmarkContentionProcesses: a pool of one connection (the listener of
// Watch is a second one).
func benchChild() (ledger.Store, error) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv(envBenchURL))
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return ledgerpg.New(pool, &ledgerpg.Config{Schema: os.Getenv(envBenchSchema), ExecMode: pgx.QueryExecModeCacheStatement})
}

// 64 callers, each an OS process with its own pool, make the same call at
// once on one table; the tool takes 50 ms. A waiter learns that the holder
// settled through the ledger's watch (LISTEN/NOTIFY), or in poll by
// polling it. The processes take two connections each (pool and
// listener), more than the shared server may have free, so the benchmark
// starts a server of its own (pgtest.Start: max_connections 200, fsync
// off). See ledgerbench.ContentionProcesses.
func BenchmarkContentionProcesses(b *testing.B) {
	ctx := context.Background()
	url, err := contention.start()
	if err != nil {
		b.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	cfg := &ledgerpg.Config{Schema: "contention"}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS contention"); err != nil {
		b.Fatal(err)
	}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"watch", "poll"} {
		b.Run(mode, func(b *testing.B) {
			env := []string{envBenchURL + "=" + url, envBenchSchema + "=" + cfg.Schema}
			ledgerbench.ContentionProcesses(b, env, 64, 50*time.Millisecond, mode == "poll")
		})
	}
}

// contention is the server of BenchmarkContentionProcesses, started once
// per test binary (by its first run) and stopped by TestMain.
var contention contentionServer

type contentionServer struct {
	mu  sync.Mutex
	srv *pgtest.Server
}

func (c *contentionServer) start() (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		srv, err := pgtest.Start(context.Background())
		if err != nil {
			return "", err
		}
		c.srv = srv
	}
	return c.srv.URL, nil
}

func (c *contentionServer) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srv == nil {
		return nil
	}
	return c.srv.Stop()
}

// 16 callers of fresh actions at once, as BenchmarkParallelFresh, with
// the settles of this version, which notify only a watched record (none
// here), beside those of the version before, which notified every settle
// and so took the cluster's NOTIFY lock at each commit: compare their
// ns/op in one run.
func BenchmarkParallelFreshNotify(b *testing.B) {
	for _, every := range []bool{false, true} {
		name := "watched-only"
		if every {
			name = "every-settle"
		}
		b.Run(name, func(b *testing.B) {
			pool := pgtest.Pool(b)
			schema := pgtest.Schema(b, pool)
			s := newStore(b, pool, &ledgerpg.Config{Schema: schema, ExecMode: pgx.QueryExecModeCacheStatement})
			if every {
				s = ledgerpg.NotifyEverySettle(s, schema)
			}
			ledgerbench.ParallelFresh(b, s, 16)
		})
	}
}
