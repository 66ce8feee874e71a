package ledgerredis_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func params(key, owner string, now time.Time) ledger.ClaimParams {
	return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: owner,
		LeaseUntil: now.Add(30 * time.Second), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
}

// 64 claims on one key from 8 clients, each with its own connections:
// exactly one wins, and every other caller is shown the winner's record in
// its own reply: 64 round trips in all.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	const clients, perClient = 8, 8
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	clock := clock.NewFake(time.Now())
	stores := make([]*ledgerredis.Store, clients)
	c := &counter{}
	for i := range stores {
		rc := redistest.NewClient(t, url)
		rc.AddHook(c)
		stores[i] = ledgerredis.New(rc, &ledgerredis.Config{Clock: clock, Prefix: prefix})
		if _, err := stores[i].Claim(context.Background(), params("warm-up", "owner", clock.Now())); err != nil {
			t.Fatal(err)
		}
	}
	c.take()
	for round := range 10 {
		key := fmt.Sprintf("race-%d", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]ledger.ClaimResult, clients*perClient)
			errs    = make([]error, clients*perClient)
		)
		for i := range results {
			wg.Go(func() {
				<-start
				results[i], errs[i] = stores[i%clients].Claim(context.Background(), params(key, fmt.Sprintf("owner-%d", i), clock.Now()))
			})
		}
		close(start)
		wg.Wait()
		winner := ""
		for i, res := range results {
			switch {
			case errs[i] != nil:
				t.Fatalf("%s: claim %d: %v", key, i, errs[i])
			case res.Claimed && winner != "":
				t.Fatalf("%s: two winners, %s and owner-%d", key, winner, i)
			case res.Claimed:
				winner = fmt.Sprintf("owner-%d", i)
			}
		}
		if winner == "" {
			t.Fatalf("%s: no winner", key)
		}
		if got := c.take(); len(got) != len(results) {
			t.Errorf("%s: %d round trips for %d claims", key, len(got), len(results))
		}
		for i, res := range results {
			if !res.Claimed && (res.Previous == nil || res.Previous.Owner != winner) {
				t.Errorf("%s: loser %d saw %+v, want the record of %s", key, i, res.Previous, winner)
			}
		}
	}
}

// counter is a go-redis hook that counts round trips: a command or a
// pipeline each, except the handshake of a new connection (HELLO, CLIENT
// SETINFO), which belongs to the connection, not to a call.
type counter struct {
	mu   sync.Mutex
	cmds []string
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd.Name())
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var names []string
		for _, cmd := range cmds {
			names = append(names, cmd.Name())
		}
		c.add(strings.Join(names, "+"))
		return next(ctx, cmds)
	}
}

func (c *counter) add(name string) {
	if name == "hello" || strings.Trim(strings.ReplaceAll(name, "client", ""), "+") == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cmds = append(c.cmds, name)
}

// take returns the round trips since the last take.
func (c *counter) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmds := c.cmds
	c.cmds = nil
	return cmds
}

// newExecutor returns an Executor on store with a send_reply tool whose
// runs it counts.
func newExecutor(t testing.TB, store ledger.Store) (*client.Executor, *atomic.Int64) {
	t.Helper()
	exec := client.New(store, nil)
	var runs atomic.Int64
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			runs.Add(1)
			return client.Effect{Summary: "replied to ticket 42", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	return exec, &runs
}

func reply(ticket any, text string) client.Call {
	in, _ := json.Marshal(map[string]any{"ticketId": ticket, "text": text})
	return client.Call{Tool: "send_reply", Input: in}
}

// Round trips on the wire for a call through the Executor: a fresh action
// costs two (claim, record), a replay one; with WaitReplicas the WAIT
// rides in the same round trip. The first use of a script on a server
// whose cache lacks it costs one more (EVALSHA, then EVAL).
func TestExecutorRoundTrips(t *testing.T) {
	t.Parallel()
	for _, wait := range []int{0, 1} {
		t.Run(fmt.Sprintf("wait=%d", wait), func(t *testing.T) {
			t.Parallel()
			url := redistest.URL(t)
			if wait > 0 {
				url = startReplicated(t)
			}
			rc := redistest.NewClient(t, url)
			c := &counter{}
			rc.AddHook(c)
			store := ledgerredis.New(rc, &ledgerredis.Config{Prefix: redistest.Prefix(t, url), WaitReplicas: wait})
			exec, runs := newExecutor(t, store)
			ctx := context.Background()
			if _, err := exec.Execute(ctx, "run-0", reply(1, "load the scripts")); err != nil {
				t.Fatal(err)
			}
			c.take()

			want := func(what string, n int, outcome client.Outcome, call client.Call) {
				t.Helper()
				res, err := exec.Execute(ctx, "run-1", call)
				if err != nil || res.Outcome != outcome {
					t.Fatalf("%s: %v %q, %v; want %v", what, res.Outcome, res.Text, err, outcome)
				}
				if got := c.take(); len(got) != n {
					t.Errorf("%s: %d round trips %v, want %d", what, len(got), got, n)
				}
			}
			want("fresh action", 2, client.Executed, reply(42, "first reply"))
			want("replay", 1, client.AlreadyDone, reply("42", "reworded reply"))
			if n := runs.Load(); n != 2 {
				t.Errorf("tool ran %d times, want 2 (one per action)", n)
			}
		})
	}
}

// After the server forgot its scripts, the store loads them again through
// EVAL.
func TestScriptCacheFlushed(t *testing.T) {
	// Not parallel: flushing the cache makes other tests' calls fall back
	// too (which they handle), but this test must see its own fallback.
	url := redistest.URL(t)
	rc := redistest.NewClient(t, url)
	c := &counter{}
	rc.AddHook(c)
	store := ledgerredis.New(rc, &ledgerredis.Config{Prefix: redistest.Prefix(t, url)})
	ctx := context.Background()
	if err := rc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	c.take()
	res, err := store.Claim(ctx, params("k", "owner-a", time.Now()))
	if err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	if got := c.take(); len(got) != 2 || got[0] != "evalsha" || got[1] != "eval" {
		t.Errorf("round trips %v, want [evalsha eval]", got)
	}
	if _, err := store.List(ctx, ledger.Filter{}); err != nil {
		t.Fatal(err)
	}
	if err := rc.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if recs, err := store.List(ctx, ledger.Filter{}); err != nil || len(recs) != 1 {
		t.Errorf("List after a flush = %v, %v; want the record", recs, err)
	}
}

// The key TTL follows the record: a pending key outlives its retention and
// lease by the grace, a settled one lives a minute past its retention, and
// Extend raises both the retention and the TTL past a lease beyond them.
func TestTTL(t *testing.T) {
	t.Parallel()
	const grace = time.Hour
	clock := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clock, PendingGrace: grace})
	ctx := context.Background()
	ttl := func(key string) time.Duration {
		t.Helper()
		keys, err := rc.Keys(ctx, "{"+prefix+":*}:r:"+key).Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys of %s: %v, %v", key, keys, err)
		}
		d, err := rc.PTTL(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// near: d is at most want and within a minute of it (the real time the
	// test takes between the write and the PTTL).
	near := func(what string, d, want time.Duration) {
		t.Helper()
		if d > want || d < want-time.Minute {
			t.Errorf("%s: TTL %v, want about %v", what, d, want)
		}
	}
	p := params("k-ttl", "owner-a", t0)
	p.LeaseUntil, p.ExpiresAt = t0.Add(time.Minute), t0.Add(2*time.Hour)
	if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatal(res, err)
	}
	near("pending", ttl(p.Key), 2*time.Hour+grace)

	// A lease beyond the retention raises the retention with it.
	lease := t0.Add(5 * time.Hour)
	if err := store.Extend(ctx, p.Key, p.Owner, lease); err != nil {
		t.Fatal(err)
	}
	near("extended", ttl(p.Key), 5*time.Hour+grace)
	clock.Set(t0.Add(4 * time.Hour)) // past the old retention, within the lease
	rec, err := store.Get(ctx, p.Key)
	if err != nil || !rec.ExpiresAt.Equal(lease) || !rec.LeaseUntil.Equal(lease) {
		t.Fatalf("Get after Extend = %+v, %v; want lease and expiry %v", rec, err, lease)
	}
	if res, err := store.Claim(ctx, params(p.Key, "owner-b", clock.Now())); err != nil || res.Claimed {
		t.Fatalf("Claim within the extended lease = %+v, %v; want blocked", res, err)
	}
	if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	near("done", ttl(p.Key), time.Hour+time.Minute) // retention ends an hour after the clock, plus the slack

	// Settled just as its retention ends (a tool that outlived it under a
	// renewed lease): the key stays for the slack, not a millisecond, so a
	// reader whose clock is a little behind still finds it.
	q := params("k-ttl-late", "owner-a", clock.Now())
	q.LeaseUntil, q.ExpiresAt = clock.Now().Add(time.Minute), clock.Now().Add(2*time.Minute)
	if res, err := store.Claim(ctx, q); err != nil || !res.Claimed {
		t.Fatal(res, err)
	}
	end := clock.Now().Add(3 * time.Minute)
	if err := store.Extend(ctx, q.Key, q.Owner, end); err != nil {
		t.Fatal(err)
	}
	clock.Set(end)
	if err := store.Complete(ctx, q.Key, q.Owner, ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	if d := ttl(q.Key); d < 30*time.Second || d > time.Minute {
		t.Errorf("done at the end of its retention: TTL %v, want about a minute", d)
	}
	clock.Set(end.Add(-time.Second)) // a reader whose clock is a second behind
	if rec, err := store.Get(ctx, q.Key); err != nil || rec.State != ledger.StateDone {
		t.Fatalf("Get by a reader a second behind = %+v, %v; want the done record", rec, err)
	}
}

// A pending record whose lease and retention both ran out is still an
// abandoned claim: a claim with its fingerprint takes it over and
// reconciles, one with another fingerprint is refused.
func TestTakeoverAfterRetention(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	store, _, _ := newStore(t, &ledgerredis.Config{Clock: clock})
	ctx := context.Background()
	p := params("k-old", "owner-a", t0)
	if _, err := store.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	clock.Set(p.ExpiresAt.Add(time.Hour))
	other := params(p.Key, "owner-b", clock.Now())
	other.Fingerprint = "fp-other"
	if res, err := store.Claim(ctx, other); err != nil || res.Claimed || res.Previous == nil || res.Previous.Owner != p.Owner {
		t.Fatalf("claim with another fingerprint = %+v, %v; want refused with the abandoned record", res, err)
	}
	res, err := store.Claim(ctx, params(p.Key, "owner-c", clock.Now()))
	if err != nil || !res.Claimed || !res.MustReconcile() || res.Previous.Owner != p.Owner {
		t.Fatalf("claim = %+v, %v; want a takeover of the record of %s", res, err, p.Owner)
	}
}

// List drops the state index entries whose record the server deleted (its
// TTL ran out; the index of all records drops it by its score at the next
// write), and the indexes carry a TTL so that an unused ledger goes away.
func TestListDropsDeletedRecords(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clock})
	ctx := context.Background()
	for i := range 3 {
		if _, err := store.Claim(ctx, params(fmt.Sprintf("k-%d", i), "owner-a", t0)); err != nil {
			t.Fatal(err)
		}
	}
	recKey := func(key string) string {
		t.Helper()
		keys, err := rc.Keys(ctx, "{"+prefix+":*}:r:"+key).Result()
		if err != nil || len(keys) != 1 {
			t.Fatal(keys, err)
		}
		return keys[0]
	}
	deleted := recKey("k-1")
	if err := rc.Del(ctx, deleted).Err(); err != nil { // as its TTL would
		t.Fatal(err)
	}
	for _, f := range []ledger.Filter{{}, {State: ledger.StatePending}} {
		recs, err := store.List(ctx, f)
		if err != nil || len(recs) != 2 {
			t.Fatalf("List(%+v) = %v, %v; want 2 records", f, recs, err)
		}
	}
	bucket, live := strings.TrimSuffix(deleted, "r:k-1"), strings.TrimSuffix(recKey("k-0"), "r:k-0")
	if n, err := rc.ZScore(ctx, bucket+"pending", "k-1").Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("pending index still holds the deleted record: %v, %v", n, err)
	}
	for _, index := range []string{"pending", "all"} {
		if d, err := rc.PTTL(ctx, live+index).Result(); err != nil || d <= 0 {
			t.Errorf("%s index TTL = %v, %v; want one", index, d, err)
		}
	}
}

// ledger.Resolve settles an uncertain record on this store.
func TestResolve(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	store, _, _ := newStore(t, &ledgerredis.Config{Clock: clock})
	ctx := context.Background()
	p := params("k-resolve", "owner-a", t0)
	if _, err := store.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := store.Fail(ctx, p.Key, p.Owner, ledger.Failure{Reason: "timeout after send"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	rec, err := ledger.Resolve(ctx, store, p.Key, ledger.Resolution{Done: true, Ref: "msg_9", Summary: "found by hand", By: "alice"}, clock.Now())
	if err != nil || rec.State != ledger.StateDone || rec.Ref != "msg_9" || rec.ResolvedBy() != "alice" {
		t.Fatalf("Resolve = %+v, %v", rec, err)
	}
}

// WaitReplicas: a write fewer replicas acknowledged than asked for is an
// error (the claim is not reported as made); with a replica attached it
// succeeds, and the record is on the replica when the call returns.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("too few replicas", func(t *testing.T) {
		t.Parallel()
		// One replica more than the server has.
		info, err := redistest.NewClient(t, redistest.URL(t)).Info(ctx, "replication").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(info, "connected_slaves:")
		replicas, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		if err != nil {
			t.Fatalf("connected_slaves in %q: %v", info, err)
		}
		store, _, _ := newStore(t, &ledgerredis.Config{WaitReplicas: replicas + 1, WaitTimeout: 10 * time.Millisecond})
		_, err = store.Claim(ctx, params("k-wait", "owner-a", time.Now()))
		if !errors.Is(err, ledgerredis.ErrNotReplicated) || !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Claim = %v, want ErrNotReplicated and ErrUnavailable", err)
		}
	})
	t.Run("replica", func(t *testing.T) {
		t.Parallel()
		url := startReplicated(t)
		prefix := redistest.Prefix(t, url)
		store := ledgerredis.New(redistest.NewClient(t, url), &ledgerredis.Config{Prefix: prefix, WaitReplicas: 1, WaitTimeout: time.Minute})
		p := params("k-wait", "owner-a", time.Now())
		if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
			t.Fatalf("Claim = %+v, %v", res, err)
		}
		if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
			t.Fatal(err)
		}
		onReplica := ledgerredis.New(redistest.NewClient(t, replicaOf[url]), &ledgerredis.Config{Prefix: prefix})
		if rec, err := onReplica.Get(ctx, p.Key); err != nil || rec.State != ledger.StateDone {
			t.Errorf("record on the replica = %+v, %v; want done", rec, err)
		}
	})
}

var (
	replicatedOnce sync.Mutex
	replicaOf      = map[string]string{} // primary URL -> replica URL
	replicated     string
)

// startReplicated starts a primary and a replica of it (once per test
// binary, stopped when the tests end) and returns the primary's URL.
func startReplicated(t *testing.T) string {
	t.Helper()
	replicatedOnce.Lock()
	defer replicatedOnce.Unlock()
	if replicated != "" {
		return replicated
	}
	ctx := context.Background()
	var srvs [2]*redistest.Server
	for i := range srvs {
		srv, err := redistest.StartBinary(ctx, "redis-server", "redis-server")
		if err != nil {
			t.Fatal(err)
		}
		stopAtExit(srv)
		srvs[i] = srv
	}
	primary, err := redis.ParseURL(srvs[0].URL)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(primary.Addr, ":")
	replica := redis.NewClient(mustParse(t, srvs[1].URL))
	defer replica.Close()
	if err := replica.ReplicaOf(ctx, host, port).Err(); err != nil {
		t.Fatal(err)
	}
	deadline, tick := time.After(time.Minute), time.NewTicker(20*time.Millisecond)
	defer tick.Stop()
	for {
		info, err := replica.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the replica did not connect: %v\n%s", err, info)
		case <-tick.C:
		}
	}
	replicated = srvs[0].URL
	replicaOf[replicated] = srvs[1].URL
	return replicated
}

func mustParse(t *testing.T, url string) *redis.Options {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// A ledger written before the state indexes existed (only the pending
// index and the index of all records) is indexed by the first List of a
// Store: its uncertain, done and failed records are listed.
func TestListIndexesOlderLedger(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clock, Spread: ledgerredis.LegacySpread})
	ctx := context.Background()
	want := map[ledger.State]int{}
	for i := range 40 {
		p := params(fmt.Sprintf("k-%02d", i), "owner-a", t0)
		if _, err := store.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		state := []ledger.State{ledger.StatePending, ledger.StateUncertain, ledger.StateDone, ledger.StateFailed}[i%4]
		var err error
		switch state {
		case ledger.StateUncertain:
			err = store.Fail(ctx, p.Key, p.Owner, ledger.Failure{Reason: "timeout"})
		case ledger.StateFailed:
			err = store.Fail(ctx, p.Key, p.Owner, ledger.Failure{Definite: true, Reason: "no"})
		case ledger.StateDone:
			err = store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"})
		}
		if err != nil {
			t.Fatal(err)
		}
		want[state]++
	}
	// What the older version left: no settled state indexes, no markers.
	for b := range ledgerredis.Buckets {
		tag := fmt.Sprintf("{%s:%d}:", prefix, b)
		if err := rc.Del(ctx, tag+"uncertain", tag+"done", tag+"failed", tag+"indexed").Err(); err != nil {
			t.Fatal(err)
		}
	}
	fresh := ledgerredis.New(rc, &ledgerredis.Config{Clock: clock, Prefix: prefix, Spread: ledgerredis.LegacySpread})
	for state, n := range want {
		recs, err := fresh.List(ctx, ledger.Filter{State: state})
		if err != nil || len(recs) != n {
			t.Errorf("List(%s) after the upgrade: %d records, %v; want %d", state, len(recs), err, n)
		}
	}
	if n, err := rc.Exists(ctx, "{"+prefix+":0}:indexed").Result(); err != nil || n != 1 {
		t.Errorf("bucket 0 not marked indexed: %v, %v", n, err)
	}
	// The marks are permanent: no walk again once the records and their
	// indexes expired (it took 46.6 s at 10^6 records, once a retention).
	for b := range ledgerredis.Buckets {
		key := fmt.Sprintf("{%s:%d}:indexed", prefix, b)
		if ttl, err := rc.PTTL(ctx, key).Result(); err != nil || ttl != -1 {
			t.Errorf("%s: PTTL %v, %v; want -1 (no expiry)", key, ttl, err)
		}
	}
}

// A record whose key has gone leaves its state's index at the next write
// of its bucket, whether or not anything lists that state.
func TestGoneRecordsLeaveStateIndexes(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(t0)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clock})
	ctx := context.Background()
	bucketOf := func(key string) string {
		t.Helper()
		keys, err := rc.Keys(ctx, "{"+prefix+":*}:r:"+key).Result()
		if err != nil || len(keys) != 1 {
			t.Fatal(keys, err)
		}
		return strings.TrimSuffix(keys[0], "r:"+key)
	}
	p := params("k-done", "owner-a", t0)
	if _, err := store.Claim(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	bucket := bucketOf(p.Key)
	if _, err := rc.ZScore(ctx, bucket+"done", p.Key).Result(); err != nil {
		t.Fatalf("done index lacks the record: %v", err)
	}
	// Past the key's life (retention and a minute), another record of the
	// same bucket is claimed.
	clock.Advance(time.Hour + 2*time.Minute)
	for i := 0; ; i++ {
		q := params(fmt.Sprintf("k-other-%d", i), "owner-b", clock.Now())
		if _, err := store.Claim(ctx, q); err != nil {
			t.Fatal(err)
		}
		if bucketOf(q.Key) == bucket {
			break
		}
	}
	if n, err := rc.ZScore(ctx, bucket+"done", p.Key).Result(); !errors.Is(err, redis.Nil) {
		t.Errorf("done index still holds the gone record: %v, %v", n, err)
	}
}

// After a quiet period, when many records' keys have gone, a write drops
// at most 64 of its bucket's gone entries from the indexes, however many
// there are; Purge drops the rest and deletes the records that have
// expired but whose keys the server still keeps.
func TestPruneBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	clock := clock.NewFake(now)
	store, rc, prefix := newStore(t, &ledgerredis.Config{Clock: clock})
	fill := func(name string, n int, at time.Time) []string {
		t.Helper()
		keys := make([]string, n)
		for i := range keys {
			keys[i] = fmt.Sprintf("%s-%04d", name, i)
		}
		// Kept for a day after at, and a minute more on the server.
		if err := ledgerredis.FillDone(ctx, store, keys, at); err != nil {
			t.Fatal(err)
		}
		return keys
	}
	// Settled 25 hours ago: the keys have gone, their entries are left
	// (about 250 a bucket).
	fill("gone", 4000, now.Add(-25*time.Hour))
	// Expiring in 5 minutes: Purge 10 minutes on deletes them.
	expiring := fill("expiring", 100, now.Add(-24*time.Hour+5*time.Minute))
	bucketOf := func(key string) string {
		t.Helper()
		keys, err := rc.Keys(ctx, "{"+prefix+":*}:r:"+key).Result()
		if err != nil || len(keys) != 1 {
			t.Fatal(keys, err)
		}
		return strings.TrimSuffix(keys[0], "r:"+key)
	}
	card := func(key string) int64 {
		t.Helper()
		n, err := rc.ZCard(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	p := params("k-fresh", "owner-a", clock.Now())
	bucket := bucketOf(expiring[0])
	claims := 0
	for i := 0; ; i++ {
		p.Key = fmt.Sprintf("k-fresh-%d", i)
		all, done := card(bucket+"all"), card(bucket+"done")
		if all <= 64 {
			t.Fatalf("bucket %s holds %d entries; the test needs more than 64", bucket, all)
		}
		if _, err := store.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		claims++
		if bucketOf(p.Key) != bucket {
			continue
		}
		if got := card(bucket + "all"); got != all-64+1 {
			t.Errorf("index of all records after a claim: %d entries, want %d (64 dropped, 1 added)", got, all-64+1)
		}
		if got := card(bucket + "done"); got != done-64 {
			t.Errorf("done index after a claim: %d entries, want %d", got, done-64)
		}
		break
	}
	before := now.Add(10 * time.Minute)
	deleted, err := store.Purge(ctx, before)
	if err != nil || deleted != len(expiring) {
		t.Fatalf("Purge = %d, %v; want %d", deleted, err, len(expiring))
	}
	if left, err := rc.Exists(ctx, bucket+"r:"+expiring[0]).Result(); err != nil || left != 0 {
		t.Errorf("expired record after Purge: %d, %v", left, err)
	}
	if got := card(bucket + "done"); got != 0 {
		t.Errorf("done index after Purge: %d entries, want 0", got)
	}
	// Only the fresh claims remain in the indexes of all records.
	indexes, err := rc.Keys(ctx, "{"+prefix+":*}:all").Result()
	if err != nil {
		t.Fatal(err)
	}
	left := 0
	for _, k := range indexes {
		left += int(card(k))
	}
	if left != claims {
		t.Errorf("indexes of all records after Purge: %d entries, want the %d fresh claims", left, claims)
	}
	if n, err := store.Purge(ctx, before); err != nil || n != 0 {
		t.Errorf("second Purge = %d, %v; want 0", n, err)
	}
}

// Records that share a lease end are listed page by page, each once, also
// when the record at the cursor has left the state in between.
func TestListTiesAfterGoneCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clock.NewFake(t0)
	store, _, _ := newStore(t, &ledgerredis.Config{Clock: clock})
	const n = 300
	for i := range n {
		if res, err := store.Claim(ctx, params(fmt.Sprintf("tie-%03d", i), "owner-a", t0)); err != nil || !res.Claimed {
			t.Fatal(res, err)
		}
	}
	first, err := store.List(ctx, ledger.Filter{State: ledger.StatePending, Limit: 100})
	if err != nil || len(first) != 100 || first[99].Key != "tie-099" {
		t.Fatalf("first page: %d records, %v", len(first), err)
	}
	if err := store.Complete(ctx, "tie-099", "owner-a", ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	rest, err := store.List(ctx, ledger.Filter{State: ledger.StatePending, After: ledger.CursorOf(&first[99]), Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != n-100 {
		t.Fatalf("after the cursor: %d records, want %d", len(rest), n-100)
	}
	for i, r := range rest {
		if want := fmt.Sprintf("tie-%03d", 100+i); r.Key != want {
			t.Fatalf("record %d after the cursor is %s, want %s", i, r.Key, want)
		}
	}
}
