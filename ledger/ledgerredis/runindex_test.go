package ledgerredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
)

// bucketOf returns the start of the keys of the bucket that holds key's
// record ("{tag}:").
func bucketOf(t *testing.T, rc *redis.Client, prefix, key string) string {
	t.Helper()
	keys, err := rc.Keys(context.Background(), "{"+prefix+":*}:r:"+key).Result()
	if err != nil || len(keys) != 1 {
		t.Fatal(keys, err)
	}
	return strings.TrimSuffix(keys[0], "r:"+key)
}

// A record written in the layout before the run indexes and the chunked
// fields (one field per value however long, the result and truncated
// fields always, the state indexes marked complete, no run index) reads
// the same: Get, a refused claim's blocking record, Complete by its owner
// from a Store that did not claim it, and a listing by run after the
// first List indexes it.
func TestOlderLayoutRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clk})
	long := owner(1) // 106 bytes: one field in the older layout
	run := "run-" + strings.Repeat("r", 90)
	tags := ledgerredis.Tags(store)
	// Find the bucket of each key by writing it through a Store, then
	// rewrite it as the older version did.
	write := func(key, state string) {
		t.Helper()
		p := params(key, long, t0)
		p.RunID = run
		if _, err := store.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		b := bucketOf(t, rc, prefix, key)
		l, e := t0.Add(30*time.Second).UnixMilli(), t0.Add(time.Hour).UnixMilli()
		if err := rc.Del(ctx, b+"r:"+key, b+"u:"+run).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.ZRem(ctx, b+"pending", key).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.HSet(ctx, b+"r:"+key, "t", "send_reply", "u", run, "s", state, "o", long, "l", l, "e", e,
			"f", "fp", "a", 1, "at", t0.UnixMilli(), "m", "", "r", "", "x", "", "z", "0", "n", "", "w", t0.UnixMilli()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.ZAdd(ctx, b+state, redis.Z{Score: float64(l), Member: key}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	write("old-pending", "pending")
	write("old-uncertain", "uncertain")
	for _, tag := range tags {
		if err := rc.Set(ctx, "{"+tag+"}:indexed", "1", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rc.Del(ctx, "{"+tag+"}:indexed:runs").Err(); err != nil {
			t.Fatal(err)
		}
	}
	fresh := ledgerredis.New(rc, &ledgerredis.Config{Clock: clk, Prefix: prefix})
	rec, err := fresh.Get(ctx, "old-pending")
	if err != nil || rec.Owner != long || rec.RunID != run || rec.Result != nil || rec.Truncated || rec.State != ledger.StatePending {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
	p := params("old-pending", "owner-b", t0)
	if res, err := fresh.Claim(ctx, p); err != nil || res.Claimed || res.Previous == nil || res.Previous.Owner != long {
		t.Fatalf("claim over the older record = %+v, %v", res, err)
	}
	recs, err := fresh.List(ctx, ledger.Filter{RunID: run})
	if err != nil || len(recs) != 2 {
		t.Fatalf("List by run after the upgrade = %d records, %v; want 2", len(recs), err)
	}
	if err := fresh.Complete(ctx, "old-pending", long, ledger.Completion{Summary: strings.Repeat("s", 200), Result: []byte(strings.Repeat("x", 300))}); err != nil {
		t.Fatal(err)
	}
	rec, err = fresh.Get(ctx, "old-pending")
	if err != nil || rec.State != ledger.StateDone || rec.Summary != strings.Repeat("s", 200) || string(rec.Result) != strings.Repeat("x", 300) {
		t.Fatalf("Get after Complete = %+v, %v", rec, err)
	}
	recs, err = fresh.List(ctx, ledger.Filter{RunID: run, State: ledger.StateDone})
	if err != nil || len(recs) != 1 || recs[0].Key != "old-pending" {
		t.Fatalf("List by run of done records = %v, %v", recs, err)
	}
	for _, tag := range tags {
		if ttl, err := rc.PTTL(ctx, "{"+tag+"}:indexed:runs").Result(); err != nil || ttl != -1 {
			t.Errorf("bucket %s: run indexes' mark PTTL %v, %v; want -1", tag, ttl, err)
		}
	}
}

// Long text fields are split so that a record's hash keeps the listpack
// encoding (up to 512 bytes a field, the most a key, tool, run id, owner
// or fingerprint may have; a result up to 4 KiB), and read back whole; a
// longer summary is kept whole (the hash leaves the listpack encoding).
func TestLongFieldsChunked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clk})
	for _, n := range []int{64, 65, 128, 129, 511, 512, 513, 4096, 4097} {
		key := fmt.Sprintf("k-%d", n)
		text := strings.Repeat("abcdefg", n)[:n]
		short := text[:min(n, 512)]
		p := params(key, "o"+short[1:], t0)
		p.Tool, p.RunID, p.Fingerprint = "t"+short[1:], "r"+short[1:], "f"+short[1:]
		p.RunID = fmt.Sprintf("run-%d", n) + p.RunID[:min(n, 500)]
		if _, err := store.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		summary := text[:min(n, 512)]
		long := n == 513 || n == 4097 // a summary over 512 bytes, or a result over 4 KiB
		if long {
			summary = text[:513]
		}
		c := ledger.Completion{Summary: summary, Ref: "r" + short[1:], Result: []byte(text), Truncated: true}
		if err := store.Complete(ctx, key, p.Owner, c); err != nil {
			t.Fatal(err)
		}
		rec, err := store.Get(ctx, key)
		if err != nil || rec.Owner != p.Owner || rec.Tool != p.Tool || rec.RunID != p.RunID || rec.Fingerprint != p.Fingerprint ||
			rec.Summary != summary || rec.Ref != c.Ref || string(rec.Result) != text || !rec.Truncated {
			t.Fatalf("%d bytes: Get = %+v, %v", n, rec, err)
		}
		// A claim with the same fingerprint sees the record done.
		if res, err := store.Claim(ctx, p); err != nil || res.Claimed || res.Previous.Summary != summary {
			t.Fatalf("%d bytes: replay = %+v, %v", n, res, err)
		}
		if recs, err := store.List(ctx, ledger.Filter{RunID: p.RunID}); err != nil || len(recs) != 1 || recs[0].Key != key {
			t.Fatalf("%d bytes: List by run = %v, %v", n, recs, err)
		}
		enc, err := rc.ObjectEncoding(ctx, bucketOf(t, rc, prefix, key)+"r:"+key).Result()
		want := "listpack"
		if long {
			want = "hashtable"
		}
		if err != nil || enc != want {
			t.Errorf("%d bytes: encoding %s, %v; want %s", n, enc, err, want)
		}
	}
}

// The run indexes follow their records: a settle by a Store that did not
// claim the record moves the entry to the new lease; a record claimed
// again in another run leaves the old run's listing (its entry dropped by
// that listing); Purge drops the entries of the records it deletes, and a
// run's index expires with its records.
func TestRunIndexMaintained(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clk})
	other := ledgerredis.New(rc, &ledgerredis.Config{Clock: clk, Prefix: prefix})
	p := params("k-a", "owner-a", t0)
	p.RunID = "run-a"
	if _, err := store.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	b := bucketOf(t, rc, prefix, "k-a")
	clk.Advance(time.Second)
	// Settled by a Store that does not know its run.
	if err := other.Fail(ctx, "k-a", "owner-a", ledger.Failure{Definite: true, Reason: "no", Retention: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if sc, err := rc.ZScore(ctx, b+"u:run-a", "k-a").Result(); err != nil || int64(sc) != clk.Now().UnixMilli() {
		t.Fatalf("run index score %v, %v; want the settle time %d", sc, err, clk.Now().UnixMilli())
	}
	if ttl, err := rc.PTTL(ctx, b+"u:run-a").Result(); err != nil || ttl <= 0 {
		t.Errorf("run index PTTL %v, %v; want one", ttl, err)
	}
	// Claimed again (over the failed record) in run-b.
	q := params("k-a", "owner-b", clk.Now())
	q.RunID = "run-b"
	if res, err := store.Claim(ctx, q); err != nil || !res.Claimed {
		t.Fatal(res, err)
	}
	if recs, err := store.List(ctx, ledger.Filter{RunID: "run-a"}); err != nil || len(recs) != 0 {
		t.Fatalf("List(run-a) = %v, %v; want none", recs, err)
	}
	if _, err := rc.ZScore(ctx, b+"u:run-a", "k-a").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("run-a's index still holds k-a: %v", err)
	}
	if recs, err := store.List(ctx, ledger.Filter{RunID: "run-b"}); err != nil || len(recs) != 1 {
		t.Fatalf("List(run-b) = %v, %v; want k-a", recs, err)
	}
	if err := other.Complete(ctx, "k-a", "owner-b", ledger.Completion{Summary: "ok", Retention: time.Minute}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	if n, err := store.Purge(ctx, clk.Now()); err != nil || n != 1 {
		t.Fatalf("Purge = %d, %v; want 1", n, err)
	}
	if n, err := rc.Exists(ctx, b+"u:run-b").Result(); err != nil || n != 0 {
		t.Errorf("run-b's index after Purge: %d, %v; want gone (empty)", n, err)
	}
}
