package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
	"github.com/oncely/oncely/ledger/ledgerurl"
)

// startConsole runs oncely console on url and returns the console's base URL.
func startConsole(t *testing.T, env []string, args ...string) string {
	t.Helper()
	p := start(t, env, append([]string{"console", "--listen", "127.0.0.1:0", "--user", "alice"}, args...)...)
	base := strings.TrimSpace(p.line(t))
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("oncely console printed %q, want its URL", base)
	}
	return strings.TrimSuffix(base, "/")
}

func fetch(t *testing.T, method, u string, form url.Values) (int, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// seedURL opens the ledger at raw and writes seed's records into it, and
// those of more.
func seedURL(t *testing.T, raw string, more ...func(*testing.T, ledger.Store, *clock.Fake)) {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Now())
	l, err := ledgerurl.Open(ctx, raw, &ledgerurl.Config{Create: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Init(ctx); err != nil {
		t.Fatal(err)
	}
	seed(t, l, clk)
	for _, m := range more {
		m(t, l, clk)
	}
}

// testConsoleOn drives oncely console over a seeded ledger: the attention
// list, one action's page, a resolution, and the list without it.
func testConsoleOn(t *testing.T, raw string, env []string) {
	t.Helper()
	base := startConsole(t, env, "--ledger", raw)
	code, page := fetch(t, http.MethodGet, base+"/", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", code, page)
	}
	keys := regexp.MustCompile(`data-key="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(keys) != 2 || keys[0][1] != "k-abandoned" || keys[1][1] != "k-uncertain" {
		t.Fatalf("needs attention lists %v, want k-abandoned, k-uncertain", keys)
	}
	code, page = fetch(t, http.MethodGet, base+"/action/k-uncertain", nil)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if code != http.StatusOK || m == nil || !strings.Contains(page, "timeout after the request was sent") {
		t.Fatalf("action page: %d\n%s", code, page)
	}
	code, _ = fetch(t, http.MethodPost, base+"/action/k-uncertain/resolve",
		url.Values{"csrf": {m[1]}, "verdict": {"done"}, "ref": {"msg_9"}, "note": {"msg_9 is in the provider's log"}})
	if code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	rec := decodeJSON[recordJSON](t, runCLI(t, env, "ledger", "show", "k-uncertain", "--ledger", raw, "--json").wantOK(t).stdout)
	if rec.State != ledger.StateDone || rec.Ref != "msg_9" || rec.ResolvedBy != "alice" {
		t.Errorf("record after the console resolved it: %+v", rec)
	}
	if _, page = fetch(t, http.MethodGet, base+"/", nil); strings.Contains(page, `data-key="k-uncertain"`) {
		t.Error("the resolved action is still listed")
	}
	for _, p := range []string{"/overview?range=6h", "/search?run=run-a", "/search?state=pending"} {
		if code, page := fetch(t, http.MethodGet, base+p, nil); code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", p, code, page)
		}
	}
}

func TestConsoleSQLite(t *testing.T) {
	t.Parallel()
	testConsoleOn(t, newSQLiteLedger(t), nil)
}

func TestConsolePostgres(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, pgtest.Pool(t))
	raw := pgURL(t, "schema="+schema+"&table=ledger")
	seedURL(t, raw)
	testConsoleOn(t, raw, nil)
	// The ledger opened by URL keeps no index of runs (no RunIndex): the
	// search by run says it reads records by time, and finds them.
	base := startConsole(t, nil, "--ledger", raw)
	code, page := fetch(t, http.MethodGet, base+"/search?run=run-a", nil)
	if code != http.StatusOK || !strings.Contains(page, "keeps no index of runs") || !strings.Contains(page, `data-key="k-done"`) {
		t.Errorf("search by run on PostgreSQL without a run index: %d\n%s", code, page)
	}
}

func TestConsoleRedis(t *testing.T) {
	t.Parallel()
	raw := redistest.URL(t) + "?prefix=" + url.QueryEscape("console-test-"+ledger.NewOwner()[:12]+":") + "&durability=unchecked"
	seedURL(t, raw)
	testConsoleOn(t, raw, nil)
}

func TestConsoleDynamoDB(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	client, table := dynalitetest.ForExamples()
	raw := "dynamodb://" + table + "?region=us-east-1&endpoint=" + endpoint
	runCLI(t, awsEnv, "ledger", "init", "--ledger", raw).wantOK(t)
	clk := clock.NewFake(time.Now())
	seed(t, ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clk}), clk)
	testConsoleOn(t, raw, awsEnv)
}

func TestConsoleRefusesOpenListenWithoutToken(t *testing.T) {
	t.Parallel()
	raw := newSQLiteLedger(t)
	runCLI(t, nil, "console", "--ledger", raw, "--listen", "0.0.0.0:0").
		wantError(t, exitUsage, "beyond loopback", "--token")
	// With a token it listens, and refuses requests without it.
	p := start(t, []string{EnvConsoleToken + "=tok-123"}, "console", "--ledger", raw, "--listen", "0.0.0.0:0")
	base := strings.Replace(strings.TrimSpace(p.line(t)), "0.0.0.0", "127.0.0.1", 1)
	base = strings.Replace(base, "[::]", "127.0.0.1", 1)
	if code, _ := fetch(t, http.MethodGet, base, nil); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code, _ := fetch(t, http.MethodGet, base+"?token=tok-123", nil); code != http.StatusSeeOther {
		t.Errorf("with the token: %d", code)
	}
}

func TestConsoleReadOnly(t *testing.T) {
	t.Parallel()
	raw := newSQLiteLedger(t)
	base := startConsole(t, nil, "--ledger", raw, "--read-only")
	_, page := fetch(t, http.MethodGet, base+"/action/k-uncertain", nil)
	if strings.Contains(page, `method="post"`) {
		t.Error("a read-only console offers actions")
	}
	if code, _ := fetch(t, http.MethodPost, base+"/action/k-uncertain/resolve", url.Values{"verdict": {"done"}, "note": {"x"}}); code != http.StatusForbidden {
		t.Errorf("POST to a read-only console: %d", code)
	}
}

// testBadText sends text no ledger field can hold (invalid UTF-8, a NUL
// byte) in every search field, an action key and a resolution's note:
// each is refused with 400 and a plain message, before any query, and
// nothing is written.
func testBadText(t *testing.T, raw string) {
	t.Helper()
	base := startConsole(t, nil, "--ledger", raw)
	check := func(what string, code int, page, want string) {
		t.Helper()
		if code != http.StatusBadRequest || !strings.Contains(page, want) ||
			strings.Contains(page, "SQLSTATE") || strings.Contains(page, "unavailable") {
			t.Errorf("%s: %d, want 400 saying %q:\n%s", what, code, want, page)
		}
	}
	for _, field := range []string{"run", "tool", "key", "dkey", "state", "from", "to"} {
		code, page := fetch(t, http.MethodGet, base+"/search?"+field+"=a%00b", nil)
		check("search "+field+" with NUL", code, page, "contains a NUL byte")
		code, page = fetch(t, http.MethodGet, base+"/search?"+field+"=a%FFb", nil)
		check("search "+field+" with invalid UTF-8", code, page, "not valid UTF-8")
	}
	code, page := fetch(t, http.MethodGet, base+"/action/k-uncertain%00", nil)
	check("action key with NUL", code, page, "contains a NUL byte")
	code, page = fetch(t, http.MethodGet, base+"/action/k-%C3%28", nil)
	check("action key with invalid UTF-8", code, page, "not valid UTF-8")
	_, page = fetch(t, http.MethodGet, base+"/action/k-uncertain", nil)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no form on the action page:\n%s", page)
	}
	code, page = fetch(t, http.MethodPost, base+"/action/k-uncertain/resolve",
		url.Values{"csrf": {m[1]}, "verdict": {"done"}, "note": {"checked\x00 at the provider"}})
	check("a note with NUL", code, page, "contains a NUL byte")
	code, page = fetch(t, http.MethodPost, base+"/action/k-uncertain%FF/resolve",
		url.Values{"csrf": {m[1]}, "verdict": {"done"}, "note": {"checked"}})
	check("resolving a key with invalid UTF-8", code, page, "not valid UTF-8")
	rec := decodeJSON[recordJSON](t, runCLI(t, nil, "ledger", "show", "k-uncertain", "--ledger", raw, "--json").wantOK(t).stdout)
	if rec.State != ledger.StateUncertain {
		t.Errorf("the refused resolution changed the record: %+v", rec)
	}
}

func TestConsoleBadTextSQLite(t *testing.T) {
	t.Parallel()
	testBadText(t, newSQLiteLedger(t))
}

func TestConsoleBadTextPostgres(t *testing.T) {
	t.Parallel()
	schema := pgtest.Schema(t, pgtest.Pool(t))
	raw := pgURL(t, "schema="+schema+"&table=ledger")
	seedURL(t, raw)
	testBadText(t, raw)
}

// --user-header beyond loopback needs --trusted-proxy; the header is then
// believed only from those addresses: a forged one from elsewhere is
// refused and records nothing.
func TestConsoleUserHeaderNeedsTrustedProxy(t *testing.T) {
	t.Parallel()
	raw := newSQLiteLedger(t)
	runCLI(t, nil, "console", "--ledger", raw, "--listen", "0.0.0.0:0", "--user-header", "X-Forwarded-User").
		wantError(t, exitUsage, "--trusted-proxy")
	runCLI(t, nil, "console", "--ledger", raw, "--listen", "0.0.0.0:0", "--user-header", "X-Forwarded-User", "--trusted-proxy", "not-an-ip").
		wantError(t, exitUsage, "--trusted-proxy")
	for _, tc := range []struct {
		proxy string
		want  int
	}{{"10.0.0.5", http.StatusForbidden}, {"127.0.0.0/8", http.StatusOK}} {
		p := start(t, nil, "console", "--ledger", raw, "--listen", "0.0.0.0:0", "--user-header", "X-Forwarded-User", "--trusted-proxy", tc.proxy)
		base := strings.Replace(strings.TrimSpace(p.line(t)), "0.0.0.0", "127.0.0.1", 1)
		base = strings.Replace(base, "[::]", "127.0.0.1", 1)
		req, err := http.NewRequest(http.MethodGet, base, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Forwarded-User", "admin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("--trusted-proxy %s, a request from 127.0.0.1 naming admin: %d, want %d", tc.proxy, resp.StatusCode, tc.want)
		}
	}
}
