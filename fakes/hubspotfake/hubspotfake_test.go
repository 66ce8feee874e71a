package hubspotfake_test

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/hubspotfake"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/internal/nodetools"
)

const token = "pat-test"

func start(t *testing.T, cfg *hubspotfake.Config) *hubspotfake.Server {
	t.Helper()
	if cfg == nil {
		cfg = &hubspotfake.Config{}
	}
	cfg.Token = token
	s := hubspotfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, s *hubspotfake.Server, method, path string, body any) testutil.Reply {
	t.Helper()
	return testutil.MustDo(t, s.Client(), method, s.URL+path, body, "Authorization", "Bearer "+token)
}

func upsertBody(id string, props map[string]string) map[string]any {
	return map[string]any{"inputs": []any{map[string]any{"idProperty": "oncely_key", "id": id, "properties": props}}}
}

func TestUpsertAndRead(t *testing.T) {
	t.Parallel()
	clk := testutil.NewClock()
	s := start(t, &hubspotfake.Config{Clock: clk})
	a := do(t, s, "POST", "/crm/v3/objects/contacts/batch/upsert", upsertBody("k1", map[string]string{"email": "ada@example.com", "firstname": "Ada"}))
	if a.Status != 200 || a.Str("status") != "COMPLETE" || a.Get("results").([]any)[0].(map[string]any)["new"] != true {
		t.Fatalf("first upsert: %d %s", a.Status, a.Raw)
	}
	clk.Advance(time.Second)
	b := do(t, s, "POST", "/crm/v3/objects/contacts/batch/upsert", upsertBody("k1", map[string]string{"email": "ada@example.com", "firstname": "Ada"}))
	res := b.Get("results").([]any)[0].(map[string]any)
	if b.Status != 200 || res["new"] != false || res["id"] != a.Get("results").([]any)[0].(map[string]any)["id"] {
		t.Fatalf("repeat: %s", b.Raw)
	}
	id := res["id"].(string)
	// Default properties without ?properties=, the asked ones with it.
	g := do(t, s, "GET", "/crm/v3/objects/contacts/k1?idProperty=oncely_key", nil)
	if g.Status != 200 || g.Str("id") != id || g.Str("properties", "email") != "ada@example.com" || g.Get("properties", "oncely_key") != nil || g.Str("properties", "hs_object_id") != id {
		t.Fatalf("get by idProperty: %s", g.Raw)
	}
	g = do(t, s, "GET", "/crm/v3/objects/contacts/"+id+"?properties=oncely_key,firstname", nil)
	if g.Str("properties", "oncely_key") != "k1" || g.Get("properties", "email") != nil {
		t.Fatalf("get by id with properties: %s", g.Raw)
	}
	p := do(t, s, "PATCH", "/crm/v3/objects/contacts/k1?idProperty=oncely_key", map[string]any{"properties": map[string]string{"firstname": "Augusta"}})
	if p.Status != 200 || p.Str("properties", "firstname") != "Augusta" {
		t.Fatalf("patch: %s", p.Raw)
	}
	if n := do(t, s, "GET", "/crm/v3/objects/contacts/nobody?idProperty=oncely_key", nil); n.Status != 404 || n.Str("category") != "OBJECT_NOT_FOUND" {
		t.Fatalf("absent: %d %s", n.Status, n.Raw)
	}
	j := s.Journal()
	if len(j) != 2 || j[0].Kind != hubspotfake.KindUpsert || j[0].Key != "k1" || j[0].Params["email"] != "ada@example.com" || j[1].Kind != hubspotfake.KindUpdate {
		t.Fatalf("journal: %+v", j)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	if r := do(t, s, "POST", "/crm/v3/objects/contacts", map[string]any{"properties": map[string]string{"email": "ada@example.com"}}); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	many := make([]any, hubspotfake.MaxBatch+1)
	for i := range many {
		many[i] = map[string]any{"idProperty": "oncely_key", "id": strings.Repeat("x", i+1)}
	}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		category, code     string
	}{
		{"unknown property", "POST", "/crm/v3/objects/contacts/batch/upsert", upsertBody("k", map[string]string{"colour": "blue"}), 400, "VALIDATION_ERROR", "PROPERTY_DOESNT_EXIST"},
		{"bad email", "POST", "/crm/v3/objects/contacts/batch/upsert", upsertBody("k", map[string]string{"email": "x"}), 400, "VALIDATION_ERROR", "INVALID_EMAIL"},
		{"bad amount", "POST", "/crm/v3/objects/deals/batch/upsert", upsertBody("k", map[string]string{"amount": "ten"}), 400, "VALIDATION_ERROR", "INVALID_DECIMAL"},
		{"not unique", "POST", "/crm/v3/objects/contacts/batch/upsert", map[string]any{"inputs": []any{map[string]any{"idProperty": "firstname", "id": "k"}}}, 400, "VALIDATION_ERROR", ""},
		{"no id", "POST", "/crm/v3/objects/contacts/batch/upsert", map[string]any{"inputs": []any{map[string]any{"idProperty": "oncely_key"}}}, 400, "VALIDATION_ERROR", ""},
		{"empty batch", "POST", "/crm/v3/objects/contacts/batch/upsert", map[string]any{"inputs": []any{}}, 400, "VALIDATION_ERROR", ""},
		{"large batch", "POST", "/crm/v3/objects/contacts/batch/upsert", map[string]any{"inputs": many}, 400, "VALIDATION_ERROR", ""},
		{"duplicate ids", "POST", "/crm/v3/objects/contacts/batch/upsert", map[string]any{"inputs": []any{map[string]any{"idProperty": "oncely_key", "id": "a"}, map[string]any{"idProperty": "oncely_key", "id": "a"}}}, 400, "VALIDATION_ERROR", ""},
		{"unique conflict", "POST", "/crm/v3/objects/contacts/batch/upsert", upsertBody("k", map[string]string{"email": "ada@example.com"}), 409, "CONFLICT", ""},
		{"create conflict", "POST", "/crm/v3/objects/contacts", map[string]any{"properties": map[string]string{"email": "ada@example.com"}}, 409, "CONFLICT", ""},
		{"malformed", "POST", "/crm/v3/objects/contacts", "{", 400, "VALIDATION_ERROR", ""},
		{"unmodelled type", "POST", "/crm/v3/objects/companies", map[string]any{"properties": map[string]string{}}, 501, "NOT_MODELLED", ""},
		{"unmodelled route", "POST", "/crm/v3/objects/contacts/search", map[string]any{}, 501, "NOT_MODELLED", ""},
		{"unmodelled parameter", "GET", "/crm/v3/objects/contacts/1?associations=deals", nil, 501, "NOT_MODELLED", ""},
		{"unmodelled field", "POST", "/crm/v3/objects/contacts", map[string]any{"properties": map[string]string{}, "objectWriteTraceId": "x"}, 501, "NOT_MODELLED", ""},
		{"unmodelled archived", "GET", "/crm/v3/objects/contacts/1?archived=true", nil, 501, "NOT_MODELLED", ""},
	} {
		r := do(t, s, tc.method, tc.path, tc.body)
		if r.Status != tc.status || r.Str("category") != tc.category {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Raw, tc.status, tc.category)
		}
		if tc.code != "" && r.Str("errors", "0", "code") != tc.code && !strings.Contains(r.Raw, tc.code) {
			t.Errorf("%s: %s lacks code %s", tc.name, r.Raw, tc.code)
		}
		if tc.status == 501 && !strings.Contains(r.Str("message"), "the fake does not model") {
			t.Errorf("%s: %s does not say the fake does not model it", tc.name, r.Raw)
		}
	}
	if n := len(fakes.Filter(s.Journal(), "", "")); n != 1 {
		t.Fatalf("%d effects, want the one create", n)
	}
}

func TestAuthAndRateLimit(t *testing.T) {
	t.Parallel()
	clk := testutil.NewClock()
	s := start(t, &hubspotfake.Config{Clock: clk, RateLimit: 2, RateWindow: 10 * time.Second})
	if r := testutil.MustDo(t, s.Client(), "GET", s.URL+"/crm/v3/objects/contacts/1", nil); r.Status != 401 || r.Str("category") != "INVALID_AUTHENTICATION" {
		t.Fatalf("no token: %d %s", r.Status, r.Raw)
	}
	if r := testutil.MustDo(t, s.Client(), "GET", s.URL+"/crm/v3/objects/contacts/1", nil, "Authorization", "Bearer other"); r.Status != 401 {
		t.Fatalf("other token: %d %s", r.Status, r.Raw)
	}
	do(t, s, "GET", "/crm/v3/objects/contacts/1", nil)
	clk.Advance(4 * time.Second)
	do(t, s, "GET", "/crm/v3/objects/contacts/1", nil)
	r, err := testutil.Do(s.Client(), "GET", s.URL+"/crm/v3/objects/contacts/1", nil, "Authorization", "Bearer "+token)
	if err != nil || r.Status != 429 || r.Str("policyName") != "TEN_SECONDLY_ROLLING" || r.Str("errorType") != "RATE_LIMIT" || r.Header.Get("Retry-After") != "6" {
		t.Fatalf("limited: %v %d %s %v", err, r.Status, r.Raw, r.Header)
	}
	clk.Advance(6 * time.Second) // the first request leaves the window
	if r := do(t, s, "GET", "/crm/v3/objects/contacts/1", nil); r.Status != 404 {
		t.Fatalf("after the window: %d %s", r.Status, r.Raw)
	}
}

// HubSpot's official Node client (@hubspot/api-client, pinned in
// tools/hubspot) runs a scripted session against the fake unchanged.
func TestOfficialNodeClient(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	out := nodetools.Run(t, "hubspot", "session.mjs", "HUBSPOT_BASE_URL="+s.URL, "HUBSPOT_TOKEN="+token, "ONCELY_KEY=key-1")
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["step"] != nil {
			steps[m["step"].(string)] = m
		}
	}
	check := func(step, field string, want any) {
		t.Helper()
		if got := steps[step][field]; got != want {
			t.Errorf("%s.%s = %v, want %v\n%s", step, field, got, want, out)
		}
	}
	check("upsert1", "new", true)
	check("upsert2", "new", false)
	check("upsert2", "id", steps["upsert1"]["id"])
	check("get", "key", "key-1")
	check("get", "email", "ada@example.com")
	check("update", "firstname", "Augusta")
	check("deal", "amount", "1200.50")
	check("absent", "code", 404.0)
	check("invalid", "code", 400.0)
	check("invalid", "category", "VALIDATION_ERROR")
	check("conflict", "code", 409.0)
	check("conflict", "message", "Contact already exists. Existing ID: "+steps["upsert1"]["id"].(string)) // HubSpot's text, which clients parse
	check("unmodelled", "code", 501.0)
	if msg, _ := steps["unmodelled"]["message"].(string); !strings.Contains(msg, "the fake does not model") {
		t.Errorf("unmodelled: %q", msg)
	}
	kinds := map[string]int{}
	for _, e := range s.Journal() {
		kinds[e.Kind]++
	}
	if kinds[hubspotfake.KindCreate] != 1 || kinds[hubspotfake.KindUpsert] != 2 || kinds[hubspotfake.KindUpdate] != 1 {
		t.Fatalf("journal kinds %v\n%s", kinds, out)
	}
}
