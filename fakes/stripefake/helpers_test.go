package stripefake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/fakes/stripefake"
)

const testKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"

func start(t *testing.T, cfg *stripefake.Config) *stripefake.Server {
	t.Helper()
	s := stripefake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

// reply is a decoded answer of the fake.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r reply) str(path ...string) string {
	v, _ := r.get(path...).(string)
	return v
}

func (r reply) num(path ...string) float64 {
	v, _ := r.get(path...).(float64)
	return v
}

func (r reply) get(path ...string) any {
	var cur any = r.body
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func (r reply) data() []map[string]any {
	items, _ := r.body["data"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

func ids(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it["id"].(string)
	}
	return out
}

type request struct {
	method, path, body string
	key                string // Idempotency-Key
	auth               string // Authorization; testKey as Bearer when empty
	client             *http.Client
}

func call(t *testing.T, s *stripefake.Server, req request) reply {
	t.Helper()
	r, err := send(s, req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.method, req.path, err)
	}
	return r
}

func send(s *stripefake.Server, req request) (reply, error) {
	var body io.Reader
	if req.body != "" {
		body = strings.NewReader(req.body)
	}
	hr, err := http.NewRequest(req.method, s.URL+req.path, body)
	if err != nil {
		return reply{}, err
	}
	hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switch req.auth {
	case "":
		hr.Header.Set("Authorization", "Bearer "+testKey)
	case "-":
	default:
		hr.Header.Set("Authorization", req.auth)
	}
	if req.key != "" {
		hr.Header.Set("Idempotency-Key", req.key)
	}
	client := req.client
	if client == nil {
		client = s.Client()
	}
	resp, err := client.Do(hr)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{}, err
	}
	out := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		return reply{}, err
	}
	return out, nil
}

func post(t *testing.T, s *stripefake.Server, path, key string, form url.Values) reply {
	t.Helper()
	return call(t, s, request{method: http.MethodPost, path: path, body: form.Encode(), key: key})
}

func get(t *testing.T, s *stripefake.Server, path string) reply {
	t.Helper()
	return call(t, s, request{method: http.MethodGet, path: path})
}

func piForm(amount string, kv ...string) url.Values {
	f := url.Values{"amount": {amount}, "currency": {"usd"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Add(kv[i], kv[i+1])
	}
	return f
}

func wantStatus(t *testing.T, r reply, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.raw)
	}
}

func wantError(t *testing.T, r reply, status int, typ, code string) {
	t.Helper()
	wantStatus(t, r, status)
	if r.str("error", "type") != typ || r.str("error", "code") != code {
		t.Fatalf("error = %s/%s, want %s/%s; body %s", r.str("error", "type"), r.str("error", "code"), typ, code, r.raw)
	}
	if r.str("error", "message") == "" {
		t.Fatalf("error without message: %s", r.raw)
	}
}
