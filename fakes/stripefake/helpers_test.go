package stripefake_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/stripefake"
)

const testKey = "sk_test_4eC39HqLyjWDarjtT1zdp7dc"

func start(t *testing.T, cfg *stripefake.Config) *stripefake.Server {
	t.Helper()
	s := stripefake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

// reply is a decoded answer of the fake.
type reply = testutil.Reply

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

// send sends a form-encoded request to the fake and decodes its JSON answer.
func send(s *stripefake.Server, req request) (reply, error) {
	header := []string{"Content-Type", "application/x-www-form-urlencoded"}
	switch req.auth {
	case "":
		header = append(header, "Authorization", "Bearer "+testKey)
	case "-":
	default:
		header = append(header, "Authorization", req.auth)
	}
	if req.key != "" {
		header = append(header, "Idempotency-Key", req.key)
	}
	client := req.client
	if client == nil {
		client = s.Client()
	}
	return testutil.Do(client, req.method, s.URL+req.path, req.body, header...)
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
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Raw)
	}
}

func wantError(t *testing.T, r reply, status int, typ, code string) {
	t.Helper()
	wantStatus(t, r, status)
	if r.Str("error", "type") != typ || r.Str("error", "code") != code {
		t.Fatalf("error = %s/%s, want %s/%s; body %s", r.Str("error", "type"), r.Str("error", "code"), typ, code, r.Raw)
	}
	if r.Str("error", "message") == "" {
		t.Fatalf("error without message: %s", r.Raw)
	}
}
