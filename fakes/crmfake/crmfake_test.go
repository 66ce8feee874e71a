package crmfake_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/crmfake"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
)

func start(t *testing.T, cfg *crmfake.Config) *crmfake.Server {
	t.Helper()
	s := crmfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func contact(email, name string, fields map[string]string) map[string]any {
	return map[string]any{"email": email, "name": name, "fields": fields}
}

func upsert(t *testing.T, s *crmfake.Server, ext string, body any) testutil.Reply {
	t.Helper()
	return testutil.MustDo(t, s.Client(), http.MethodPut, s.URL+"/v1/contacts/by-external-id/"+url.PathEscape(ext), body)
}

func TestPlainCreateIsNotIdempotent(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &crmfake.Config{Clock: clock})
	body := contact("ada@example.test", "Ada", map[string]string{"plan": "pro"})
	a := testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/contacts", body)
	b := testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/contacts", body)
	if a.Status != http.StatusCreated || b.Status != http.StatusCreated || a.Str("id") == b.Str("id") ||
		!strings.HasPrefix(a.Str("id"), "ct_") || a.Get("external_id") != nil || a.Str("fields", "plan") != "pro" || a.Get("version") != 1.0 {
		t.Fatalf("creates: %s / %s", a.Raw, b.Raw)
	}
	var c crmfake.Contact
	if err := json.Unmarshal([]byte(a.Raw), &c); err != nil || c.Email != "ada@example.test" || c.CreatedAt != "2025-03-01T12:00:00Z" {
		t.Fatalf("answer does not decode as a Contact: %v %+v", err, c)
	}
	got := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/contacts/"+c.ID, nil)
	if got.Status != http.StatusOK || got.Raw != a.Raw {
		t.Fatalf("get: %d %s", got.Status, got.Raw)
	}
	creates := fakes.Filter(s.Journal(), fakes.KindContactCreate, "")
	if len(creates) != 2 || creates[0].Key != "" || creates[0].Params["email"] != "ada@example.test" || creates[0].Params["fields.plan"] != "pro" {
		t.Fatalf("journal = %+v", creates)
	}
}

func TestUpsertByExternalID(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &crmfake.Config{Clock: clock})
	const ext = "act/42 é" // escaped in the path
	created := upsert(t, s, ext, contact("ada@example.test", "Ada", nil))
	if created.Status != http.StatusCreated || created.Str("external_id") != ext || created.Get("version") != 1.0 {
		t.Fatalf("first upsert: %d %s", created.Status, created.Raw)
	}
	same := upsert(t, s, ext, contact("ada@example.test", "Ada", map[string]string{}))
	if same.Status != http.StatusOK || same.Str("id") != created.Str("id") || same.Get("version") != 1.0 {
		t.Fatalf("identical upsert: %d %s", same.Status, same.Raw)
	}
	clock.Advance(time.Minute)
	changed := upsert(t, s, ext, contact("ada@example.test", "Ada Lovelace", map[string]string{"tier": "gold"}))
	if changed.Status != http.StatusOK || changed.Str("id") != created.Str("id") || changed.Get("version") != 2.0 ||
		changed.Str("name") != "Ada Lovelace" || changed.Str("updated_at") != "2025-03-01T12:01:00Z" || changed.Str("created_at") != "2025-03-01T12:00:00Z" {
		t.Fatalf("changing upsert: %d %s", changed.Status, changed.Raw)
	}
	byExt := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/contacts/by-external-id/"+url.PathEscape(ext), nil)
	if byExt.Status != http.StatusOK || byExt.Raw != changed.Raw {
		t.Fatalf("get by external id: %d %s", byExt.Status, byExt.Raw)
	}
	if nf := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/contacts/by-external-id/nope", nil); nf.Status != http.StatusNotFound || nf.Str("error", "code") != "not_found" {
		t.Fatalf("unknown external id: %d %s", nf.Status, nf.Raw)
	}
	effects := s.Journal()
	if len(effects) != 2 || effects[0].Kind != fakes.KindContactUpsert || effects[0].Key != ext || effects[1].Params["fields.tier"] != "gold" || !effects[1].At.Equal(clock.Now()) {
		t.Fatalf("journal = %+v (a no-op upsert is not an effect)", effects)
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	cases := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"not json", "{", 400, "invalid_json"},
		{"empty", "", 400, "invalid_json"},
		{"unknown field", map[string]any{"email": "a@b.test", "external_id": "x"}, 400, "invalid_json"},
		{"number field", map[string]any{"email": "a@b.test", "fields": map[string]int{"n": 1}}, 400, "invalid_json"},
		{"no email", map[string]any{"name": "A"}, 400, "missing_field"},
		{"bad email", map[string]any{"email": "nope"}, 400, "invalid_field"},
		{"too large", map[string]any{"email": "a@b.test", "name": strings.Repeat("n", 1<<20)}, 413, "body_too_large"},
	}
	for _, tc := range cases {
		for _, r := range []testutil.Reply{
			testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/contacts", tc.body),
			upsert(t, s, "ext-1", tc.body),
		} {
			if r.Status != tc.status || r.Str("error", "code") != tc.code || r.Str("error", "message") == "" {
				t.Errorf("%s: %d %s", tc.name, r.Status, r.Raw)
			}
		}
	}
	if r := upsert(t, s, strings.Repeat("x", 256), contact("a@b.test", "", nil)); r.Status != 400 {
		t.Errorf("long external id: %d", r.Status)
	}
	if r := testutil.MustDo(t, s.Client(), http.MethodPatch, s.URL+"/v1/contacts/x", nil); r.Status != 404 || r.Str("error", "code") != "unknown_route" {
		t.Errorf("unknown route: %d %s", r.Status, r.Raw)
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("bad input committed %d effects", n)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	const route = "PUT /v1/contacts/by-external-id/{id}"
	cases := []struct {
		rule      fault.Rule
		wantErr   bool
		status    int
		committed int
	}{
		{fault.Rule{Route: route, Action: fault.FailBeforeCommit, Status: 503}, false, 503, 0},
		{fault.Rule{Route: route, Action: fault.DropBeforeCommit}, true, 0, 0},
		{fault.Rule{Route: route, Action: fault.CommitThenDrop}, true, 0, 1},
		{fault.Rule{Route: route, Action: fault.CommitThenError}, false, 500, 1},
	}
	for _, tc := range cases {
		t.Run(tc.rule.Action.String(), func(t *testing.T) {
			t.Parallel()
			s := start(t, nil)
			tc.rule.Attempt = 1
			s.Faults.Add(tc.rule)
			body := contact("ada@example.test", "Ada", nil)
			r, err := testutil.Do(testutil.FreshClient(5*time.Second), http.MethodPut, s.URL+"/v1/contacts/by-external-id/act-1", body)
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr && (r.Status != tc.status || r.Str("error", "code") == "") {
				t.Fatalf("answer: %d %s", r.Status, r.Raw)
			}
			if n := len(s.Journal()); n != tc.committed {
				t.Fatalf("journal has %d effects, want %d", n, tc.committed)
			}
			// Resending the upsert is safe whatever happened.
			again := upsert(t, s, "act-1", body)
			if again.Status != http.StatusOK && again.Status != http.StatusCreated {
				t.Fatalf("resend: %d %s", again.Status, again.Raw)
			}
			if n := len(s.Journal()); n != 1 {
				t.Fatalf("after the resend the journal has %d effects, want 1", n)
			}
		})
	}
}

func TestDelayedUpsertCommitsAfterTimeout(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: "POST /v1/contacts", Attempt: 1, Action: fault.Delay, Delay: time.Minute})
	if _, err := testutil.Do(testutil.FreshClient(100*time.Millisecond), http.MethodPost, s.URL+"/v1/contacts", contact("a@b.test", "A", nil)); err == nil {
		t.Fatal("the client did not time out")
	}
	testutil.WaitFor(t, "the late create", func() bool { return len(s.Journal()) == 1 })
}

func TestConcurrentUpserts(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	statuses := make([]int, 32)
	ids := make([]string, 32)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			r, err := testutil.Do(s.Client(), http.MethodPut, s.URL+"/v1/contacts/by-external-id/same", contact("a@b.test", "A", map[string]string{"k": "v"}))
			if err != nil {
				t.Errorf("upsert: %v", err)
				return
			}
			statuses[i], ids[i] = r.Status, r.Str("id")
		})
	}
	wg.Wait()
	created := 0
	for i := range 32 {
		if statuses[i] == http.StatusCreated {
			created++
		}
		if ids[i] != ids[0] {
			t.Fatalf("upserts answered different contacts: %v", ids)
		}
	}
	if created != 1 || len(s.Journal()) != 1 {
		t.Fatalf("created %d times, %d effects; want 1 and 1", created, len(s.Journal()))
	}
}

func TestResetAndSeed(t *testing.T) {
	t.Parallel()
	s1 := start(t, &crmfake.Config{Seed: 11})
	s2 := start(t, &crmfake.Config{Seed: 11})
	a, b := upsert(t, s1, "x", contact("a@b.test", "", nil)), upsert(t, s2, "x", contact("a@b.test", "", nil))
	if a.Str("id") != b.Str("id") {
		t.Fatalf("same seed: %s vs %s", a.Str("id"), b.Str("id"))
	}
	s1.Reset()
	if len(s1.Journal()) != 0 {
		t.Fatal("Reset kept the journal")
	}
	if again := upsert(t, s1, "x", contact("a@b.test", "", nil)); again.Status != http.StatusCreated || again.Str("id") != a.Str("id") {
		t.Fatalf("after Reset: %d %s", again.Status, again.Raw)
	}
}

func FuzzUpsert(f *testing.F) {
	for _, seed := range []string{`{"email":"a@b.test","name":"A","fields":{"k":"v"}}`, `{}`, `[1]`, `{"email":1}`, `{"fields":null,"email":"x@y.z"}`} {
		f.Add("ext", seed)
	}
	h := crmfake.NewHandler(nil)
	f.Fuzz(func(t *testing.T, ext, body string) {
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodPut, "/v1/contacts/by-external-id/"+url.PathEscape(ext), strings.NewReader(body)),
			httptest.NewRequest(http.MethodPost, "/v1/contacts", strings.NewReader(body)),
		} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s: status %d", req.URL, rec.Code)
			}
			if rec.Code >= 300 && rec.Code < 400 {
				continue // ServeMux redirects paths with "." or ".." segments
			}
			var v map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
				t.Fatalf("answer is not JSON: %q", rec.Body)
			}
		}
	})
}
