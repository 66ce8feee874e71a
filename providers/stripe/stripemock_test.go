package stripe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/oncely/oncely/fakes/stripefake/stripemocktest"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/stripe"
)

func TestMain(m *testing.M) { os.Exit(stripemocktest.Main(m)) }

// Every request the adapter makes passes stripe-mock, which validates it
// against Stripe's OpenAPI specification: a request real Stripe would
// refuse fails here. A recording proxy checks that every route the
// adapter uses was exercised.
func TestRequestsPassStripeMock(t *testing.T) {
	t.Parallel()
	target, err := url.Parse(stripemocktest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var routes []string
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if route := r.Method + " " + r.URL.Path; !slices.Contains(routes, route) {
			routes = append(routes, route)
		}
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	sc := stripe.New(srv.URL, &stripe.Config{APIKey: stripemocktest.TestKey})
	ctx := context.Background()

	for i, p := range []stripe.PaymentIntentParams{
		{Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true},
		{Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true, PaymentMethodTypes: []string{"card"}},
		{Amount: 500, Currency: "jpy", PaymentMethodTypes: []string{"card", "link"}, Description: "order 7", ReceiptEmail: "jenny@example.com", Metadata: map[string]string{"order": "7", "tenant": "acme"}},
		{Amount: 100, Currency: "usd"},
	} {
		if _, err := sc.PaymentIntents.Create(ctx, "pi-key-"+string(rune('a'+i)), p); err != nil {
			t.Errorf("create %+v: %v", p, err)
		}
	}
	for i, p := range []stripe.RefundParams{
		{PaymentIntent: "pi_3MtwBwLkdIwHu7ix28a3tqPa"},
		{Charge: "ch_3MmlLrLkdIwHu7ix0snN0B15", Amount: 100, Reason: "requested_by_customer", Metadata: map[string]string{"ticket": "42"}},
		{PaymentIntent: "pi_3MtwBwLkdIwHu7ix28a3tqPa", Amount: 1, Reason: "duplicate"},
	} {
		if _, err := sc.Refunds.Create(ctx, "re-key-"+string(rune('a'+i)), p); err != nil {
			t.Errorf("refund %+v: %v", p, err)
		}
	}
	// stripe-mock's objects carry no oncely_key: both lookups end in
	// NotFound after reading every page there is.
	for _, a := range []providers.Adapter{sc.PaymentIntents, sc.Refunds} {
		res, err := a.Lookup(ctx, "pi-key-a")
		if err != nil || res.Status != providers.NotFound {
			t.Errorf("lookup with %T: %+v, %v", a, res, err)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"POST /v1/payment_intents", "POST /v1/refunds", "GET /v1/payment_intents/search", "GET /v1/payment_intents", "GET /v1/refunds"} {
		if !slices.Contains(routes, want) {
			t.Errorf("the adapter's route %s was not exercised (routes: %v)", want, routes)
		}
	}
}
