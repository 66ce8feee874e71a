package ledgerredis_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// rawRecord stands for a record in the raw floor: about the size of a done
// record's fields.
var rawRecord = strings.Repeat("x", 200)

// benchSetup returns a client, a store on it under a fresh prefix, and an
// executor on the store with a send_reply tool that only reports an
// effect.
func benchSetup(b *testing.B) (*redis.Client, *ledgerredis.Store, *client.Executor) {
	url := redistest.URL(b)
	rc := redistest.NewClient(b, url)
	prefix := redistest.Prefix(b, url)
	store := ledgerredis.New(rc, &ledgerredis.Config{Prefix: prefix})
	exec, _ := newExecutor(b, store)
	return rc, store, exec
}

// The raw floor of a fresh action: SET NX GET (claim, answering with any
// existing value) and SET XX (record), two round trips through the same
// client. Beside it, the store (Claim + Complete) and the executor, each on
// a new key, with their ratios to the floor.
func BenchmarkFreshPaired(b *testing.B) {
	ctx := context.Background()
	rc, store, exec := benchSetup(b)
	prefix := "{" + redistest.Prefix(b, redistest.URL(b)) + "}:raw:"
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	paired(b,
		func(i int) {
			key := prefix + strconv.Itoa(i)
			if err := rc.SetArgs(ctx, key, rawRecord, redis.SetArgs{Mode: "NX", Get: true, TTL: time.Hour}).Err(); err != redis.Nil {
				b.Fatal("SET NX GET:", err)
			}
			if err := rc.SetArgs(ctx, key, rawRecord, redis.SetArgs{Mode: "XX", TTL: time.Hour}).Err(); err != nil {
				b.Fatal("SET XX:", err)
			}
		},
		func(i int) {
			now := time.Now()
			p := ledger.ClaimParams{Key: "store-" + strconv.Itoa(i), Tool: "send_reply", RunID: "run-1", Owner: "owner",
				LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
			if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
				b.Fatal(res, err)
			}
			if err := store.Complete(ctx, p.Key, p.Owner, done); err != nil {
				b.Fatal(err)
			}
		},
		func(i int) {
			if r, err := exec.Execute(ctx, "run-1", reply(strconv.Itoa(i), "fresh")); err != nil || r.Outcome != client.Executed {
				b.Fatal(r, err)
			}
		})
}

// The raw floor of a replay: one GET of a key that holds a value, the
// cheapest command a hand-written replay could be (a hand-written claim
// that also takes new keys would send SET NX GET, a write). Beside it, a
// Claim on a done key and an executor call answered from the done record.
func BenchmarkReplayPaired(b *testing.B) {
	ctx := context.Background()
	rc, store, exec := benchSetup(b)
	key := "{" + redistest.Prefix(b, redistest.URL(b)) + "}:raw:replay"
	if err := rc.Set(ctx, key, rawRecord, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	p := ledger.ClaimParams{Key: "replay", Tool: "send_reply", RunID: "run-1", Owner: "owner",
		LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	if _, err := store.Claim(ctx, p); err != nil {
		b.Fatal(err)
	}
	if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}); err != nil {
		b.Fatal(err)
	}
	if r, err := exec.Execute(ctx, "run-1", reply("replay", "first")); err != nil || r.Outcome != client.Executed {
		b.Fatal(r, err)
	}
	p.Owner = "owner-2"
	paired(b,
		func(int) {
			if v, err := rc.Get(ctx, key).Result(); err != nil || v != rawRecord {
				b.Fatal("GET:", err)
			}
		},
		func(int) {
			if res, err := store.Claim(ctx, p); err != nil || res.Claimed {
				b.Fatal(res, err)
			}
		},
		func(int) {
			if r, err := exec.Execute(ctx, "run-1", reply("replay", "again")); err != nil || r.Outcome != client.AlreadyDone {
				b.Fatal(r, err)
			}
		})
}

// paired runs the raw floor, the store and the executor once per
// iteration, in an order that rotates so that none always goes first, and
// reports the time of each and their ratios to the floor.
func paired(b *testing.B, raw, store, execute func(i int)) {
	fns := []func(int){raw, store, execute}
	var took [3]time.Duration
	for i := range b.N {
		for j := range fns {
			k := (i + j) % len(fns)
			t0 := time.Now()
			fns[k](i)
			took[k] += time.Since(t0)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(took[0])/n, "raw-ns/op")
	b.ReportMetric(float64(took[1])/n, "store-ns/op")
	b.ReportMetric(float64(took[2])/n, "execute-ns/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "store/raw")
	b.ReportMetric(float64(took[2])/float64(took[0]), "execute/raw")
}

// 16 callers of fresh actions at once through one executor; see
// ledgerbench.ParallelFresh. Compare with BenchmarkFreshPaired's floor.
func BenchmarkParallelFresh(b *testing.B) {
	_, store, _ := benchSetup(b)
	ledgerbench.ParallelFresh(b, store, 16)
}

// 64 callers in this process, each with its own executor on one Redis,
// make the same call at once; the tool takes 50 ms. A waiter is woken in
// this process by the holder's settle. See ledgerbench.Contention;
// BenchmarkContentionProcesses is the case of callers in separate
// processes.
func BenchmarkContention(b *testing.B) {
	_, store, _ := benchSetup(b)
	ledgerbench.Contention(b, func() ledger.Store { return store }, 64, 50*time.Millisecond)
}

// Environment of BenchmarkContentionProcesses's caller processes.
const (
	envBenchURL    = "LEDGERREDIS_BENCH_URL"
	envBenchPrefix = "LEDGERREDIS_BENCH_PREFIX"
)

// benchChild opens the Store of a caller process of
// BenchmarkContentionProcesses.
func benchChild() (ledger.Store, error) {
	opts, err := redis.ParseURL(os.Getenv(envBenchURL))
	if err != nil {
		return nil, err
	}
	return ledgerredis.New(redis.NewClient(opts), &ledgerredis.Config{Prefix: os.Getenv(envBenchPrefix)}), nil
}

// 64 callers, each an OS process with its own client of one Redis, make
// the same call at once; the tool takes 50 ms. A waiter learns that the
// holder settled through the ledger's watch (the settle's PUBLISH), or in
// poll by polling it. See ledgerbench.ContentionProcesses.
func BenchmarkContentionProcesses(b *testing.B) {
	url := redistest.URL(b)
	for _, mode := range []string{"watch", "poll"} {
		b.Run(mode, func(b *testing.B) {
			env := []string{envBenchURL + "=" + url, envBenchPrefix + "=" + redistest.Prefix(b, url)}
			ledgerbench.ContentionProcesses(b, env, 64, 50*time.Millisecond, mode == "poll")
		})
	}
}
