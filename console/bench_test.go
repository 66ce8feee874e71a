package console_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite"

	"github.com/oncely/oncely/console"
	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// benchSizes are the ledgers the console's pages are timed on, paired:
// 10^3 and 10^6 records.
var benchSizes = [2]int{ledgerbench.Stuck + 1000, 1_000_000}

// pages are the console's pages the benchmarks time.
var pages = []struct{ name, path string }{
	{"attention", "/"},
	{"action", "/action/" + ledgerbench.StuckKey(500)},
	{"search-all", "/search"},
	{"search-run", "/search?run=run-4242"},
	{"search-tool", "/search?tool=refund_order"},
	{"search-key", "/search?key=ab"},
	{"search-state", "/search?state=uncertain"},
	{"search-done", "/search?state=done"},
	{"overview-24h", "/overview?range=24h"},
	{"overview-7d", "/overview?range=7d"},
}

// counterEvery is how often the benchmarks' executors wrote a counter
// record, alternately for each tool, over the week: 2,016 records on the
// large ledger, fewer on the small one (countersIn).
const counterEvery = 5 * time.Minute

// countersIn returns how many counter records a ledger of n done records
// holds: one per counterEvery over the week, at most one per 500 records.
func countersIn(n int) int { return min(n/500, int(7*24*time.Hour/counterEvery)) }

// counterBody is the result of the k-th counter record.
func counterBody(k int) []byte {
	tool := []string{"send_reply", "refund_order"}[k%2]
	return []byte(fmt.Sprintf(`{"tool":%q,"executed":40,"replayed":%d,"merged":1,"reconciled":%d}`, tool, 5+k%7, k%3))
}

func doneKey(i int) string {
	sum := sha256.Sum256([]byte("console-" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// benchPages times each page on the two stores, paired (every iteration
// renders the page on both, so that drift of the machine cancels out of
// the ratio), beside the raw floor of one Get of the same record in the
// large store. It reports small-ns/op, large-ns/op (the page on 10^6
// records), get-ns/op (the floor), large/small and large/get.
// notes are the benchmarks' notes for BENCHMARKS.md (scripts/benchreport
// reads the lines that start with "note: ").
var notes = sync.OnceFunc(func() {
	fmt.Println("note: small is a ledger of 2,000 records, large one of 10^6 (done records settled over the last week, a tenth of them refund_order's, 1,000 uncertain ones, and a counter record every 5 minutes); each page is served through the console's handler (httptest), rendering included, beside one Get on the large ledger (get). The machine was shared with other work: compare the ratios.")
	fmt.Println("note: PostgreSQL is at migration 7 (its partial index of the done and failed records by time) and without Config.RunIndex: a search by run, like a search by tool or key prefix, reads records by time, at most 2,000 a page. The overview reads at most 100 done and 100 failed records per bucket and 2,400 counter records (an equal share per bucket).")
})

func benchPages(b *testing.B, stores [2]ledger.Store) {
	notes()
	var cs [2]*console.Console
	for i, s := range stores {
		c, err := console.New(console.Config{Store: s})
		if err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	serve := func(c *console.Console, path string) {
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
		}
	}
	ctx := context.Background()
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for _, c := range cs { // untimed: connections, prepared statements
				serve(c, p.path)
			}
			var took [3]time.Duration
			for b.Loop() {
				for j, c := range cs {
					t0 := time.Now()
					serve(c, p.path)
					took[j] += time.Since(t0)
				}
				t0 := time.Now()
				if _, err := stores[1].Get(ctx, ledgerbench.StuckKey(500)); err != nil {
					b.Fatal(err)
				}
				took[2] += time.Since(t0)
			}
			n := float64(b.N)
			b.ReportMetric(float64(took[0])/n, "small-ns/op")
			b.ReportMetric(float64(took[1])/n, "large-ns/op")
			b.ReportMetric(float64(took[2])/n, "get-ns/op")
			b.ReportMetric(float64(took[1])/float64(took[0]), "large/small")
			b.ReportMetric(float64(took[1])/float64(took[2]), "large/get")
		})
	}
}

// The console's pages on SQLite ledgers of 10^3 and 10^6 records: done
// records settled over the last week (a tenth of them refund_order's,
// the rest send_reply's), 1000 uncertain ones, and counter records
// (countersIn).
func BenchmarkPagesSQLite(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	var stores [2]ledger.Store
	for i, n := range benchSizes {
		path := filepath.Join(b.TempDir(), "console.db")
		s, err := ledgersqlite.Open(ctx, path, nil)
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000&_synchronous=OFF")
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
			VALUES (?1, ?2, ?3, 'done', 'owner', ?4, ?5, 'fp', 1, ?4, 'sent', 'msg_1', '{"id":"msg_1"}', ?4)`)
		if err != nil {
			b.Fatal(err)
		}
		done := n - ledgerbench.Stuck
		for k := range done {
			settled := now.Add(-time.Duration(k) * (7 * 24 * time.Hour) / time.Duration(done))
			tool := "send_reply"
			if k%10 == 0 {
				tool = "refund_order"
			}
			if _, err := ins.ExecContext(ctx, doneKey(k), tool, fmt.Sprintf("run-%d", k/10), settled.UnixMilli(), settled.Add(30*24*time.Hour).UnixMilli()); err != nil {
				b.Fatal(err)
			}
		}
		for k := range countersIn(done) {
			at := now.Add(-time.Duration(k) * counterEvery)
			if _, err := tx.ExecContext(ctx, `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at,
				fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
				VALUES (?1, ?2, ?2, 'done', 'owner', ?3, ?4, ?2, 1, ?3, '', '', ?5, ?3)`,
				fmt.Sprintf("%s/bench/%d", ledger.CountersRun, k), ledger.CountersRun, at.UnixMilli(),
				at.Add(8*24*time.Hour).UnixMilli(), counterBody(k)); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "ANALYZE"); err != nil {
			b.Fatal(err)
		}
		db.Close()
		s, err = ledgersqlite.Open(ctx, path, &ledgersqlite.Config{Synchronous: ledgersqlite.SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ledgerbench.AddStuck(b, s, now.Add(-3*time.Hour))
		stores[i] = s
	}
	benchPages(b, stores)
}

// The same pages on PostgreSQL ledgers of 10^3 and 10^6 records, without
// Config.RunIndex (the default): a search by run reads the records by
// time, a bounded number a page, as a search by tool does.
func BenchmarkPagesPostgres(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	var stores [2]ledger.Store
	for i, n := range benchSizes {
		pool := pgtest.Pool(b)
		cfg := &ledgerpg.Config{Schema: pgtest.Schema(b, pool)}
		if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
			b.Fatal(err)
		}
		s, err := ledgerpg.New(pool, cfg)
		if err != nil {
			b.Fatal(err)
		}
		table := pgx.Identifier{cfg.Schema, ledgerpg.DefaultTable}.Sanitize()
		done := n - ledgerbench.Stuck
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
			SELECT encode(sha256(convert_to('console-' || i, 'UTF8')), 'hex'),
				CASE WHEN i % 10 = 0 THEN 'refund_order' ELSE 'send_reply' END, 'run-' || (i / 10), 'done', 'owner',
				t, t + interval '30 days', 'fp', 1, t, 'sent', 'msg_1', '{"id":"msg_1"}'::bytea, t
			FROM (SELECT i, $2::timestamptz - (interval '7 days' * i / $1::int) AS t FROM generate_series(0, $1::int - 1) AS i) AS g`,
			done, now); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
			SELECT $1 || '/bench/' || k, $1, $1, 'done', 'owner', t, t + interval '8 days', $1, 1, t, '', '',
				convert_to(format('{"tool":%s,"executed":40,"replayed":%s,"merged":1,"reconciled":%s}',
					to_json(CASE WHEN k % 2 = 0 THEN 'send_reply' ELSE 'refund_order' END), 5 + k % 7, k % 3), 'UTF8'), t
			FROM (SELECT k, $2::timestamptz - interval '5 minutes' * k AS t FROM generate_series(0, $3::int - 1) AS k) AS g`,
			ledger.CountersRun, now, countersIn(done)); err != nil {
			b.Fatal(err)
		}
		ledgerbench.AddStuck(b, s, now.Add(-3*time.Hour))
		if _, err := pool.Exec(ctx, `ANALYZE `+table); err != nil {
			b.Fatal(err)
		}
		stores[i] = s
		if i == 1 {
			var settled, counters, all int64
			if err := pool.QueryRow(ctx, `SELECT pg_relation_size($1::regclass), pg_relation_size($2::regclass), pg_total_relation_size($3::regclass)`,
				pgx.Identifier{cfg.Schema, ledgerpg.DefaultTable + "_settled"}.Sanitize(),
				pgx.Identifier{cfg.Schema, ledgerpg.DefaultTable + "_counters"}.Sanitize(), table).Scan(&settled, &counters, &all); err != nil {
				b.Fatal(err)
			}
			fmt.Printf("note: on PostgreSQL, among 10^6 records (built in bulk, so its indexes are packed), the settled records' index (migration 7) takes %d MB, the counter records' %d kB, the table and all its indexes %d MB.\n",
				settled>>20, counters>>10, all>>20)
		}
	}
	benchPages(b, stores)
}
