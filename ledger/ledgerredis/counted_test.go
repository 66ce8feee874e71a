package ledgerredis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// countServer is a redis-server of this test binary's own, started once:
// the counted tests read its INFO commandstats, which other users of a
// shared server would add to.
var countServer struct {
	once sync.Once
	url  string
	err  error
	mu   sync.Mutex // one counted measure at a time
}

func ownCountServer(t *testing.T) string {
	t.Helper()
	countServer.once.Do(func() {
		srv, err := redistest.StartBinary(context.Background(), "redis-server", "redis-server")
		if err != nil {
			countServer.err = err
			return
		}
		stopAtExit(srv)
		countServer.url = srv.URL
	})
	if countServer.err != nil {
		t.Fatal(countServer.err)
	}
	return countServer.url
}

// commandCounts returns the server's count of calls per command (INFO
// commandstats, which counts the commands scripts run too).
func commandCounts(t *testing.T, rc *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				out[strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return out
}

// counted runs fn and returns the commands the server executed meanwhile,
// by name, less the INFO that reads them.
func counted(t *testing.T, rc *redis.Client, fn func()) map[string]int64 {
	t.Helper()
	before := commandCounts(t, rc)
	fn()
	after := commandCounts(t, rc)
	delta := map[string]int64{}
	for name, n := range after {
		if d := n - before[name]; d > 0 {
			delta[name] = d
		}
	}
	delta["info"]--
	if delta["info"] <= 0 {
		delete(delta, "info")
	}
	return delta
}

func total(m map[string]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// fillRuns writes n records of runs "run-0" to "run-<runs-1>" through
// Claim and Complete (every fourth left pending), pipelined by 8 callers.
func fillRuns(t *testing.T, store *ledgerredis.Store, now time.Time, from, n, runs int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 8 {
				p := ledger.ClaimParams{Key: fmt.Sprintf("%064x", i), Tool: "send_reply", RunID: "run-" + strconv.Itoa(i%runs),
					Owner: ledger.NewOwner(), LeaseUntil: now.Add(time.Minute), Fingerprint: strings.Repeat("f", 64), ExpiresAt: now.Add(24 * time.Hour)}
				if _, err := store.Claim(ctx, p); err != nil {
					t.Error(err)
					return
				}
				if i%4 == 0 {
					continue
				}
				if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// A listing's reads do not grow with the ledger: the commands the server
// runs for one page of one run, of one state, and of every state, counted
// on a server of the test's own (INFO commandstats) in a ledger of 800
// records and again after it grew to 8,000 (the run listed keeps 20
// records), are the same; and a page of one run reads (HGETALL) no more
// records than the page and a few a bucket, whatever the ledger holds.
func TestListingReadsDoNotGrowWithLedger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := ownCountServer(t)
	// The server's counts are this test's alone while it runs.
	countServer.mu.Lock()
	defer countServer.mu.Unlock()
	rc := redistest.NewClient(t, url)
	now := time.Now()
	store := ledgerredis.New(rc, &ledgerredis.Config{Clock: clock.NewFake(now), Prefix: redistest.Prefix(t, url)})
	filters := map[string]ledger.Filter{
		"run":            {RunID: "run-7", Limit: 10},
		"run, next page": {RunID: "run-7", Limit: 10}, // After set below
		"state":          {State: ledger.StateDone, Limit: 10},
		"every state":    {Limit: 10},
	}
	measure := func() map[string]map[string]int64 {
		// The first List of a Store checks the buckets' markers once.
		if _, err := store.List(ctx, ledger.Filter{Limit: 1}); err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]int64{}
		for name, f := range filters {
			if name == "run, next page" {
				first, err := store.List(ctx, filters["run"])
				if err != nil || len(first) != 10 {
					t.Fatalf("first page of run-7: %d records, %v", len(first), err)
				}
				f.After = ledger.CursorOf(&first[9])
			}
			out[name] = counted(t, rc, func() {
				recs, err := store.List(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				if len(recs) != 10 {
					t.Fatalf("List(%s): %d records, want 10", name, len(recs))
				}
				for _, r := range recs {
					if f.RunID != "" && r.RunID != f.RunID {
						t.Fatalf("List(%s) returned a record of %s", name, r.RunID)
					}
				}
			})
		}
		return out
	}
	// run-7 holds 20 records in both ledgers: 800 records of 40 runs,
	// then 7,200 more of runs 40 to 399.
	fillRuns(t, store, now, 0, 800, 40)
	small := measure()
	fillRunsFrom(t, store, now, 800, 7200, 40, 400)
	large := measure()
	for name := range filters {
		t.Logf("%s: %d commands at 800 records %v, %d at 8,000 %v", name, total(small[name]), small[name], total(large[name]), large[name])
		if total(large[name]) > total(small[name]) {
			t.Errorf("List(%s): %d commands at 8,000 records, %d at 800: the reads grow with the ledger", name, total(large[name]), total(small[name]))
		}
	}
	// Each bucket's index is asked for its share of the page and a few
	// more (listmerge): at most the page and 4 a bucket.
	if n := large["run"]["hgetall"]; n > 10+4*ledgerredis.DefaultSpread {
		t.Errorf("a page of 10 records of one run read %d records", n)
	}
}

// fillRunsFrom writes n records from index from, of runs first to runs-1.
func fillRunsFrom(t *testing.T, store *ledgerredis.Store, now time.Time, from, n, first, runs int) {
	t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 8 {
				run := first + i%(runs-first)
				p := ledger.ClaimParams{Key: fmt.Sprintf("%064x", i), Tool: "send_reply", RunID: "run-" + strconv.Itoa(run),
					Owner: ledger.NewOwner(), LeaseUntil: now.Add(time.Minute), Fingerprint: strings.Repeat("f", 64), ExpiresAt: now.Add(24 * time.Hour)}
				if _, err := store.Claim(ctx, p); err != nil {
					t.Error(err)
					return
				}
				if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// owner returns an owner token as ledger.NewOwner makes it on a cloud
// host (106 bytes: a random part, the process id and start, the host name
// and the machine id).
func owner(i int) string {
	return fmt.Sprintf("%032x.%d.%d@%s/%s", i, 41234, 5506770, "ip-172-31-22-10.eu-west-1.compute.internal", "6301d0c8f7ac6b80")
}

// The memory of a done record without a result, as the executor writes
// it (a 64-character action key and fingerprint, an owner token of a
// cloud host, a short summary and reference): MEMORY USAGE (SAMPLES
// 0) of every key of the ledger, its records and its index sets, summed
// over 10^4 records and divided by their number, on a server of the
// test's own with its default settings. It must stay under 1 KiB; the
// figure is logged.
func TestMemoryPerRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := ownCountServer(t)
	countServer.mu.Lock()
	defer countServer.mu.Unlock()
	rc := redistest.NewClient(t, url)
	prefix := redistest.Prefix(t, url)
	now := time.Now()
	store := ledgerredis.New(rc, &ledgerredis.Config{Clock: clock.NewFake(now), Prefix: prefix})
	const n = 10_000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				p := ledger.ClaimParams{Key: fmt.Sprintf("%064x", i), Tool: "send_reply", RunID: "run-" + strconv.Itoa(i/100),
					Owner: owner(i), LeaseUntil: now.Add(time.Minute), Fingerprint: strings.Repeat("f", 64), ExpiresAt: now.Add(24 * time.Hour)}
				if _, err := store.Claim(ctx, p); err != nil {
					t.Error(err)
					return
				}
				if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "Reply sent to ticket 4711", Ref: "msg_01HZX3K9"}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var records, indexes int64
	encodings := map[string]int{}
	iter := rc.Scan(ctx, 0, "{"+prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		used, err := rc.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(key, "}:r:") {
			records += used
			enc, err := rc.ObjectEncoding(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			encodings[enc]++
		} else {
			indexes += used
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	perRecord := float64(records+indexes) / n
	t.Logf("MEMORY USAGE per done record: %.0f B (record hash %.0f B, its share of the index sets %.0f B); record encodings %v",
		perRecord, float64(records)/n, float64(indexes)/n, encodings)
	if perRecord >= 1024 {
		t.Errorf("a done record without a result takes %.0f B, want under 1 KiB", perRecord)
	}
}
