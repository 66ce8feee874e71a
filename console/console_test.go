package console

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

// key makes a 64-hex action key from a short name.
func key(name string) string { return (name + strings.Repeat("0", 64))[:64] }

// seed writes one record in each situation an operator meets, on clk,
// and returns the clock's time afterwards.
func seed(t *testing.T, s ledger.Store, clk *clock.Fake) time.Time {
	t.Helper()
	ctx := context.Background()
	now := clk.Now()
	at := func(d time.Duration) { clk.Set(now.Add(d)) }
	claim := func(k, tool, run string, lease time.Duration) {
		t.Helper()
		cr, err := s.Claim(ctx, ledger.ClaimParams{Key: key(k), Tool: tool, RunID: run, Owner: "owner-" + k,
			LeaseUntil: clk.Now().Add(lease), Fingerprint: "fp", ExpiresAt: clk.Now().Add(24 * time.Hour)})
		if err != nil || !cr.Claimed {
			t.Fatalf("claim %s: %+v %v", k, cr, err)
		}
	}
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	at(-50 * time.Minute)
	claim("d0e", "send_reply", "run-a", time.Minute)
	check(s.Complete(ctx, key("d0e"), "owner-d0e", ledger.Completion{Summary: "message msg_1 sent", Ref: "msg_1"}))
	at(-40 * time.Minute)
	claim("fa1", "send_reply", "run-a", time.Minute)
	check(s.Fail(ctx, key("fa1"), "owner-fa1", ledger.Failure{Definite: true, Reason: "400 invalid address"}))
	at(-30 * time.Minute)
	claim("0c1", "refund_order", "run-b", time.Minute)
	check(s.Fail(ctx, key("0c1"), "owner-0c1", ledger.Failure{Reason: "timeout after the request was sent"}))
	at(-2 * time.Hour)
	claim("ab0", "send_reply", "run-b", time.Hour)
	at(-10 * time.Minute)
	claim("11e", "send_reply", "run-c", 2*time.Hour)
	at(0)
	return now
}

type fixture struct {
	t     *testing.T
	store ledger.Store
	clk   *clock.Fake
	srv   *httptest.Server
	c     *Console
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	store := ledgermem.New(&ledgermem.Config{Clock: clk})
	seed(t, store, clk)
	cfg.Store, cfg.Clock = store, clk
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &fixture{t: t, store: store, clk: clk, srv: srv, c: c}
}

// client returns an HTTP client with cookies that does not follow
// redirects, so that tests see them.
func (f *fixture) client() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) get(path string, hdr ...string) (int, string) {
	f.t.Helper()
	return f.do(f.client(), http.MethodGet, path, nil, hdr...)
}

func (f *fixture) do(cl *http.Client, method, path string, form url.Values, hdr ...string) (int, string) {
	f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := cl.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// form returns the CSRF token of an action page.
func (f *fixture) csrf(k string, hdr ...string) string {
	f.t.Helper()
	code, body := f.get("/action/"+k, hdr...)
	m := csrfRe.FindStringSubmatch(body)
	if code != http.StatusOK {
		f.t.Fatalf("action page %s: %d", k, code)
	}
	if m == nil { // a page without a form: the token its forms would carry
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return f.c.csrf(req)
	}
	return m[1]
}

func (f *fixture) record(k string) *ledger.Record {
	f.t.Helper()
	r, err := f.store.Get(context.Background(), k)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

// keysIn returns the action keys a page links to, in order.
func keysIn(body string) []string {
	var keys []string
	for _, m := range regexp.MustCompile(`data-key="([0-9a-f]+)"`).FindAllStringSubmatch(body, -1) {
		keys = append(keys, m[1][:3])
	}
	return keys
}

func TestAttentionListsStuckOldestFirst(t *testing.T) {
	f := newFixture(t, Config{Adapters: map[string]providers.Adapter{"refund_order": lookup{status: providers.Found}}})
	code, body := f.get("/")
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	// The abandoned pending record's lease ended 1 h ago, the uncertain
	// record was settled 30 min ago: oldest first. Done, failed and the
	// live pending record are not listed.
	if got := strings.Join(keysIn(body), ","); got != "ab0,0c1" {
		t.Errorf("attention lists %s, want ab0,0c1:\n%s", got, body)
	}
	for _, want := range []string{"refund_order", "run-b", "timeout after the request was sent", "lease lapsed",
		"no reconciler here"} {
		if !strings.Contains(body, want) {
			t.Errorf("attention page lacks %q", want)
		}
	}
	// The uncertain refund's reconciler (a consistent lookup) concludes
	// at its settlement plus the in-flight bound: 30s after 11:30.
	if !strings.Contains(body, `title="2026-03-01 11:30:30.000Z"`) {
		t.Errorf("attention page does not say when the reconciler concludes (11:30:30):\n%s", body)
	}
	// The live part alone, for the refresh.
	code, frag := f.get("/?fragment=1")
	if code != http.StatusOK || strings.Contains(frag, "<html") || !strings.Contains(frag, "attention-count") {
		t.Errorf("fragment: %d\n%s", code, frag)
	}
}

func TestAttentionEmpty(t *testing.T) {
	clk := clock.NewFake(time.Now())
	c, err := New(Config{Store: ledgermem.New(&ledgermem.Config{Clock: clk}), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Nothing needs attention") {
		t.Errorf("%d\n%s", rec.Code, rec.Body)
	}
}

func TestActionPageShowsEveryField(t *testing.T) {
	f := newFixture(t, Config{})
	code, body := f.get("/action/" + key("d0e"))
	if code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	for _, want := range []string{key("d0e"), "message msg_1 sent", "msg_1", "run-a", "send_reply", "owner-d0e", "fp", ">done<"} {
		if !strings.Contains(body, want) {
			t.Errorf("action page lacks %q", want)
		}
	}
	if strings.Contains(body, "mark-done") {
		t.Error("a done record offers to be resolved")
	}
	if code, _ := f.get("/action/" + key("404")); code != http.StatusNotFound {
		t.Errorf("unknown key: %d", code)
	}
}

func TestResolveDoneRecordsWhoAndWhy(t *testing.T) {
	f := newFixture(t, Config{User: "alice"})
	k := key("0c1")
	tok := f.csrf(k)
	code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {tok}, "verdict": {"done"}, "ref": {"re_42"}, "note": {"refund re_42 found in the dashboard"}})
	if code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	r := f.record(k)
	if r.State != ledger.StateDone || r.Ref != "re_42" || r.ResolvedBy() != "alice" || !strings.Contains(r.Summary, "found in the dashboard") {
		t.Errorf("record after resolve: %+v", r)
	}
	if _, body := f.get("/"); strings.Contains(body, `data-key="`+k) {
		t.Error("a resolved record is still listed as needing attention")
	}
}

func TestResolveNeedsNote(t *testing.T) {
	f := newFixture(t, Config{})
	k := key("0c1")
	code, body := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", url.Values{"csrf": {f.csrf(k)}, "verdict": {"done"}, "note": {"  "}})
	if code != http.StatusConflict || !strings.Contains(body, "a note is required") {
		t.Errorf("resolve without a note: %d\n%s", code, body)
	}
	if r := f.record(k); r.State != ledger.StateUncertain {
		t.Errorf("record changed: %+v", r)
	}
}

// Marking failed is refused as ledger.Resolve refuses it, with the time it
// becomes allowed, and allowed from then.
func TestResolveFailedRefusedWhileInFlight(t *testing.T) {
	f := newFixture(t, Config{InFlight: time.Hour})
	k := key("0c1") // uncertain, settled at 11:30
	_, page := f.get("/action/" + k)
	if !strings.Contains(page, `id="mark-failed" disabled`) || !strings.Contains(page, "allowed from 2026-03-01 12:30:00.000Z") {
		t.Errorf("the page does not say when mark failed is allowed:\n%s", page)
	}
	form := url.Values{"csrf": {f.csrf(k)}, "verdict": {"failed"}, "note": {"no refund at the provider"}}
	code, body := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form)
	if code != http.StatusConflict || !strings.Contains(body, "not yet") || !strings.Contains(body, "2026-03-01T12:30:00Z") ||
		strings.Contains(body, "force it") || !strings.Contains(body, "mark it done") || !strings.Contains(body, `data-enable-in="1800000"`) {
		t.Errorf("early failure: %d\n%s", code, body)
	}
	if r := f.record(k); r.State != ledger.StateUncertain {
		t.Fatalf("record changed: %+v", r)
	}
	f.clk.Set(time.Date(2026, 3, 1, 12, 30, 0, 0, time.UTC))
	if code, body := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form); code != http.StatusSeeOther {
		t.Fatalf("failure at the bound: %d\n%s", code, body)
	}
	if r := f.record(k); r.State != ledger.StateFailed || !strings.Contains(r.Reason, "no refund at the provider") || r.ResolvedBy() != "operator" {
		t.Errorf("record: %+v", r)
	}
}

func TestResolveLiveLeaseRefused(t *testing.T) {
	f := newFixture(t, Config{})
	k := key("11e")
	_, page := f.get("/action/" + k)
	if strings.Contains(page, "mark-done") || !strings.Contains(page, "cannot be settled before then") {
		t.Errorf("a live pending record offers to be resolved:\n%s", page)
	}
	// Posting anyway is refused by ledger.Resolve.
	code, body := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", url.Values{"csrf": {f.csrf(k)}, "verdict": {"done"}, "note": {"x"}})
	if code != http.StatusConflict || !strings.Contains(body, "live lease") {
		t.Errorf("%d\n%s", code, body)
	}
}

func TestCSRF(t *testing.T) {
	f := newFixture(t, Config{})
	k := key("0c1")
	form := url.Values{"verdict": {"done"}, "note": {"found"}}
	if code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form); code != http.StatusForbidden {
		t.Errorf("POST without a CSRF token: %d", code)
	}
	form.Set("csrf", strings.Repeat("0", 64))
	if code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form); code != http.StatusForbidden {
		t.Errorf("POST with a wrong CSRF token: %d", code)
	}
	form.Set("csrf", f.csrf(k))
	if code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form, "Sec-Fetch-Site", "cross-site"); code != http.StatusForbidden {
		t.Errorf("cross-site POST: %d", code)
	}
	if code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form, "Origin", "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("POST from another origin: %d", code)
	}
	if code, _ := f.do(f.client(), http.MethodGet, "/action/"+k+"/resolve?"+form.Encode(), nil); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of an action: %d", code)
	}
	if r := f.record(k); r.State != ledger.StateUncertain {
		t.Fatalf("a refused request changed the record: %+v", r)
	}
	if code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve", form, "Sec-Fetch-Site", "same-origin"); code != http.StatusSeeOther {
		t.Errorf("same-origin POST with the token: %d", code)
	}
}

func TestReadOnlyServesNoAction(t *testing.T) {
	f := newFixture(t, Config{ReadOnly: true, Adapters: map[string]providers.Adapter{"refund_order": lookup{status: providers.Found}}})
	k := key("0c1")
	_, page := f.get("/action/" + k)
	if strings.Contains(page, "<form method=\"post\"") || !strings.Contains(page, "read-only") {
		t.Errorf("a read-only console offers actions:\n%s", page)
	}
	tok := f.c.csrf(httptest.NewRequest(http.MethodGet, "/", nil))
	for _, p := range []string{"/resolve", "/reconcile"} {
		code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+p, url.Values{"csrf": {tok}, "verdict": {"done"}, "note": {"x"}})
		if code != http.StatusForbidden {
			t.Errorf("read-only POST %s: %d", p, code)
		}
	}
	if r := f.record(k); r.State != ledger.StateUncertain {
		t.Errorf("read-only console changed the record: %+v", r)
	}
}

func TestToken(t *testing.T) {
	f := newFixture(t, Config{Token: "s3cret"})
	if code, _ := f.get("/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, _ := f.get("/", "Authorization", "Bearer nope"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", code)
	}
	if code, _ := f.get("/?token=nope"); code != http.StatusUnauthorized {
		t.Errorf("wrong ?token: %d", code)
	}
	// Any Host is accepted once the token is required.
	if code, _ := f.get("/", "Authorization", "Bearer s3cret", "Host", "console.internal:8080"); code != http.StatusOK {
		t.Errorf("bearer token: %d", code)
	}
	// ?token= sets a cookie and redirects to the URL without it.
	cl := f.client()
	code, _ := f.do(cl, http.MethodGet, "/search?token=s3cret&run=run-a", nil)
	if code != http.StatusSeeOther {
		t.Fatalf("?token=: %d", code)
	}
	if code, body := f.do(cl, http.MethodGet, "/search?run=run-a", nil); code != http.StatusOK || !strings.Contains(body, "run-a") {
		t.Errorf("with the cookie: %d", code)
	}
}

func TestUserHeader(t *testing.T) {
	f := newFixture(t, Config{UserHeader: "X-Forwarded-User"})
	if code, _ := f.get("/"); code != http.StatusUnauthorized {
		t.Errorf("without the proxy's header: %d", code)
	}
	k := key("0c1")
	hdr := []string{"X-Forwarded-User", "bob@example.com", "Host", "console.internal"}
	code, body := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {f.csrf(k, hdr...)}, "verdict": {"done"}, "note": {"seen"}}, hdr...)
	if code != http.StatusSeeOther {
		t.Fatalf("resolve: %d\n%s", code, body)
	}
	if r := f.record(k); r.ResolvedBy() != "bob@example.com" {
		t.Errorf("resolved by %q, want the proxy's user", r.ResolvedBy())
	}
	// Another user's CSRF token is not this user's.
	k2 := key("ab0")
	tok := f.csrf(k2, "X-Forwarded-User", "mallory")
	if code, _ := f.do(f.client(), http.MethodPost, "/action/"+k2+"/resolve",
		url.Values{"csrf": {tok}, "verdict": {"done"}, "note": {"x"}}, hdr...); code != http.StatusForbidden {
		t.Errorf("another user's CSRF token: %d", code)
	}
}

// The user header is believed only from the trusted proxies' addresses:
// from any other, a forged header is refused, whatever it names.
func TestUserHeaderOnlyFromTrustedProxies(t *testing.T) {
	hdr := []string{"X-Forwarded-User", "admin"}
	for _, tc := range []struct {
		proxies []netip.Prefix
		want    int
	}{
		{nil, http.StatusOK}, // the default: loopback, where the test's requests come from
		{[]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, http.StatusOK},
		{[]netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}, http.StatusForbidden},
		{[]netip.Prefix{netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("::1/128")}, http.StatusForbidden},
	} {
		f := newFixture(t, Config{UserHeader: "X-Forwarded-User", TrustedProxies: tc.proxies})
		if code, body := f.get("/", hdr...); code != tc.want {
			t.Errorf("proxies %v, a request from 127.0.0.1 naming admin: %d, want %d\n%s", tc.proxies, code, tc.want, body)
		}
	}
	f := newFixture(t, Config{UserHeader: "X-Forwarded-User", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}})
	k := key("0c1")
	code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {f.c.csrf(httptest.NewRequest("GET", "/", nil))}, "verdict": {"done"}, "note": {"forged"}}, hdr...)
	if code != http.StatusForbidden || f.record(k).State != ledger.StateUncertain {
		t.Errorf("a forged resolution from an untrusted address: %d, record %s", code, f.record(k).State)
	}
}

// Without a token the console answers only to loopback host names, so a
// page on another site cannot reach it through DNS rebinding.
func TestLoopbackHostOnly(t *testing.T) {
	f := newFixture(t, Config{})
	for host, want := range map[string]int{"127.0.0.1:9": 200, "localhost:9": 200, "[::1]:9": 200, "evil.example:9": 403, "10.0.0.1": 403} {
		if code, _ := f.get("/", "Host", host); code != want {
			t.Errorf("Host %s: %d, want %d", host, code, want)
		}
	}
}

func TestCheckListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		cfg  Config
		ok   bool
	}{
		{"127.0.0.1:8080", Config{}, true},
		{"localhost:8080", Config{}, true},
		{"[::1]:8080", Config{}, true},
		{"0.0.0.0:8080", Config{}, false},
		{":8080", Config{}, false},
		{"10.1.2.3:8080", Config{}, false},
		{"0.0.0.0:8080", Config{Token: "t"}, true},
		{"0.0.0.0:8080", Config{UserHeader: "X-Forwarded-User"}, false},
		{"0.0.0.0:8080", Config{UserHeader: "X-Forwarded-User", Token: "t"}, false},
		{"0.0.0.0:8080", Config{UserHeader: "X-Forwarded-User", TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}}, true},
		{"127.0.0.1:8080", Config{UserHeader: "X-Forwarded-User"}, true},
		{"nonsense", Config{Token: "t"}, false},
	} {
		if err := CheckListen(tc.addr, &tc.cfg); (err == nil) != tc.ok {
			t.Errorf("CheckListen(%q, %+v): %v", tc.addr, tc.cfg, err)
		}
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	s := ledgermem.New(nil)
	for _, cfg := range []Config{{}, {Store: s, User: "a:b"}, {Store: s, UserHeader: "Bad Header"}, {Store: s, UserHeader: "Cookie"}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}

func TestSearch(t *testing.T) {
	f := newFixture(t, Config{})
	for q, want := range map[string]string{
		"run=run-a":                                 "d0e,fa1",
		"state=uncertain":                           "0c1",
		"tool=refund_order":                         "0c1",
		"key=fa":                                    "fa1",
		"key=" + key("d0e"):                         "d0e",
		"dkey=" + key("0c1"):                        "0c1",
		"dkey=" + key("0c1") + "-2":                 "",
		"dkey=" + key("fa1") + "-2":                 "fa1",     // a failed record's next attempt
		"from=2026-03-01T11:01&to=2026-03-01T11:25": "d0e,fa1", // settled 11:11 and 11:21
		"state=pending":                             "ab0,11e",
	} {
		code, body := f.get("/search?" + q)
		if code != http.StatusOK {
			t.Errorf("search %s: %d", q, code)
			continue
		}
		if got := strings.Join(keysIn(body), ","); got != want {
			t.Errorf("search %s: %s, want %s", q, got, want)
		}
	}
	if code, body := f.get("/search?state=bogus&from=yesterday"); code != http.StatusBadRequest || !strings.Contains(body, "state is pending") {
		t.Errorf("bad search: %d\n%s", code, body)
	}
}

func TestOverview(t *testing.T) {
	f := newFixture(t, Config{})
	code, body := f.get("/overview?range=6h")
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, body)
	}
	// The totals row: done 1, failed 1, uncertain 1, pending 2 (the
	// abandoned record's lease ended at 11:00, the live one's ends at
	// 13:50, after now: outside the range), resolved 0.
	sum := regexp.MustCompile(`(?s)<tr class="sum">(.*?)</tr>`).FindStringSubmatch(body)
	if sum == nil || !strings.Contains(sum[1], "<td>all</td><td>1</td><td>1</td><td>1</td><td>1</td><td>0</td>") {
		t.Errorf("totals: %v\n%s", sum, body)
	}
	if !strings.Contains(body, "<svg") || !strings.Contains(body, `id="oldest-uncertain">30m ago`) {
		t.Errorf("overview lacks the chart or the oldest uncertain action's age")
	}
	if code, body := f.get("/overview?range=1h&tool=refund_order"); code != http.StatusOK ||
		!regexp.MustCompile(`<td>all</td><td>0</td><td>0</td><td>1</td>`).MatchString(body) {
		t.Errorf("1h of refund_order: %d\n%s", code, body)
	}
}

// lookup is an adapter whose lookups give one answer.
type lookup struct {
	status providers.LookupStatus
	calls  *int
}

func (l lookup) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Consistent}
}

func (l lookup) Lookup(_ context.Context, dk string) (providers.LookupResult, error) {
	if l.calls != nil {
		*l.calls++
	}
	if l.status == providers.Found {
		return providers.LookupResult{Status: providers.Found, Ref: "re_found", Summary: "refund re_found for " + dk[:3]}, nil
	}
	return providers.LookupResult{Status: l.status}, nil
}

func TestReconcileNow(t *testing.T) {
	calls := 0
	f := newFixture(t, Config{Adapters: map[string]providers.Adapter{"refund_order": lookup{status: providers.Found, calls: &calls}}})
	k := key("0c1")
	_, page := f.get("/action/" + k)
	if !strings.Contains(page, `id="reconcile"`) {
		t.Fatal("no reconcile now on a tool with an adapter")
	}
	code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/reconcile", url.Values{"csrf": {f.csrf(k)}})
	if code != http.StatusSeeOther {
		t.Fatalf("reconcile: %d", code)
	}
	if r := f.record(k); r.State != ledger.StateDone || r.Ref != "re_found" || calls != 1 {
		t.Errorf("after reconcile now: %+v (%d lookups)", r, calls)
	}
	// Only that record was examined; no sweep position was written.
	if r := f.record(key("ab0")); r.State != ledger.StatePending {
		t.Errorf("another record changed: %+v", r)
	}
	if _, err := f.store.Get(context.Background(), "oncely/sweeper/"); err == nil {
		t.Error("reconcile now wrote a sweep position")
	}
	// Without an adapter for the tool, the page offers none and a POST is
	// answered with why.
	k2 := key("ab0")
	if _, page := f.get("/action/" + k2); strings.Contains(page, `id="reconcile"`) {
		t.Error("reconcile now offered without a reconciler")
	}
	code, body := f.do(f.client(), http.MethodPost, "/action/"+k2+"/reconcile", url.Values{"csrf": {f.csrf(k2)}})
	if code != http.StatusConflict || !strings.Contains(body, "no reconciler is configured for tool send_reply") {
		t.Errorf("reconcile without adapter: %d", code)
	}
	if r := f.record(k2); r.State != ledger.StatePending {
		t.Errorf("changed: %+v", r)
	}
}

func TestStaticAssetsEmbedded(t *testing.T) {
	f := newFixture(t, Config{})
	for _, p := range []string{"/static/console.css", "/static/console.js"} {
		if code, body := f.get(p); code != http.StatusOK || len(body) < 100 {
			t.Errorf("%s: %d", p, code)
		}
	}
	_, body := f.get("/")
	if regexp.MustCompile(`(src|href)="(https?:)?//`).MatchString(body) {
		t.Error("a page loads something from elsewhere")
	}
}

// The overview's replay and reconcile rates are what executors and a
// sweep did, as their counter records tell, and what an operator resolved
// by hand, as the records tell: three calls executed and four replayed
// (each replay writing nothing but its share of one counter record), one
// action a sweep's reconciler settled, one resolved by hand.
func TestOverviewRates(t *testing.T) {
	f := newFixture(t, Config{})
	ctx := context.Background()
	exec := client.New(f.store, &client.Config{Clock: f.clk})
	tool := client.Tool{Name: "refund_order", Identity: []client.Field{{Path: "order"}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "refunded", Ref: "re_1"}, nil
		}}
	if err := exec.Register(tool); err != nil {
		t.Fatal(err)
	}
	for i, order := range []string{"o1", "o2", "o3", "o1", "o2", "o1", "o3"} {
		res, err := exec.Execute(ctx, "run-r", client.Call{Tool: "refund_order", Input: []byte(`{"order":"` + order + `"}`)})
		want := client.Executed
		if i >= 3 {
			want = client.AlreadyDone
		}
		if err != nil || res.Outcome != want {
			t.Fatalf("call %d (%s): %v %v, want %v", i, order, res.Outcome, err, want)
		}
	}
	if err := exec.FlushCounters(ctx); err != nil {
		t.Fatal(err)
	}
	// The seeded uncertain refund (0c1) is settled by a sweep whose
	// reconciler finds it; another uncertain one is resolved by hand.
	sw := reconcile.NewSweeper(f.store, []client.Tool{{Name: "refund_order",
		Reconciler: reconcile.New(lookup{status: providers.Found}, &reconcile.Config{Clock: f.clk})}},
		&reconcile.SweeperConfig{Clock: f.clk})
	f.clk.Advance(time.Minute)
	if rep, err := sw.Sweep(ctx); err != nil || rep.Done != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if _, err := f.store.Claim(ctx, ledger.ClaimParams{Key: key("4a0"), Tool: "refund_order", RunID: "run-r", Owner: "o",
		LeaseUntil: f.clk.Now().Add(time.Minute), Fingerprint: "fp", ExpiresAt: f.clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Fail(ctx, key("4a0"), "o", ledger.Failure{Reason: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Resolve(ctx, f.store, key("4a0"), ledger.Resolution{Done: true, By: "alice", Summary: "seen"}, f.clk.Now()); err != nil {
		t.Fatal(err)
	}
	code, body := f.get("/overview?range=1h")
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, body)
	}
	row := regexp.MustCompile(`(?s)<tr data-tool="refund_order">(.*?)</tr>`).FindStringSubmatch(body)
	want := `<td class="name" title="refund_order">refund_order</td><td class="executed">3</td><td class="replayed">4</td><td class="merged">0</td>` +
		`<td class="replay-rate">57.1%</td><td class="reconciled">1</td><td class="hand">1</td><td class="reconcile-rate">50.0%</td>`
	if row == nil || row[1] != want {
		t.Errorf("rates of refund_order: %v, want %s\n%s", row, want, body)
	}
	// The counter records are no actions: no search lists them.
	if _, body := f.get("/search?state=done"); strings.Contains(body, ledger.CountersRun) {
		t.Errorf("a search lists counter records:\n%s", body)
	}
	// Without counters nothing is written for the calls' counts.
	quiet := client.New(f.store, &client.Config{Clock: f.clk, NoCounters: true})
	if err := quiet.Register(tool); err != nil {
		t.Fatal(err)
	}
	if _, err := quiet.Execute(ctx, "run-r", client.Call{Tool: "refund_order", Input: []byte(`{"order":"o1"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := quiet.FlushCounters(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := f.store.List(ctx, ledger.Filter{RunID: ledger.CountersRun})
	if err != nil || len(recs) != 2 { // the executor's and the sweep's
		t.Errorf("counter records: %d %v, want 2", len(recs), err)
	}
}

// Counter records are done records, listed among the actions' by time: a
// bucket that holds more of them than the overview reads of its done
// records still counts its actions (the seeded done send_reply settled at
// 11:10, after 150 counter records of 11:05), and no counter record is
// counted as an action; the rates read a bounded sample of each bar's
// counter records.
func TestOverviewCountsActionsAmongCounters(t *testing.T) {
	f := newFixture(t, Config{})
	now := f.clk.Now()
	f.clk.Set(now.Add(-55 * time.Minute))
	for range 150 {
		if err := counters.Write(context.Background(), f.store, f.clk, counters.Counts{Tool: "send_reply", Replayed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	f.clk.Set(now)
	code, body := f.get("/overview?range=6h")
	if code != http.StatusOK {
		t.Fatalf("%d\n%s", code, body)
	}
	sum := regexp.MustCompile(`(?s)<tr class="sum">(.*?)</tr>`).FindStringSubmatch(body)
	if sum == nil || !strings.Contains(sum[1], "<td>all</td><td>1</td><td>1</td><td>1</td><td>1</td><td>0</td>") {
		t.Errorf("totals: %v\n%s", sum, body)
	}
	if !strings.Contains(body, `<td class="replayed">150</td>`) || strings.Contains(body, "the counts are at least") {
		t.Errorf("the rates do not show the 150 replays:\n%s", body)
	}
	// With more than 2400 counter records in the range (2300 more at
	// 09:05), the rates read 2400/24 = 100 of each of the 24 bars of 6
	// hours, and say that their counts are at least.
	f.clk.Set(now.Add(-175 * time.Minute))
	for range 2300 {
		if err := counters.Write(context.Background(), f.store, f.clk, counters.Counts{Tool: "send_reply", Replayed: 1}); err != nil {
			t.Fatal(err)
		}
	}
	f.clk.Set(now)
	_, body = f.get("/overview?range=6h")
	sum = regexp.MustCompile(`(?s)<tr class="sum">(.*?)</tr>`).FindStringSubmatch(body)
	if sum == nil || !strings.Contains(sum[1], "<td>all</td><td>1</td><td>1</td><td>1</td><td>1</td><td>0</td>") {
		t.Errorf("totals among 2450 counter records: %v\n%s", sum, body)
	}
	if !strings.Contains(body, `<td class="replayed">200</td>`) || !strings.Contains(body, "the counts are at least") {
		t.Errorf("the rates do not show a sample of 100 replays from each of two bars:\n%s", body)
	}
}

// Only the console's own message codes render as a status message: a
// link with any other text makes the page say nothing it did not do.
func TestStatusMessagesOnlyByCode(t *testing.T) {
	f := newFixture(t, Config{})
	k := key("0c1")
	for _, q := range []string{"Refund+confirmed+by+the+bank", "marked+done+by+alice", "%3Cb%3Ex%3C%2Fb%3E"} {
		if _, page := f.get("/action/" + k + "?done=" + q); strings.Contains(page, `id="message"`) {
			t.Errorf("?done=%s renders a message:\n%s", q, page)
		}
	}
	code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {f.csrf(k)}, "verdict": {"done"}, "note": {"seen at the provider"}})
	if code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	if _, page := f.get("/action/" + k + "?done=marked-done"); !strings.Contains(page, `<p class="message" id="message">marked done by operator</p>`) {
		t.Errorf("the resolution's message:\n%s", page)
	}
}

// A note longer than the ledger keeps is refused with a clear message,
// the typed note kept in the form, nothing written; one at the limit is
// kept whole.
func TestLongNoteRefused(t *testing.T) {
	f := newFixture(t, Config{})
	k := key("0c1")
	long := strings.Repeat("n", 60_000)
	for _, verdict := range []string{"done", "failed"} {
		code, page := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
			url.Values{"csrf": {f.csrf(k)}, "verdict": {verdict}, "ref": {map[string]string{"done": "re_1"}[verdict]}, "note": {long}})
		if code != http.StatusBadRequest || !strings.Contains(page, "the note is 60000 bytes; the ledger keeps at most") ||
			!strings.Contains(page, "nothing was saved") || !strings.Contains(page, long) {
			t.Errorf("mark %s with a 60 kB note: %d\n%.2000s", verdict, code, page)
		}
		if r := f.record(k); r.State != ledger.StateUncertain {
			t.Fatalf("the refused note changed the record: %+v", r)
		}
	}
	code, page := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {f.csrf(k)}, "verdict": {"done"}, "note": {strings.Repeat("n", 70_000)}})
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(page, "the form is larger than 64 KiB") {
		t.Errorf("a 70 kB note: %d\n%.2000s", code, page)
	}
	note := strings.Repeat("m", ledger.MaxSummaryBytes-len("re_1: "))
	code, _ = f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {f.csrf(k)}, "verdict": {"done"}, "ref": {"re_1"}, "note": {note}})
	if r := f.record(k); code != http.StatusSeeOther || r.Summary != "re_1: "+note {
		t.Errorf("a note at the limit: %d, summary of %d bytes", code, len(r.Summary))
	}
}

// linked is an adapter that knows the provider's page of an effect.
type linked struct{ lookup }

func (linked) Link(ref, dk string) string {
	if ref == "" {
		return "https://provider.example/search?q=" + url.QueryEscape(dk)
	}
	return "https://provider.example/objects/" + url.PathEscape(ref)
}

// The attention list filters by tool, run and state, and sorts oldest
// first (the default, paged), newest first or by tool.
func TestAttentionFilterAndSort(t *testing.T) {
	f := newFixture(t, Config{})
	for _, tc := range []struct {
		q    string
		want []string
	}{
		{"", []string{"ab0", "0c1"}},
		{"?sort=newest", []string{"0c1", "ab0"}},
		{"?sort=tool", []string{"0c1", "ab0"}}, // refund_order before send_reply
		{"?tool=refund_order", []string{"0c1"}},
		{"?tool=send_reply&sort=newest", []string{"ab0"}},
		{"?state=lapsed", []string{"ab0"}},
		{"?state=uncertain", []string{"0c1"}},
		{"?run=run-b&state=uncertain", []string{"0c1"}},
		{"?run=run-a", nil},
	} {
		code, body := f.get("/" + tc.q)
		if got := keysIn(body); code != http.StatusOK || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("GET /%s: %d %v, want %v", tc.q, code, got, tc.want)
		}
	}
	for _, q := range []string{"?sort=random", "?state=done", "?tool=a%00b"} {
		if code, _ := f.get("/" + q); code != http.StatusBadRequest {
			t.Errorf("GET /%s: %d, want 400", q, code)
		}
	}
}

// The resolutions page lists who settled what by hand, when, with the
// note and what it changed; actions settled by oncely are not listed.
func TestResolutionsPage(t *testing.T) {
	f := newFixture(t, Config{UserHeader: "X-Forwarded-User", Adapters: map[string]providers.Adapter{"refund_order": linked{}}})
	hdr := []string{"X-Forwarded-User", "alice"}
	k := key("0c1")
	code, _ := f.do(f.client(), http.MethodPost, "/action/"+k+"/resolve",
		url.Values{"csrf": {f.csrf(k, hdr...)}, "verdict": {"done"}, "ref": {"re_77"}, "note": {"refund re_77 is in the dashboard"}}, hdr...)
	if code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	f.clk.Advance(time.Hour) // the lapsed record may be marked failed
	hdr = []string{"X-Forwarded-User", "bob"}
	k2 := key("ab0")
	code, _ = f.do(f.client(), http.MethodPost, "/action/"+k2+"/resolve",
		url.Values{"csrf": {f.csrf(k2, hdr...)}, "verdict": {"failed"}, "note": {"no reply was sent"}}, hdr...)
	if code != http.StatusSeeOther {
		t.Fatalf("resolve failed: %d", code)
	}
	code, body := f.get("/resolutions", hdr...)
	rows := regexp.MustCompile(`(?s)<tr data-key="([0-9a-f]+)">(.*?)</tr>`).FindAllStringSubmatch(body, -1)
	if code != http.StatusOK || len(rows) != 2 || rows[0][1] != k || rows[1][1] != k2 {
		t.Fatalf("resolutions: %d %d rows\n%s", code, len(rows), body)
	}
	for i, want := range [][]string{
		{`<td class="by">alice</td>`, `refund re_77 is in the dashboard</td>`, "settled done, provider&#39;s reference re_77", `href="https://provider.example/objects/re_77"`},
		{`<td class="by">bob</td>`, `>no reply was sent</td>`, "settled failed: the next call of the action acts again, as attempt 3"},
	} {
		for _, w := range want {
			if !strings.Contains(rows[i][2], w) {
				t.Errorf("resolution %d lacks %s:\n%s", i, w, rows[i][2])
			}
		}
	}
	if strings.Contains(body, key("d0e")) {
		t.Error("an action settled by oncely is listed among the resolutions")
	}
}

// An action's page has the timeline of its latest attempt, and a link to
// the provider's page where the tool's adapter knows one.
func TestActionTimelineAndLink(t *testing.T) {
	f := newFixture(t, Config{InFlight: time.Minute, Adapters: map[string]providers.Adapter{"refund_order": linked{}}})
	k := key("0c1") // claimed at 11:30, settled uncertain right after
	_, body := f.get("/action/" + k)
	tl := regexp.MustCompile(`(?s)<table class="timeline" id="timeline">(.*?)</table>`).FindStringSubmatch(body)
	if tl == nil {
		t.Fatalf("no timeline:\n%s", body)
	}
	var whats []string
	for _, m := range regexp.MustCompile(`<td class="what">([^<]*)</td>`).FindAllStringSubmatch(tl[1], -1) {
		whats = append(whats, m[1])
	}
	want := []string{"attempt 1 claimed", "settled uncertain: the provider may or may not have the effect",
		"a reconciler can conclude on its own", "mark failed allowed", "record expires"}
	if strings.Join(whats, "|") != strings.Join(want, "|") {
		t.Errorf("timeline %q, want %q", whats, want)
	}
	if !strings.Contains(tl[1], "owner owner-0c1") || !strings.Contains(tl[1], "timeout after the request was sent") {
		t.Errorf("the timeline does not say who or why:\n%s", tl[1])
	}
	if !strings.Contains(body, `id="provider-link" href="https://provider.example/search?q=`+k+`"`) {
		t.Errorf("no link to the provider:\n%s", body)
	}
	if _, body := f.get("/action/" + key("ab0")); strings.Contains(body, "provider-link") {
		t.Error("a link for a tool whose adapter knows none")
	}
}
