package stripefake_test

import (
	"net/http"
	"strings"
	"testing"
)

// Parameters Stripe accepts and routes Stripe serves that the fake does not
// model answer a 501 that says so, never Stripe's "unknown parameter" or
// "No such charge", and commit nothing.
func TestNotModeledAnswersSo(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	cases := []struct {
		name, method, path, body, param string
	}{
		{"shipping", http.MethodPost, "/v1/payment_intents", "amount=100&currency=usd&shipping[name]=Ada&shipping[address][line1]=1+Main", "shipping[address][line1]"},
		{"p24 data", http.MethodPost, "/v1/payment_intents", "amount=100&currency=eur&payment_method_data[type]=p24&payment_method_data[p24][bank]=ing", "payment_method_data[p24][bank]"},
		{"charge shipping", http.MethodPost, "/v1/charges", "amount=100&currency=usd&source=tok_visa&shipping[name]=Ada", "shipping[name]"},
		{"charge search", http.MethodGet, "/v1/charges/search?query=amount%3A100", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, s, request{method: tc.method, path: tc.path, body: tc.body})
			wantError(t, r, http.StatusNotImplemented, "invalid_request_error", "stripefake_not_modeled")
			msg := r.Str("error", "message")
			if !strings.Contains(msg, "does not model") || strings.Contains(msg, "unknown") || strings.Contains(msg, "No such") {
				t.Fatalf("message = %q, want one that says the fake does not model it", msg)
			}
			if r.Str("error", "param") != tc.param {
				t.Fatalf("param = %q, want %q", r.Str("error", "param"), tc.param)
			}
			if r.Get("error", "doc_url") != nil {
				t.Fatalf("a doc_url for a code Stripe does not have: %s", r.Raw)
			}
		})
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("unmodeled requests committed %d effects", n)
	}
	// A charge id is still retrieved through the same pattern.
	r := call(t, s, request{method: http.MethodGet, path: "/v1/charges/ch_missing"})
	wantError(t, r, http.StatusNotFound, "invalid_request_error", "resource_missing")
}
