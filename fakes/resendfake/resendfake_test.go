package resendfake_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/resendfake"
)

const apiKey = "re_test_123456"

func start(t *testing.T, cfg *resendfake.Config) *resendfake.Server {
	t.Helper()
	s := resendfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, client *http.Client, url, method, path string, body any, header ...string) testutil.Reply {
	t.Helper()
	r, err := testutil.Do(client, method, url+path, body, append([]string{"Authorization", "Bearer " + apiKey}, header...)...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func wantError(t *testing.T, r testutil.Reply, status int, name string) {
	t.Helper()
	if r.Status != status || r.Str("name") != name || r.Num("statusCode") != float64(status) || r.Str("message") == "" {
		t.Fatalf("answer %d %s, want %d %s", r.Status, r.Raw, status, name)
	}
}

func email(subject string) map[string]any {
	return map[string]any{"from": "Acme <orders@acme.test>", "to": []string{"ada@example.com"}, "subject": subject,
		"text": "hello", "tags": []map[string]string{{"name": "oncely_key", "value": "k-1"}}}
}

// A keyed send is executed once: the repeat gets the first id, the key
// with another payload 409 invalid_idempotent_request, and after the
// window the key is free again.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	clk := testutil.NewClock()
	s := start(t, &resendfake.Config{Clock: clk})
	c := s.Client()
	first := do(t, c, s.URL, http.MethodPost, "/emails", email("Order 42"), "Idempotency-Key", "order-42")
	if first.Status != http.StatusOK || first.Str("id") == "" {
		t.Fatalf("send: %d %s", first.Status, first.Raw)
	}
	// Another key order and spacing is the same payload.
	same := `{"to": ["ada@example.com"], "subject": "Order 42", "from": "Acme <orders@acme.test>", "text": "hello",
		"tags": [{"value": "k-1", "name": "oncely_key"}]}`
	replay := do(t, c, s.URL, http.MethodPost, "/emails", same, "Idempotency-Key", "order-42")
	if replay.Status != http.StatusOK || replay.Str("id") != first.Str("id") {
		t.Fatalf("replay: %d %s, want id %s", replay.Status, replay.Raw, first.Str("id"))
	}
	wantError(t, do(t, c, s.URL, http.MethodPost, "/emails", email("Order 43"), "Idempotency-Key", "order-42"),
		http.StatusConflict, "invalid_idempotent_request")
	wantError(t, do(t, c, s.URL, http.MethodPost, "/emails", email("x"), "Idempotency-Key", strings.Repeat("k", 257)),
		http.StatusBadRequest, "invalid_idempotency_key")
	j := s.Journal()
	if len(j) != 1 || j[0].Key != "order-42" || j[0].ID != first.Str("id") || j[0].Kind != resendfake.KindEmail ||
		j[0].Params["tag.oncely_key"] != "k-1" || j[0].Params["to"] != "ada@example.com" {
		t.Fatalf("journal = %+v, want the one email", j)
	}
	clk.Advance(resendfake.DefaultKeyWindow)
	again := do(t, c, s.URL, http.MethodPost, "/emails", email("Order 42"), "Idempotency-Key", "order-42")
	if again.Status != http.StatusOK || again.Str("id") == first.Str("id") || len(s.Journal()) != 2 {
		t.Fatalf("after the window: %s, journal %d; want a new email", again.Raw, len(s.Journal()))
	}
	// Without a key every send sends.
	do(t, c, s.URL, http.MethodPost, "/emails", email("Order 42"))
	do(t, c, s.URL, http.MethodPost, "/emails", email("Order 42"))
	if n := len(s.Journal()); n != 4 {
		t.Fatalf("journal has %d emails, want 4", n)
	}
}

// A request with the key of one still executing answers 409
// concurrent_idempotent_requests; the first one then completes.
func TestConcurrentKey(t *testing.T) {
	t.Parallel()
	clk := testutil.NewSignalClock()
	s := start(t, &resendfake.Config{Clock: clk})
	s.Faults.Add(fault.Rule{Route: "POST /emails", Attempt: 1, Action: fault.Delay})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/emails", strings.NewReader(`{"from":"a@acme.test","to":"b@example.com","subject":"s","text":"t"}`))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Idempotency-Key", "busy")
		if resp, err := s.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	})
	<-clk.Read // the first request holds the key
	r := do(t, s.Client(), s.URL, http.MethodPost, "/emails", `{"from":"a@acme.test","to":"b@example.com","subject":"s","text":"t"}`, "Idempotency-Key", "busy")
	cancel()
	wg.Wait()
	wantError(t, r, http.StatusConflict, "concurrent_idempotent_requests")
}

// Resend's validation: required fields, addresses, recipients, tags.
func TestValidation(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	many := make([]string, 51)
	for i := range many {
		many[i] = fmt.Sprintf("r%d@example.com", i)
	}
	cases := []struct {
		name   string
		body   any
		status int
		errn   string
	}{
		{"not json", "{", http.StatusBadRequest, "validation_error"},
		{"array", "[]", http.StatusBadRequest, "validation_error"},
		{"no from", map[string]any{"to": "a@example.com", "subject": "s"}, 422, "missing_required_field"},
		{"no to", map[string]any{"from": "a@acme.test", "subject": "s"}, 422, "missing_required_field"},
		{"empty to", map[string]any{"from": "a@acme.test", "to": []string{}, "subject": "s"}, 422, "missing_required_field"},
		{"no subject", map[string]any{"from": "a@acme.test", "to": "a@example.com"}, 422, "missing_required_field"},
		{"bad from", map[string]any{"from": "acme", "to": "a@example.com", "subject": "s"}, 422, "validation_error"},
		{"bad to", map[string]any{"from": "a@acme.test", "to": []string{"a@example.com", "nobody"}, "subject": "s"}, 422, "validation_error"},
		{"bad cc", map[string]any{"from": "a@acme.test", "to": "a@example.com", "cc": 5, "subject": "s"}, 422, "validation_error"},
		{"51 recipients", map[string]any{"from": "a@acme.test", "to": many, "subject": "s"}, 422, "validation_error"},
		{"bad tag name", map[string]any{"from": "a@acme.test", "to": "a@example.com", "subject": "s", "tags": []map[string]string{{"name": "a b", "value": "v"}}}, 422, "validation_error"},
		{"bad tag value", map[string]any{"from": "a@acme.test", "to": "a@example.com", "subject": "s", "tags": []map[string]string{{"name": "n", "value": "a:b"}}}, 422, "validation_error"},
		{"long tag", map[string]any{"from": "a@acme.test", "to": "a@example.com", "subject": "s", "tags": []map[string]string{{"name": "n", "value": strings.Repeat("v", 257)}}}, 422, "validation_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantError(t, do(t, s.Client(), s.URL, http.MethodPost, "/emails", tc.body, "Idempotency-Key", "v-"+tc.name), tc.status, tc.errn)
		})
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("invalid requests sent %d emails", n)
	}
	// A refused request stores nothing under its key.
	ok := do(t, s.Client(), s.URL, http.MethodPost, "/emails", email("fixed"), "Idempotency-Key", "v-no to")
	if ok.Status != http.StatusOK {
		t.Fatalf("the key of a refused request: %d %s", ok.Status, ok.Raw)
	}
}

// Authentication: no key 401, a key that is not Resend's 403.
func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	r, err := testutil.Do(s.Client(), http.MethodGet, s.URL+"/emails", nil)
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, http.StatusUnauthorized, "missing_api_key")
	r, err = testutil.Do(s.Client(), http.MethodGet, s.URL+"/emails", nil, "Authorization", "Bearer sk_test_1")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, r, http.StatusForbidden, "invalid_api_key")
}

// Past RateLimit requests in a second of the fake's clock the answer is 429
// with Resend's headers, and nothing is sent; the next second is free.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	clk := testutil.NewClock()
	s := start(t, &resendfake.Config{Clock: clk, RateLimit: 2})
	for i := range 2 {
		if r := do(t, s.Client(), s.URL, http.MethodPost, "/emails", email("s")); r.Status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
	}
	r := do(t, s.Client(), s.URL, http.MethodPost, "/emails", email("s"))
	wantError(t, r, http.StatusTooManyRequests, "rate_limit_exceeded")
	if r.Header.Get("Retry-After") != "1" || r.Header.Get("Ratelimit-Limit") != "2" || r.Header.Get("Ratelimit-Remaining") != "0" {
		t.Fatalf("429 headers: %v", r.Header)
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("journal has %d emails, want 2", n)
	}
	clk.Advance(time.Second)
	if r := do(t, s.Client(), s.URL, http.MethodPost, "/emails", email("s")); r.Status != http.StatusOK {
		t.Fatalf("next second: %d %s", r.Status, r.Raw)
	}
}

// What the fake does not model answers 501 not_modeled saying so, and
// sends nothing.
func TestNotModeled(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	sent := do(t, s.Client(), s.URL, http.MethodPost, "/emails", email("s"))
	cases := []struct{ method, path string }{
		{http.MethodPost, "/emails/batch"},
		{http.MethodPost, "/emails/" + sent.Str("id") + "/cancel"},
		{http.MethodPatch, "/emails/" + sent.Str("id")},
		{http.MethodGet, "/domains"},
		{http.MethodGet, "/emails?status=sent"},
	}
	for _, tc := range cases {
		r := do(t, s.Client(), s.URL, tc.method, tc.path, `{}`)
		wantError(t, r, http.StatusNotImplemented, "not_modeled")
		if !strings.Contains(r.Str("message"), "does not model") {
			t.Fatalf("%s %s: %s", tc.method, tc.path, r.Raw)
		}
	}
	for _, field := range []string{"attachments", "scheduled_at", "template", "topic_id", "colour"} {
		body := email("s")
		body[field] = "x"
		r := do(t, s.Client(), s.URL, http.MethodPost, "/emails", body)
		wantError(t, r, http.StatusNotImplemented, "not_modeled")
		if !strings.Contains(r.Str("message"), "`"+field+"`") {
			t.Fatalf("field %s: %s", field, r.Raw)
		}
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d emails, want 1", n)
	}
}

// Retrieve and list: newest first, limit, after and before cursors.
func TestRetrieveAndList(t *testing.T) {
	t.Parallel()
	s := start(t, &resendfake.Config{Clock: testutil.NewClock()})
	var ids []string
	for i := range 5 {
		r := do(t, s.Client(), s.URL, http.MethodPost, "/emails", email(fmt.Sprintf("n%d", i)))
		ids = append(ids, r.Str("id"))
	}
	got := do(t, s.Client(), s.URL, http.MethodGet, "/emails/"+ids[2], nil)
	if got.Str("id") != ids[2] || got.Str("subject") != "n2" || got.Str("object") != "email" || got.Str("last_event") != "sent" {
		t.Fatalf("retrieve: %s", got.Raw)
	}
	if tags, _ := got.Get("tags").([]any); len(tags) != 1 {
		t.Fatalf("retrieve tags: %s", got.Raw)
	}
	wantError(t, do(t, s.Client(), s.URL, http.MethodGet, "/emails/nope", nil), http.StatusNotFound, "not_found")
	page := do(t, s.Client(), s.URL, http.MethodGet, "/emails?limit=2", nil)
	if g := testutil.IDs(page.Data()); len(g) != 2 || g[0] != ids[4] || g[1] != ids[3] || page.Get("has_more") != true {
		t.Fatalf("first page: %s", page.Raw)
	}
	next := do(t, s.Client(), s.URL, http.MethodGet, "/emails?limit=2&after="+ids[3], nil)
	if g := testutil.IDs(next.Data()); len(g) != 2 || g[0] != ids[2] || g[1] != ids[1] || next.Get("has_more") != true {
		t.Fatalf("after: %s", next.Raw)
	}
	last := do(t, s.Client(), s.URL, http.MethodGet, "/emails?limit=2&after="+ids[1], nil)
	if g := testutil.IDs(last.Data()); len(g) != 1 || g[0] != ids[0] || last.Get("has_more") != false {
		t.Fatalf("last page: %s", last.Raw)
	}
	before := do(t, s.Client(), s.URL, http.MethodGet, "/emails?limit=2&before="+ids[1], nil)
	if g := testutil.IDs(before.Data()); len(g) != 2 || g[0] != ids[3] || g[1] != ids[2] || before.Get("has_more") != true {
		t.Fatalf("before: %s", before.Raw)
	}
	wantError(t, do(t, s.Client(), s.URL, http.MethodGet, "/emails?limit=101", nil), http.StatusUnprocessableEntity, "validation_error")
}

// Injected faults around the commit: CommitThenDrop sends and keeps the
// answer under the key, so the retry gets it; FailBeforeCommit sends
// nothing and stores nothing.
func TestFaults(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: "POST /emails", Attempt: 1, Action: fault.FailBeforeCommit, Status: 503, RetryAfter: time.Second})
	s.Faults.Add(fault.Rule{Route: "POST /emails", Attempt: 2, Action: fault.CommitThenDrop})
	fresh := testutil.FreshClient(5 * time.Second)
	r := do(t, fresh, s.URL, http.MethodPost, "/emails", email("s"), "Idempotency-Key", "f-1")
	wantError(t, r, http.StatusServiceUnavailable, "service_unavailable")
	if r.Header.Get("Retry-After") != "1" || len(s.Journal()) != 0 {
		t.Fatalf("fail before commit: %v, journal %d", r.Header, len(s.Journal()))
	}
	if _, err := testutil.Do(fresh, http.MethodPost, s.URL+"/emails", email("s"), "Authorization", "Bearer "+apiKey, "Idempotency-Key", "f-1"); err == nil {
		t.Fatal("commit then drop: an answer")
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("after the drop: journal %d, want 1", n)
	}
	replay := do(t, fresh, s.URL, http.MethodPost, "/emails", email("s"), "Idempotency-Key", "f-1")
	if replay.Status != http.StatusOK || replay.Str("id") != s.Journal()[0].ID || len(s.Journal()) != 1 {
		t.Fatalf("retry after the drop: %s, journal %d", replay.Raw, len(s.Journal()))
	}
}
