package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// seed writes one record in each situation an operator meets, through
// the Store API on clock, which starts at the wall clock.
func seed(t *testing.T, s ledger.Store, clock *clock.Fake) {
	t.Helper()
	ctx := context.Background()
	now := clock.Now()
	at := func(d time.Duration) { clock.Set(now.Add(d)) }
	claim := func(key, run string, lease, expires time.Duration) {
		t.Helper()
		cr, err := s.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: run, Owner: "owner-" + key,
			LeaseUntil: clock.Now().Add(lease), Fingerprint: "fp", ExpiresAt: clock.Now().Add(expires)})
		if err != nil || !cr.Claimed {
			t.Fatalf("claim %s: %+v %v", key, cr, err)
		}
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	at(-50 * time.Minute)
	claim("k-done", "run-a", time.Minute, 24*time.Hour)
	check(s.Complete(ctx, "k-done", "owner-k-done", ledger.Completion{Summary: "message msg_1 sent", Ref: "msg_1"}))
	at(-40 * time.Minute)
	claim("k-failed", "run-a", time.Minute, 24*time.Hour)
	check(s.Fail(ctx, "k-failed", "owner-k-failed", ledger.Failure{Definite: true, Reason: "400 invalid address"}))
	at(-30 * time.Minute)
	claim("k-uncertain", "run-b", time.Minute, 24*time.Hour)
	check(s.Fail(ctx, "k-uncertain", "owner-k-uncertain", ledger.Failure{Reason: "timeout after the request was sent"}))
	at(-2 * time.Hour)
	claim("k-abandoned", "run-b", time.Hour, 24*time.Hour)
	at(-10 * time.Minute)
	claim("k-live", "run-c", 2*time.Hour, 24*time.Hour)
	at(0)
}

// newSQLiteLedger creates a ledger file with oncely ledger init and seeds it.
func newSQLiteLedger(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oncely.db")
	url := "sqlite://" + path
	if r := runCLI(t, nil, "ledger", "init", "--ledger", url).wantOK(t); !strings.Contains(r.stdout, "ready") {
		t.Errorf("init: %q", r.stdout)
	}
	clock := clock.NewFake(time.Now())
	s, err := ledgersqlite.Open(context.Background(), path, &ledgersqlite.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed(t, s, clock)
	return url
}

func keysOf(t *testing.T, stdout string) []string {
	t.Helper()
	var keys []string
	for _, r := range decodeJSON[[]recordJSON](t, stdout) {
		keys = append(keys, r.Key)
	}
	return keys
}

// testLedgerOps drives ls, show, stuck and resolve on a seeded ledger.
func testLedgerOps(t *testing.T, url string, env []string) {
	ls := runCLI(t, env, "ledger", "ls", "--ledger", url).wantOK(t)
	rows := lines(ls.stdout)
	if len(rows) != 6 || !strings.HasPrefix(rows[0], "KEY") || !strings.HasPrefix(rows[1], "k-live") {
		t.Errorf("ls: want a header and 5 records, newest first:\n%s", ls.stdout)
	}
	if got := keysOf(t, runCLI(t, env, "ledger", "ls", "--ledger", url, "--json").wantOK(t).stdout); !slices.Equal(got,
		[]string{"k-live", "k-uncertain", "k-failed", "k-done", "k-abandoned"}) {
		t.Errorf("ls --json: %v", got)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--state", "uncertain"}, []string{"k-uncertain"}},
		{[]string{"--run", "run-a"}, []string{"k-failed", "k-done"}},
		{[]string{"--tool", "other"}, nil},
		{[]string{"--older-than", "35m"}, []string{"k-failed", "k-done", "k-abandoned"}},
		{[]string{"--limit", "2", "--page", "2"}, []string{"k-failed", "k-done"}},
	} {
		r := runCLI(t, env, append([]string{"ledger", "ls", "--ledger", url, "--json"}, tc.args...)...).wantOK(t)
		if got := keysOf(t, r.stdout); !slices.Equal(got, tc.want) {
			t.Errorf("ls %v: %v, want %v", tc.args, got, tc.want)
		}
	}
	if got := keysOf(t, runCLI(t, env, "ledger", "stuck", "--ledger", url, "--json").wantOK(t).stdout); !slices.Equal(got,
		[]string{"k-abandoned", "k-uncertain"}) {
		t.Errorf("stuck: %v, want the abandoned pending record and the uncertain one, oldest first", got)
	}

	show := runCLI(t, env, "ledger", "show", "k-done", "--ledger", url).wantOK(t)
	for _, want := range []string{"k-done", "done", "message msg_1 sent", "msg_1", "run-a", "ago)"} {
		if !strings.Contains(show.stdout, want) {
			t.Errorf("show does not print %q:\n%s", want, show.stdout)
		}
	}
	runCLI(t, env, "ledger", "show", "k-nope", "--ledger", url).wantError(t, exitOperational, "not found", url)
	// A unique prefix names its record; an ambiguous one is refused,
	// naming the keys it starts.
	if r := runCLI(t, env, "ledger", "show", "k-don", "--ledger", url, "--json").wantOK(t); decodeJSON[recordJSON](t, r.stdout).Key != "k-done" {
		t.Errorf("show k-don: %s", r.stdout)
	}
	runCLI(t, env, "ledger", "show", "k-", "--ledger", url).wantError(t, exitUsage, "ambiguous", "k-abandoned", "k-done", "k-uncertain")
	runCLI(t, env, "ledger", "resolve", "k-", "--ledger", url, "--failed", "--reason", "x").wantError(t, exitUsage, "ambiguous")

	// Resolve: refused on a live claim; usage errors; then settles the
	// uncertain record, keeping who did it.
	runCLI(t, env, "ledger", "resolve", "k-live", "--ledger", url, "--failed", "--reason", "checked").
		wantError(t, exitOperational, "live lease")
	runCLI(t, env, "ledger", "resolve", "k-uncertain", "--ledger", url, "--failed").wantError(t, exitUsage, "--reason")
	runCLI(t, env, "ledger", "resolve", "k-uncertain", "--ledger", url, "--done", "--failed").wantError(t, exitUsage, "exactly one")
	runCLI(t, env, "ledger", "resolve", "k-done", "--ledger", url, "--failed", "--reason", "x").wantError(t, exitOperational, "cannot be resolved")
	r := runCLI(t, env, "ledger", "resolve", "k-unc", "--ledger", url, "--done", "--ref", "msg_9",
		"--summary", "message msg_9 found in the provider's log", "--by", "alice", "--json").wantOK(t)
	rec := decodeJSON[recordJSON](t, r.stdout)
	if rec.Key != "k-uncertain" || rec.State != ledger.StateDone || rec.Ref != "msg_9" || rec.ResolvedBy != "alice" {
		t.Errorf("resolve --done: %+v", rec)
	}
	r = runCLI(t, env, "ledger", "resolve", "k-abandoned", "--ledger", url, "--failed", "--reason", "no such message", "--by", "bob", "--json").wantOK(t)
	if rec := decodeJSON[recordJSON](t, r.stdout); rec.State != ledger.StateFailed || rec.ResolvedBy != "bob" {
		t.Errorf("resolve --failed: %+v", rec)
	}
	if got := keysOf(t, runCLI(t, env, "ledger", "stuck", "--ledger", url, "--json").wantOK(t).stdout); len(got) != 0 {
		t.Errorf("stuck after resolving: %v", got)
	}
}

func TestLedgerSQLite(t *testing.T) {
	t.Parallel()
	url := newSQLiteLedger(t)
	testLedgerOps(t, url, nil)
	// ONCELY_LEDGER is the default.
	if got := keysOf(t, runCLI(t, []string{EnvLedger + "=" + url}, "ledger", "ls", "--json", "--state", "failed").wantOK(t).stdout); len(got) != 2 {
		t.Errorf("ls with %s: %v", EnvLedger, got)
	}
}

// TestLedgerKeyPrefix uses the keys 'oncely ledger ls' prints (16
// characters of a 64-character action key) with show and resolve.
func TestLedgerKeyPrefix(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncely.db")
	s, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Two keys that share 14 characters, and a third.
	keys := []string{strings.Repeat("ab", 7) + "c" + strings.Repeat("0", 49), strings.Repeat("ab", 7) + "d" + strings.Repeat("1", 49),
		strings.Repeat("e", 64)}
	for _, k := range keys {
		if _, err := s.Claim(context.Background(), ledger.ClaimParams{Key: k, Tool: "send_reply", RunID: "run-1", Owner: "o", Fingerprint: "fp",
			LeaseUntil: time.Now().Add(-time.Minute), ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	url := "sqlite://" + path
	ls := lines(runCLI(t, nil, "ledger", "ls", "--ledger", url).wantOK(t).stdout)
	var short []string
	for _, row := range ls[1:] {
		short = append(short, strings.Fields(row)[0])
	}
	slices.Sort(short)
	if len(short) != 3 || len(short[0]) != 16 {
		t.Fatalf("ls keys %q, want three of 16 characters", short)
	}
	for i, k := range short {
		r := runCLI(t, nil, "ledger", "show", k, "--ledger", url, "--json").wantOK(t)
		if got := decodeJSON[recordJSON](t, r.stdout).Key; got != keys[i] {
			t.Errorf("show %s: %s, want %s", k, got, keys[i])
		}
	}
	r := runCLI(t, nil, "ledger", "resolve", short[2], "--ledger", url, "--failed", "--reason", "checked", "--json").wantOK(t)
	if rec := decodeJSON[recordJSON](t, r.stdout); rec.Key != keys[2] || rec.State != ledger.StateFailed {
		t.Errorf("resolve %s: %+v", short[2], rec)
	}
	runCLI(t, nil, "ledger", "show", short[0][:14], "--ledger", url).wantError(t, exitUsage, "ambiguous", keys[0], keys[1])
	runCLI(t, nil, "ledger", "show", "f", "--ledger", url).wantError(t, exitOperational, "not found")
}

func TestLedgerPurgeSQLite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncely.db")
	clock := clock.NewFake(time.Now().Add(-72 * time.Hour))
	s, err := ledgersqlite.Open(context.Background(), path, &ledgersqlite.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, k := range []string{"old-1", "old-2"} {
		// Settled records expire; a pending one never does.
		if _, err := s.Claim(context.Background(), ledger.ClaimParams{Key: k, Owner: "o", LeaseUntil: clock.Now().Add(time.Minute),
			ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(context.Background(), k, "o", ledger.Completion{Summary: "done long ago"}); err != nil {
			t.Fatal(err)
		}
	}
	url := "sqlite://" + path
	r := runCLI(t, nil, "ledger", "purge", "--ledger", url, "--before", "80h", "--json").wantOK(t)
	if got := decodeJSON[map[string]int](t, r.stdout)["purged"]; got != 0 {
		t.Errorf("purge --before 80h purged %d, want 0 (they expired 71h ago)", got)
	}
	r = runCLI(t, nil, "ledger", "purge", "--ledger", url).wantOK(t)
	if !strings.Contains(r.stdout, "purged 2 expired records") {
		t.Errorf("purge: %q", r.stdout)
	}
}

func TestLedgerURLErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, []byte("these are not the records you are looking for\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "fresh.db")
	for _, tc := range []struct {
		name, url string
		parts     []string
	}{
		{"unknown scheme", "mongodb://localhost/oncely", []string{"unknown scheme \"mongodb\"", "mongodb://localhost/oncely"}},
		{"missing directory", "sqlite://" + filepath.Join(dir, "no", "such", "dir", "oncely.db"), []string{"does not exist", "no/such/dir"}},
		{"not a database", "sqlite://" + notDB, []string{"not a SQLite database", notDB}},
		{"missing file", "sqlite://" + missing, []string{"does not exist", "oncely ledger init"}},
		{"a directory", "sqlite://" + dir, []string{"is a directory"}},
		{"sqlite parameters", "sqlite://" + missing + "?mode=ro", []string{"only a path"}},
		{"dynamodb without table", "dynamodb://?region=us-east-1", []string{"dynamodb://TABLE"}},
		{"dynamodb without region", "dynamodb://oncely", []string{"no AWS region"}},
		{"dynamodb bad endpoint", "dynamodb://oncely?region=us-east-1&endpoint=localhost:8000", []string{"not an http(s) URL"}},
		{"dynamodb unknown parameter", "dynamodb://oncely?region=us-east-1&consistent=yes", []string{"unknown parameter"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runCLI(t, nil, "ledger", "ls", "--ledger", tc.url).wantError(t, exitUsage, tc.parts...)
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a failed open left %s behind (%v)", missing, err)
	}
	if b, _ := os.ReadFile(notDB); !strings.HasPrefix(string(b), "these are") {
		t.Error("a failed open changed the file")
	}
}

// pgURL is the URL of the tests' PostgreSQL server with params added.
func pgURL(t *testing.T, params string) string {
	u := pgtest.URL(t)
	if strings.Contains(u, "?") {
		return u + "&" + params
	}
	return u + "?" + params
}

// TestLedgerPostgres: only init creates the table; every other command
// refuses a ledger that does not exist, creating nothing; then the
// operations on a seeded table; a mistyped URL parameter is a
// configuration error.
func TestLedgerPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	url := pgURL(t, "schema="+schema+"&table=ledger")
	for _, args := range [][]string{{"ls"}, {"stuck"}, {"show", "k"}, {"purge"}, {"resolve", "k", "--failed", "--reason", "x"}} {
		runCLI(t, nil, append(append([]string{"ledger"}, args...), "--ledger", url)...).
			wantError(t, exitUsage, "does not exist (oncely ledger init creates it)", schema)
	}
	// Nor a schema: a typo in ?schema= is refused the same way.
	runCLI(t, nil, "ledger", "ls", "--ledger", pgURL(t, "schema="+schema+"_typo")).wantError(t, exitUsage, "does not exist")
	var n int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE schemaname LIKE $1", schema+"%").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d tables after read-only commands (%v), want none", n, err)
	}
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema+"_typo").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the mistyped schema was created (%d, %v)", n, err)
	}

	if r := runCLI(t, nil, "ledger", "init", "--ledger", url).wantOK(t); !strings.Contains(r.stdout, "ready") {
		t.Errorf("init: %q", r.stdout)
	}
	runCLI(t, nil, "ledger", "init", "--ledger", url).wantOK(t) // idempotent
	clock := clock.NewFake(time.Now())
	s, err := ledgerpg.New(pool, &ledgerpg.Config{Schema: schema, Table: "ledger", Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	seed(t, s, clock)
	testLedgerOps(t, url, nil)

	// A mistyped parameter: exit 2, the server's reason once.
	r := runCLI(t, nil, "ledger", "ls", "--ledger", pgURL(t, "tabel=ledger"))
	r.wantError(t, exitUsage, `unrecognized configuration parameter "tabel"`)
	if strings.Count(r.stderr, "SQLSTATE") != 1 || strings.Contains(r.stderr, "reachable") {
		t.Errorf("the driver's text repeated, or called unreachable: %q", r.stderr)
	}
}

// TestLedgerRedisUnreachable: the one-line error, and no line of
// go-redis's own logger before it.
func TestLedgerRedisUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	runCLI(t, nil, "ledger", "ls", "--ledger", "redis://"+addr+"/0").wantError(t, exitOperational, "unavailable", "connection refused")
}

// awsEnv gives the AWS SDK static credentials, as a local server needs.
var awsEnv = []string{"AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local"}

func TestLedgerDynamoDB(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	client, table := dynalitetest.ForExamples()
	url := "dynamodb://" + table + "?region=us-east-1&endpoint=" + endpoint
	if r := runCLI(t, awsEnv, "ledger", "init", "--ledger", url).wantOK(t); !strings.Contains(r.stdout, table) {
		t.Errorf("init: %q", r.stdout)
	}
	runCLI(t, awsEnv, "ledger", "init", "--ledger", url).wantOK(t) // idempotent
	clock := clock.NewFake(time.Now())
	seed(t, ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clock}), clock)
	testLedgerOps(t, url, awsEnv)
	if r := runCLI(t, awsEnv, "ledger", "purge", "--ledger", url).wantOK(t); !strings.Contains(r.stdout, "TTL") {
		t.Errorf("purge on DynamoDB: %q", r.stdout)
	}
}

// oncely ledger init with shards=N on a table made without the sharded
// index adds it, files the records under it and says what it did (and
// that the unsharded index is still there); the ledger commands then
// work on the sharded index, and init again finds the index in place.
// dynalite cannot add an index to a table: dynalitetest.IndexProxy does
// it by copying the table.
func TestLedgerDynamoDBShards(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.IndexProxy(t, dynalitetest.Endpoint(t))
	client, table := dynalitetest.ForExamples()
	url := "dynamodb://" + table + "?region=us-east-1&endpoint=" + endpoint
	if r := runCLI(t, awsEnv, "ledger", "init", "--ledger", url+"&shards=unsharded").wantOK(t); !strings.Contains(r.stdout, "index state-lease_until (unsharded") {
		t.Errorf("init: %q", r.stdout)
	}
	clock := clock.NewFake(time.Now())
	unsharded := ledgerdynamo.Layout{Shards: ledgerdynamo.Unsharded}
	seed(t, ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clock, Layout: unsharded}), clock)
	sharded := url + "&shards=4"
	r := runCLI(t, awsEnv, "ledger", "init", "--ledger", sharded).wantOK(t)
	for _, want := range []string{
		"index state_shard-lease_until (4 shards, projecting the keys, run and expiry): created",
		"records: 5 read, 5 filed under their index shard\n",
		"index state-lease_until (unsharded): still on the table, for the processes on the unsharded layout\n",
		"ledger " + sharded + " is ready",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("init with shards lacks %q:\n%s", want, r.stdout)
		}
	}
	testLedgerOps(t, sharded, awsEnv)
	r = runCLI(t, awsEnv, "ledger", "init", "--ledger", sharded).wantOK(t)
	if !strings.Contains(r.stdout, "exists, with index state_shard-lease_until") || strings.Contains(r.stdout, "created") {
		t.Errorf("init again:\n%s", r.stdout)
	}
}

func TestLedgerDynamoDBUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	url := "dynamodb://oncely?region=us-east-1&endpoint=http://" + addr
	runCLI(t, awsEnv, "ledger", "ls", "--ledger", url).wantError(t, exitOperational, "unavailable", "reachable")
	runCLI(t, awsEnv, "ledger", "show", "k", "--ledger", url).wantError(t, exitOperational, "unavailable")
	runCLI(t, awsEnv, "ledger", "init", "--ledger", url).wantError(t, exitOperational, "describe table", "connection refused")
}

// More stuck records than the default limit: stuck prints the first
// ones, oldest first, and says how many there are; --all prints every one;
// ls says which of how many records it printed.
func TestLedgerListingsBeyondTheLimit(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncely.db")
	clock := clock.NewFake(time.Now().Add(-time.Hour))
	s, err := ledgersqlite.Open(context.Background(), path, &ledgersqlite.Config{Clock: clock, Synchronous: ledgersqlite.SyncNormal})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1205 // above the default --limit (1000) and a page of the store
	ctx := context.Background()
	var want []string
	for i := range n {
		key := fmt.Sprintf("k-%04d", i)
		now := clock.Now()
		if _, err := s.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-a", Owner: "o",
			LeaseUntil: now.Add(time.Second), Fingerprint: "fp", ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // uncertain, settled now; the others lapse a second later
			if err := s.Fail(ctx, key, "o", ledger.Failure{Reason: "timeout"}); err != nil {
				t.Fatal(err)
			}
		}
		want = append(want, key)
		clock.Advance(2 * time.Second)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	url := "sqlite://" + path

	ok := func(r result) result {
		t.Helper()
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		return r
	}
	r := ok(runCLI(t, nil, "ledger", "stuck", "--ledger", url, "--json"))
	if got := keysOf(t, r.stdout); !slices.Equal(got, want[:1000]) {
		t.Errorf("stuck: %d records (%.3v...), want the oldest 1000", len(got), got)
	}
	if !strings.Contains(r.stderr, "1000 of 1205 stuck records") || !strings.Contains(r.stderr, "--all") {
		t.Errorf("stuck does not say what it cut: %q", r.stderr)
	}
	r = runCLI(t, nil, "ledger", "stuck", "--ledger", url, "--json", "--all").wantOK(t)
	if got := keysOf(t, r.stdout); !slices.Equal(got, want) || r.stderr != "" {
		t.Errorf("stuck --all: %d records, stderr %q; want all %d in order", len(got), r.stderr, n)
	}
	r = runCLI(t, nil, "ledger", "stuck", "--ledger", url, "--all").wantOK(t)
	if rows := lines(r.stdout); len(rows) != n+2 { // two tables, each with its header
		t.Errorf("stuck --all as tables: %d lines, want %d", len(rows), n+2)
	}

	r = ok(runCLI(t, nil, "ledger", "ls", "--ledger", url, "--limit", "100", "--page", "12"))
	if rows := lines(r.stdout); len(rows) != 101 || !strings.HasPrefix(rows[1], "k-0104") {
		t.Errorf("ls page 12: %d lines starting %q, want a header and 100 records from k-0104", len(rows), rows[:min(2, len(rows))])
	}
	if !strings.Contains(r.stderr, "records 1101 to 1200 of 1205") || !strings.Contains(r.stderr, "--page 13") {
		t.Errorf("ls does not say what it printed of how many: %q", r.stderr)
	}
}

// resolve --failed waits for the requests that may still be in flight, as
// the reconciler does, unless forced.
func TestLedgerResolveFailedWaitsForInFlight(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "oncely.db")
	url := "sqlite://" + path
	runCLI(t, nil, "ledger", "init", "--ledger", url).wantOK(t)
	s, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	if _, err := s.Claim(ctx, ledger.ClaimParams{Key: "k-late", Tool: "send_reply", RunID: "r", Owner: "o", Fingerprint: "fp",
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ctx, "k-late", "o", ledger.Failure{Reason: "timeout after the request was sent"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	runCLI(t, nil, "ledger", "resolve", "k-late", "--ledger", url, "--failed", "--reason", "not found", "--in-flight", "1h").
		wantError(t, exitOperational, "too early", "may still commit until", "--force")
	runCLI(t, nil, "ledger", "resolve", "k-late", "--ledger", url, "--done", "--summary", "s", "--force").
		wantError(t, exitUsage, "--force goes with --failed")
	if rec := decodeJSON[recordJSON](t, runCLI(t, nil, "ledger", "show", "k-late", "--ledger", url, "--json").wantOK(t).stdout); rec.State != ledger.StateUncertain {
		t.Fatalf("a refused resolve changed the record: %+v", rec)
	}
	r := runCLI(t, nil, "ledger", "resolve", "k-late", "--ledger", url, "--failed", "--reason", "provider confirmed", "--in-flight", "1h", "--force", "--json").wantOK(t)
	if rec := decodeJSON[recordJSON](t, r.stdout); rec.State != ledger.StateFailed {
		t.Errorf("resolve --failed --force: %+v", rec)
	}
}
