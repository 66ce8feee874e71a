package ledgerurl_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
	"github.com/oncely/oncely/ledger/ledgertest"
	"github.com/oncely/oncely/ledger/ledgerurl"
)

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(func() int {
		return redistest.Main(func() int { return dynalitetest.Main(m) })
	}))
}

// The server backends open by URL, claim and read back; a malformed URL
// of theirs is a configuration error.
func TestServerBackends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgURL, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := pgURL.Query()
	q.Set("schema", pgtest.Schema(t, pgtest.Pool(t)))
	pgURL.RawQuery = q.Encode()
	// Without Create, a PostgreSQL table that does not exist is refused
	// and not created.
	if _, err := ledgerurl.Open(ctx, pgURL.String(), nil); !errors.Is(err, ledgerurl.ErrConfig) ||
		!strings.Contains(err.Error(), "does not exist (oncely ledger init creates it)") {
		t.Errorf("Open(%s) without Create: %v, want ErrConfig", pgURL, err)
	}
	rURL := redistest.URL(t)
	for _, raw := range []string{pgURL.String(), rURL + "?prefix=" + redistest.Prefix(t, rURL)} {
		l, err := ledgerurl.Open(ctx, raw, &ledgerurl.Config{Create: true})
		if err != nil {
			t.Fatalf("Open(%s): %v", raw, err)
		}
		now := time.Now()
		p := ledger.ClaimParams{Key: "k-" + t.Name(), Tool: "t", RunID: "r", Owner: "o", Fingerprint: "f",
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
		if res, err := l.Claim(ctx, p); err != nil || !res.Claimed {
			t.Errorf("%s: claim %+v, %v", l.URL, res, err)
		}
		if rec, err := l.Get(ctx, p.Key); err != nil || rec.State != ledger.StatePending {
			t.Errorf("%s: get %+v, %v", l.URL, rec, err)
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}
	for _, bad := range []string{"postgres://127.0.0.1:1/db?pool_max_conns=many", "postgres://127.0.0.1/db?table=no-dashes", "redis://127.0.0.1:1/0?wait=-1"} {
		if _, err := ledgerurl.Open(ctx, bad, nil); !errors.Is(err, ledgerurl.ErrConfig) {
			t.Errorf("Open(%q): %v, want ErrConfig", bad, err)
		}
	}
}

// roundTrip claims and completes one record through l.
func roundTrip(t *testing.T, l *ledgerurl.Ledger) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	cr, err := l.Claim(ctx, ledger.ClaimParams{Key: "k1", Tool: "t", RunID: "r", Owner: "o", LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
	if err != nil || !cr.Claimed {
		t.Fatalf("claim: %+v %v", cr, err)
	}
	if err := l.Complete(ctx, "k1", "o", ledger.Completion{Summary: "done"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := l.Get(ctx, "k1"); err != nil || rec.State != ledger.StateDone {
		t.Fatalf("get: %+v %v", rec, err)
	}
}

func TestSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "oncely.db")
	for _, raw := range []string{"sqlite://" + path, path} {
		if _, err := ledgerurl.Open(ctx, raw, nil); !errors.Is(err, ledgerurl.ErrConfig) {
			t.Errorf("Open(%q) of a missing file without Create: %v, want ErrConfig", raw, err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused open created the file (%v)", err)
	}
	l, err := ledgerurl.Open(ctx, "sqlite://"+path, &ledgerurl.Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.URL != "sqlite://"+path {
		t.Errorf("URL %q", l.URL)
	}
	if _, err := l.Init(ctx); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, l)
	if _, ok := l.Store.(ledger.Purger); !ok {
		t.Error("the SQLite store does not purge")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// A bare path is a SQLite file; now it exists.
	l, err = ledgerurl.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rec, err := l.Get(ctx, "k1"); err != nil || rec.Summary != "done" {
		t.Errorf("reopened: %+v %v", rec, err)
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a database, just text\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("SQL"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ raw, why string }{
		{"mongodb://localhost/oncely", "unknown scheme"},
		{"sqlite://" + filepath.Join(dir, "missing", "oncely.db"), "does not exist"},
		{"sqlite://" + text, "not a SQLite database"},
		{"sqlite://" + short, "not a SQLite database"},
		{"sqlite://" + dir, "is a directory"},
		{"sqlite://", "no file path"},
		{"sqlite://" + text + "?cache=shared", "only a path"},
		{"dynamodb://", "dynamodb://TABLE"},
		{"dynamodb://t/extra?region=x", "dynamodb://TABLE"},
		{"dynamodb://t?region=us-east-1&endpoint=ftp://h", "not an http(s) URL"},
		{"dynamodb://t?region=us-east-1&consistent=1", "unknown parameter"},
		{"dynamodb://t?region=us-east-1&shards=many", `shards="many" is not a number (or unsharded)`},
		{"dynamodb://t?region=us-east-1&shards=-2", "Shards -2: want 1 to 1000, 0 for 64, or -1 (Unsharded)"},
		{"dynamodb://t?region=us-east-1&eventual_replicas=yes", `eventual_replicas="yes": want allow`},
		{"dynamodb://user:hunter2@t?region=%zz", "not a URL"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			t.Parallel()
			_, err := ledgerurl.Open(context.Background(), tc.raw, &ledgerurl.Config{Create: true})
			var ue *ledgerurl.Error
			if !errors.Is(err, ledgerurl.ErrConfig) || !errors.As(err, &ue) {
				t.Fatalf("error %v, want an *Error matching ErrConfig", err)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q does not say %q", err, tc.why)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	if b, _ := os.ReadFile(text); !strings.HasPrefix(string(b), "not a database") {
		t.Error("a refused open changed the file")
	}
}

func TestDynamoDBNeedsRegion(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	_, err := ledgerurl.Open(context.Background(), "dynamodb://oncely", nil)
	if !errors.Is(err, ledgerurl.ErrConfig) || !strings.Contains(err.Error(), "region") {
		t.Fatalf("error %v, want a configuration error about the region", err)
	}
}

// A DynamoDB URL, by default, with the unsharded index and with shards=N: Init
// creates the table and says so, and the store works.
func TestDynamoDB(t *testing.T) {
	endpoint := dynalitetest.Endpoint(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	for _, tc := range []struct{ query, index string }{
		{"", "index state_shard-lease_until (64 shards, projecting the keys, run and expiry)"},
		{"&shards=unsharded", "index state-lease_until (unsharded, projecting all attributes)"},
		{"&shards=8", "index state_shard-lease_until (8 shards, projecting the keys, run and expiry)"},
	} {
		_, table := dynalitetest.ForExamples()
		ctx := context.Background()
		l, err := ledgerurl.Open(ctx, "dynamodb://"+table+"?region=us-east-1&endpoint="+endpoint+tc.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		did, err := l.Init(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := "table " + table + ": created, with " + tc.index; !strings.HasPrefix(did, want) {
			t.Errorf("Init said %q, want %q first", did, want)
		}
		roundTrip(t, l)
		if _, ok := l.Store.(ledger.Purger); ok {
			t.Error("the DynamoDB store claims to purge; its TTL does")
		}
	}
}

func TestSchemes(t *testing.T) {
	t.Parallel()
	if got := strings.Join(ledgerurl.Schemes(), ","); got != "dynamodb,postgres,postgresql,redis,rediss,sqlite" {
		t.Errorf("Schemes() = %s", got)
	}
}

// A Ledger hides none of its Store's optional interfaces: over any store,
// and as opened from a URL: PostgreSQL says its runs are not indexed (no
// Config.RunIndex), SQLite watches its file.
func TestPassesCapabilities(t *testing.T) {
	t.Parallel()
	ledgertest.RunWrapper(t, func(next ledger.Store) ledger.Store { return &ledgerurl.Ledger{Store: next, URL: "memory"} })
	ctx := context.Background()
	pg, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	q := pg.Query()
	q.Set("schema", pgtest.Schema(t, pgtest.Pool(t)))
	pg.RawQuery = q.Encode()
	l, err := ledgerurl.Open(ctx, pg.String(), &ledgerurl.Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if ledger.RunsIndexed(l) {
		t.Error("a PostgreSQL ledger without a run index says its runs are indexed")
	}
	s, err := ledgerurl.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "oncely.db"), &ledgerurl.Config{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, stop, err := s.Watch(ctx, "k")
	if err != nil {
		t.Errorf("a SQLite ledger does not watch: %v", err)
	} else {
		stop()
	}
}
