package stripefake_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/oncely/oncely/fakes/stripefake"
)

// Whatever the body, the fake answers a Stripe-shaped JSON object with a
// non-5xx status, and never panics.
func FuzzPostBodies(f *testing.F) {
	for _, seed := range []string{
		"amount=100&currency=usd",
		"amount=100&currency=usd&confirm=true&payment_method=pm_card_chargeDeclined&payment_method_types[]=card",
		"amount=100&currency=usd&metadata[k]=v&expand[]=latest_charge&payment_method_types[0]=card",
		"amount=-1&currency=us",
		"metadata[a][b]=c&%zz",
		"charge=ch_1&amount=5",
		"amount=1&currency=eur&source=tok_visa",
		"a[]]=1&[x]=2&metadata=&automatic_payment_methods[enabled]=maybe",
	} {
		f.Add(seed)
	}
	h := stripefake.NewHandler(nil)
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/v1/payment_intents", "/v1/refunds", "/v1/charges"} {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Idempotency-Key", "fuzz")
			checkAnswer(t, h, req)
		}
	})
}

func FuzzQueries(f *testing.F) {
	for _, seed := range []string{
		"query=metadata['k']:'v'",
		"query=amount>1 AND status:'succeeded'&limit=5",
		"query=-metadata[\"x\"]:null OR currency~'us'&page=page_1",
		"limit=1&starting_after=pi_x&created[gte]=1",
		"query='&expand[]=data.latest_charge",
	} {
		f.Add(seed)
	}
	h := stripefake.NewHandler(nil)
	f.Fuzz(func(t *testing.T, query string) {
		for _, path := range []string{"/v1/payment_intents/search", "/v1/payment_intents", "/v1/refunds", "/v1/payment_intents/pi_1"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.URL.RawQuery = query
			req.Header.Set("Authorization", "Bearer "+testKey)
			checkAnswer(t, h, req)
		}
	})
}

func checkAnswer(t *testing.T, h http.Handler, req *http.Request) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code >= 500 {
		t.Fatalf("%s %s?%s: status %d: %s", req.Method, req.URL.Path, url.QueryEscape(req.URL.RawQuery), rec.Code, rec.Body)
	}
	var v map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("%s %s: not JSON: %q", req.Method, req.URL.Path, rec.Body)
	}
	if rec.Code >= 400 && v["error"] == nil {
		t.Fatalf("%d without an error object: %s", rec.Code, rec.Body)
	}
}
