package mailfake_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/mailfake"
)

func start(t *testing.T, cfg *mailfake.Config) *mailfake.Server {
	t.Helper()
	s := mailfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func message(ref string) map[string]any {
	return map[string]any{
		"from": "support@shop.test", "to": "ada@example.test", "subject": "Your refund",
		"text": "We refunded order 42.", "reference": ref, "metadata": map[string]string{"ticket": "T-1"},
	}
}

func send(t *testing.T, s *mailfake.Server, body any) testutil.Reply {
	t.Helper()
	return testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/messages", body)
}

func search(t *testing.T, s *mailfake.Server, ref string) []string {
	t.Helper()
	r := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/messages?reference="+ref, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("search: %d %s", r.Status, r.Raw)
	}
	return testutil.IDs(r.Data())
}

func TestSendAndGet(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &mailfake.Config{Clock: clock})
	r := send(t, s, message("act-1"))
	if r.Status != http.StatusAccepted || !strings.HasPrefix(r.Str("id"), "msg_") || r.Str("status") != "queued" ||
		r.Str("reference") != "act-1" || r.Str("metadata", "ticket") != "T-1" || r.Str("created_at") != "2025-03-01T12:00:00Z" {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	var m mailfake.Message
	if err := json.Unmarshal([]byte(r.Raw), &m); err != nil || m.To != "ada@example.test" {
		t.Fatalf("answer does not decode as a Message: %v %+v", err, m)
	}
	got := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/messages/"+m.ID, nil)
	if got.Status != http.StatusOK || got.Raw != r.Raw {
		t.Fatalf("get: %d %s", got.Status, got.Raw)
	}
	if nf := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/messages/msg_nope", nil); nf.Status != http.StatusNotFound || nf.Str("error", "code") != "not_found" {
		t.Fatalf("missing message: %d %s", nf.Status, nf.Raw)
	}
	e := s.Journal()
	if len(e) != 1 || e[0].Kind != fakes.KindMessage || e[0].ID != m.ID || e[0].Key != "act-1" ||
		e[0].Params["to"] != "ada@example.test" || e[0].Params["metadata.ticket"] != "T-1" || !e[0].At.Equal(clock.Now()) {
		t.Fatalf("journal = %+v", e)
	}
}

// The point of this fake: the same request twice sends two messages.
func TestNoIdempotency(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	a := send(t, s, message("act-1"))
	b := testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/messages", message("act-1"), "Idempotency-Key", "act-1")
	if a.Str("id") == b.Str("id") || b.Status != http.StatusAccepted {
		t.Fatalf("second send: %d %s", b.Status, b.Raw)
	}
	if n := len(fakes.Filter(s.Journal(), fakes.KindMessage, "act-1")); n != 2 {
		t.Fatalf("%d messages with reference act-1, want 2", n)
	}
	if got := search(t, s, "act-1"); !slices.Equal(got, []string{a.Str("id"), b.Str("id")}) {
		t.Fatalf("search = %v", got)
	}
}

func TestSearchLagsBehind(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &mailfake.Config{Clock: clock, IndexLag: 30 * time.Second})
	a := send(t, s, message("act-1"))
	clock.Advance(10 * time.Second)
	b := send(t, s, message("act-2"))
	if got := search(t, s, "act-1"); len(got) != 0 {
		t.Fatalf("visible before the lag: %v", got)
	}
	clock.Advance(20 * time.Second) // a is 30 s old, b 20 s
	if got := search(t, s, "act-1"); !slices.Equal(got, []string{a.Str("id")}) {
		t.Fatalf("act-1 after the lag: %v", got)
	}
	if got := search(t, s, "act-2"); len(got) != 0 {
		t.Fatalf("act-2 visible after 20 s: %v", got)
	}
	// Reading by id is not indexed: it sees b at once.
	if r := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/messages/"+b.Str("id"), nil); r.Status != http.StatusOK {
		t.Fatalf("get by id: %d", r.Status)
	}
	clock.Advance(10 * time.Second)
	all := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/messages", nil)
	if got := testutil.IDs(all.Data()); !slices.Equal(got, []string{a.Str("id"), b.Str("id")}) {
		t.Fatalf("all messages: %v", got)
	}
	if got := search(t, s, "nope"); got == nil || len(got) != 0 {
		t.Fatalf("unknown reference: %v", got)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	with := func(k string, v any) map[string]any {
		m := message("r")
		m[k] = v
		return m
	}
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"not json", "{nope", 400, "invalid_json"},
		{"empty", "", 400, "invalid_json"},
		{"trailing", `{"from":"a@b.test","to":"c@d.test","subject":"x"} {}`, 400, "invalid_json"},
		{"unknown field", with("cc", "x@y.test"), 400, "invalid_json"},
		{"to as a list", with("to", []string{"a@b.test"}), 400, "invalid_json"},
		{"number metadata", with("metadata", map[string]int{"n": 1}), 400, "invalid_json"},
		{"missing to", with("to", ""), 400, "missing_field"},
		{"bad from", with("from", "Support <support@shop.test>"), 400, "invalid_field"},
		{"bad to", with("to", "ada"), 400, "invalid_field"},
		{"no content", map[string]any{"from": "a@b.test", "to": "c@d.test"}, 400, "missing_field"},
		{"long reference", with("reference", strings.Repeat("r", 256)), 400, "invalid_field"},
		{"too large", with("text", strings.Repeat("x", 1<<20)), 413, "body_too_large"},
	}
	for _, tc := range cases {
		r := send(t, s, tc.body)
		if r.Status != tc.status || r.Str("error", "code") != tc.code || r.Str("error", "message") == "" {
			t.Errorf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
	}
	if r := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/messages?ref=x", nil); r.Status != 400 {
		t.Errorf("unknown query parameter: %d", r.Status)
	}
	if r := testutil.MustDo(t, s.Client(), http.MethodDelete, s.URL+"/v1/messages/x", nil); r.Status != 404 || r.Str("error", "code") != "unknown_route" {
		t.Errorf("unknown route: %d %s", r.Status, r.Raw)
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("bad input sent %d messages", n)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	const route = "POST /v1/messages"
	cases := []struct {
		rule      fault.Rule
		wantErr   bool
		status    int
		committed int
	}{
		{fault.Rule{Route: route, Action: fault.FailBeforeCommit, Status: 429, RetryAfter: time.Second}, false, 429, 0},
		{fault.Rule{Route: route, Action: fault.DropBeforeCommit}, true, 0, 0},
		{fault.Rule{Route: route, Action: fault.CommitThenDrop}, true, 0, 1},
		{fault.Rule{Route: route, Action: fault.CommitThenError}, false, 500, 1},
	}
	for _, tc := range cases {
		t.Run(tc.rule.Action.String(), func(t *testing.T) {
			t.Parallel()
			s := start(t, nil)
			s.Faults.Add(tc.rule)
			r, err := testutil.Do(testutil.FreshClient(5*time.Second), http.MethodPost, s.URL+"/v1/messages", message("act-1"))
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (r.Status != tc.status || r.Str("error", "code") == "") {
				t.Fatalf("answer: %d %s", r.Status, r.Raw)
			}
			if tc.rule.RetryAfter > 0 && r.Header.Get("Retry-After") != "1" {
				t.Fatalf("Retry-After = %q", r.Header.Get("Retry-After"))
			}
			if n := len(s.Journal()); n != tc.committed {
				t.Fatalf("journal has %d effects, want %d", n, tc.committed)
			}
		})
	}
}

func TestDelayedSendCommitsAfterTimeout(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: "POST /v1/messages", Attempt: 1, Action: fault.Delay, Delay: time.Minute})
	if _, err := testutil.Do(testutil.FreshClient(100*time.Millisecond), http.MethodPost, s.URL+"/v1/messages", message("act-1")); err == nil {
		t.Fatal("the client did not time out")
	}
	testutil.WaitFor(t, "the late send", func() bool { return len(s.Journal()) == 1 })
	// A blind retry sends a second message: no idempotency here.
	send(t, s, message("act-1"))
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("journal has %d messages, want 2", n)
	}
	// A delayed request keeps its body, and its size cap.
	s.Faults.Add(fault.Rule{Route: "POST /v1/messages", Action: fault.Delay, Delay: time.Millisecond})
	if r := send(t, s, message("act-2")); r.Status != http.StatusAccepted {
		t.Fatalf("delayed send: %d %s", r.Status, r.Raw)
	}
	big := message("act-3")
	big["text"] = strings.Repeat("x", 1<<20)
	if r := send(t, s, big); r.Status != http.StatusRequestEntityTooLarge {
		t.Fatalf("delayed oversized send: %d %s", r.Status, r.Raw)
	}
}

func TestConcurrentSends(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if r, err := testutil.Do(s.Client(), http.MethodPost, s.URL+"/v1/messages", message("same")); err != nil || r.Status != http.StatusAccepted {
				t.Errorf("send: %v %d", err, r.Status)
			}
		})
	}
	wg.Wait()
	effects := s.Journal()
	ids := map[string]bool{}
	for _, e := range effects {
		ids[e.ID] = true
	}
	if len(effects) != 32 || len(ids) != 32 || len(search(t, s, "same")) != 32 {
		t.Fatalf("%d effects, %d distinct ids", len(effects), len(ids))
	}
}

func TestResetAndSeed(t *testing.T) {
	t.Parallel()
	s1 := start(t, &mailfake.Config{Seed: 3})
	s2 := start(t, &mailfake.Config{Seed: 3})
	id1, id2 := send(t, s1, message("a")).Str("id"), send(t, s2, message("a")).Str("id")
	if id1 != id2 {
		t.Fatalf("same seed: %s vs %s", id1, id2)
	}
	s1.Faults.Add(fault.Rule{Action: fault.FailBeforeCommit})
	s1.Reset()
	if len(s1.Journal()) != 0 || len(search(t, s1, "a")) != 0 {
		t.Fatal("Reset kept messages")
	}
	if again := send(t, s1, message("a")); again.Status != http.StatusAccepted || again.Str("id") != id1 {
		t.Fatalf("after Reset: %d %s (want id %s)", again.Status, again.Raw, id1)
	}
}

func FuzzSend(f *testing.F) {
	for _, seed := range []string{
		`{"from":"a@b.test","to":"c@d.test","subject":"s","reference":"r","metadata":{"k":"v"}}`,
		`{"from":"a@b.test"}`, `[]`, `null`, `{"metadata":null}`, `{"to":["x"]}`, "\x00",
	} {
		f.Add(seed)
	}
	h := mailfake.NewHandler(nil)
	f.Fuzz(func(t *testing.T, body string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(body)))
		var v map[string]any
		if rec.Code != http.StatusAccepted && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
	})
}
