package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/internal/adaptertest"
	"github.com/oncely/oncely/providers/stripe"
)

const apiKey = "sk_test_oncely"

func newFake(t *testing.T, cfg *stripefake.Config) *stripefake.Server {
	t.Helper()
	s := stripefake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func newClient(url string, cfg *stripe.Config) *stripe.Client {
	if cfg == nil {
		cfg = &stripe.Config{}
	}
	cfg.APIKey = apiKey
	if cfg.HTTP.Timeout == 0 {
		clk := cfg.HTTP.Clock
		cfg.HTTP = adaptertest.HTTPConfig()
		cfg.HTTP.Clock = clk
	}
	return stripe.New(url, cfg)
}

func effects(s *stripefake.Server, kind, key string) func() []fakes.Effect {
	return func() []fakes.Effect { return fakes.Filter(s.Journal(), kind, key) }
}

var payment = stripe.PaymentIntentParams{Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true}

func TestPaymentIntentCreateUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults("POST /v1/payment_intents", true) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, &stripefake.Config{Seed: 1})
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := client.DownstreamKey("a1b2c3", 1)
			pi, err := newClient(s.URL, nil).PaymentIntents.Create(context.Background(), key, payment)
			adaptertest.Check(t, c, err, effects(s, fakes.KindPaymentIntent, key))
			if err == nil {
				e := s.Journal()[0]
				if pi.ID != e.ID || pi.Status != "succeeded" || e.Params["metadata.oncely_key"] != key || e.Params["amount"] != "2500" {
					t.Fatalf("answer %+v, effect %+v", pi, e)
				}
			}
		})
	}
}

func TestRefundCreateUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults("POST /v1/refunds", true) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, &stripefake.Config{Seed: 2})
			sc := newClient(s.URL, nil)
			pi, err := sc.PaymentIntents.Create(context.Background(), "pay-1", payment)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := "refund-1"
			re, err := sc.Refunds.Create(context.Background(), key, stripe.RefundParams{PaymentIntent: pi.ID, Amount: 1000, Reason: "requested_by_customer"})
			adaptertest.Check(t, c, err, effects(s, fakes.KindRefund, key))
			if err == nil && (re.Amount != 1000 || re.PaymentIntent != pi.ID || re.Metadata[stripe.MetadataKey] != key) {
				t.Fatalf("refund %+v", re)
			}
		})
	}
}

// The requests are the ones Stripe documents: paths, form parameters,
// headers.
func TestRequestsAsStripeExpects(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path string
		header       http.Header
		form         url.Values
	}
	reqs := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, err := url.ParseQuery(string(body))
		if r.Method == http.MethodGet {
			form, err = r.URL.Query(), nil
		}
		if err != nil {
			t.Errorf("body %q: %v", body, err)
		}
		reqs <- seen{r.Method, r.URL.Path, r.Header, form}
		switch r.URL.Path {
		case "/v1/payment_intents":
			io.WriteString(w, `{"id":"pi_1","object":"payment_intent","amount":2500,"currency":"eur","status":"succeeded"}`)
		case "/v1/refunds":
			io.WriteString(w, `{"id":"re_1","object":"refund","amount":1000,"currency":"eur","status":"succeeded"}`)
		}
	}))
	t.Cleanup(srv.Close)
	sc := newClient(srv.URL, nil)
	ctx := context.Background()
	if _, err := sc.PaymentIntents.Create(ctx, "k1", stripe.PaymentIntentParams{
		Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
		Description: "order 7", Metadata: map[string]string{"order": "7"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Refunds.Create(ctx, "k2", stripe.RefundParams{PaymentIntent: "pi_1", Amount: 1000}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []seen{
		{"POST", "/v1/payment_intents", http.Header{"Idempotency-Key": {"k1"}}, url.Values{
			"amount": {"2500"}, "currency": {"eur"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"},
			"automatic_payment_methods[enabled]": {"true"}, "automatic_payment_methods[allow_redirects]": {"never"},
			"description": {"order 7"}, "metadata[order]": {"7"}, "metadata[oncely_key]": {"k1"},
		}},
		{"POST", "/v1/refunds", http.Header{"Idempotency-Key": {"k2"}}, url.Values{
			"payment_intent": {"pi_1"}, "amount": {"1000"}, "metadata[oncely_key]": {"k2"},
		}},
	} {
		got := <-reqs
		if got.method != want.method || got.path != want.path || got.form.Encode() != want.form.Encode() {
			t.Errorf("got %s %s %s\nwant %s %s %s", got.method, got.path, got.form.Encode(), want.method, want.path, want.form.Encode())
		}
		if got.header.Get("Idempotency-Key") != want.header.Get("Idempotency-Key") ||
			got.header.Get("Authorization") != "Bearer "+apiKey || got.header.Get("Stripe-Version") != stripe.APIVersion ||
			got.header.Get("Content-Type") != "application/x-www-form-urlencoded" || got.header.Get("User-Agent") != oncely.UserAgent {
			t.Errorf("%s: headers %v", got.path, got.header)
		}
	}
}

func TestDeclineIsPermanentAndReplayed(t *testing.T) {
	t.Parallel()
	s := newFake(t, &stripefake.Config{Seed: 3})
	sc := newClient(s.URL, nil)
	declined := payment
	declined.PaymentMethod = "pm_card_chargeDeclined"
	for range 2 {
		_, err := sc.PaymentIntents.Create(context.Background(), "k-declined", declined)
		if errclass.Of(err) != errclass.Permanent || !errors.Is(err, stripe.ErrCardDeclined) {
			t.Fatalf("%v: want a permanent decline", err)
		}
		var pe *providers.ProviderError
		if !errors.As(err, &pe) || pe.Status != 402 || pe.Code != "card_declined" {
			t.Fatalf("%+v", pe)
		}
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("%d effects for a decline", n)
	}
	// The next attempt's key is a new request.
	if _, err := sc.PaymentIntents.Create(context.Background(), client.DownstreamKey("k-declined", 2), payment); err != nil {
		t.Fatal(err)
	}
}

func TestReplayAndKeyReuse(t *testing.T) {
	t.Parallel()
	s := newFake(t, &stripefake.Config{Seed: 4})
	sc := newClient(s.URL, nil)
	ctx := context.Background()
	first, err := sc.PaymentIntents.Create(ctx, "k", payment)
	if err != nil {
		t.Fatal(err)
	}
	again, err := sc.PaymentIntents.Create(ctx, "k", payment)
	if err != nil || again.ID != first.ID || !again.Replayed || first.Replayed {
		t.Fatalf("repeat: %+v, %v (first %+v)", again, err, first)
	}
	other := payment
	other.Amount = 9999
	_, err = sc.PaymentIntents.Create(ctx, "k", other)
	if errclass.Of(err) != errclass.Permanent || !errors.Is(err, stripe.ErrKeyReused) {
		t.Fatalf("key reused with another amount: %v", err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("%d effects", n)
	}
}

// While a request with the same key is executing, Stripe refuses the
// repeat with 409 idempotency_key_in_use: nothing was done, a retry may
// succeed.
func TestKeyInUse(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"error":{"code":"idempotency_key_in_use","message":"There is currently another in-progress request using this Idempotent Key.","type":"invalid_request_error"}}`)
	}))
	t.Cleanup(srv.Close)
	_, err := newClient(srv.URL, nil).PaymentIntents.Create(context.Background(), "k", payment)
	if errclass.Of(err) != errclass.Definite || !errors.Is(err, stripe.ErrKeyInUse) {
		t.Fatalf("%v, want definite key in use", err)
	}
	if n := calls.Load(); n != 4 {
		t.Fatalf("%d requests, want the first and 3 retries", n)
	}
}

func TestInvalidCallsSendNothing(t *testing.T) {
	t.Parallel()
	s := newFake(t, &stripefake.Config{Seed: 6})
	sc := newClient(s.URL, nil)
	ctx := context.Background()
	_, err := sc.PaymentIntents.Create(ctx, "", payment)
	if !errors.Is(err, providers.ErrInvalidRequest) || errclass.Of(err) != errclass.Permanent {
		t.Fatalf("empty key: %v", err)
	}
	p := payment
	p.Metadata = map[string]string{stripe.MetadataKey: "mine"}
	if _, err := sc.PaymentIntents.Create(ctx, "k", p); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("reserved metadata: %v", err)
	}
	if _, err := sc.Refunds.Create(ctx, "k", stripe.RefundParams{PaymentIntent: "pi_1", Metadata: map[string]string{stripe.MetadataKey: "x"}}); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("reserved metadata: %v", err)
	}
	for _, k := range []string{"items[0]", "a]b", "[x"} {
		p = payment
		p.Metadata = map[string]string{k: "v"}
		_, err := sc.PaymentIntents.Create(ctx, "k-brackets", p)
		if !errors.Is(err, providers.ErrInvalidRequest) || !strings.Contains(err.Error(), "[ or ]") || errclass.Of(err) != errclass.Permanent {
			t.Fatalf("metadata key %q: %v", k, err)
		}
		if _, err := sc.Refunds.Create(ctx, "k-brackets", stripe.RefundParams{PaymentIntent: "pi_1", Metadata: map[string]string{k: "v"}}); !errors.Is(err, providers.ErrInvalidRequest) {
			t.Fatalf("refund metadata key %q: %v", k, err)
		}
	}
	// A parameter Stripe rejects is a permanent failure.
	p = payment
	p.Currency = ""
	if _, err := sc.PaymentIntents.Create(ctx, "k2", p); errclass.Of(err) != errclass.Permanent {
		t.Fatalf("missing currency: %v", err)
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("%d effects", n)
	}
}

func lookupFixture(t *testing.T, maxPages int) (*stripefake.Server, *stripe.Client, *clock.Fake) {
	t.Helper()
	clock := clock.NewFake(time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC))
	s := newFake(t, &stripefake.Config{Seed: 7, Clock: clock, SearchLag: time.Minute})
	sc := newClient(s.URL, &stripe.Config{HTTP: providers.Config{Clock: clock}, SearchLag: time.Minute, ClockSkew: time.Second, MaxListPages: maxPages})
	return s, sc, clock
}

func wantLookup(t *testing.T, a providers.Adapter, key string, want providers.LookupStatus, ref string) {
	t.Helper()
	got, err := a.Lookup(context.Background(), key)
	if err != nil {
		t.Fatalf("lookup %s: %v", key, err)
	}
	if got.Status != want || (ref != "" && got.Ref != ref) {
		t.Fatalf("lookup %s: %+v, want %v %s", key, got, want, ref)
	}
	if want == providers.Found && got.Summary == "" {
		t.Fatalf("lookup %s: found without a summary", key)
	}
}

func TestPaymentIntentLookup(t *testing.T) {
	t.Parallel()
	s, sc, clock := lookupFixture(t, 1)
	ctx := context.Background()
	pi, err := sc.PaymentIntents.Create(ctx, "k-found", payment)
	if err != nil {
		t.Fatal(err)
	}
	// Inside the search lag: the list of recent PaymentIntents finds it.
	wantLookup(t, sc.PaymentIntents, "k-found", providers.Found, pi.ID)
	wantLookup(t, sc.PaymentIntents, "k-absent", providers.NotFound, "")

	// Past the lag, the search finds it, even with the list failing.
	clock.Advance(2 * time.Minute)
	s.Faults.Add(fault.Rule{Route: "GET /v1/payment_intents", Action: fault.FailBeforeCommit, Status: 400})
	wantLookup(t, sc.PaymentIntents, "k-found", providers.Found, pi.ID)
	s.Faults.Clear()

	// More recent PaymentIntents than the scan covers: inside the lag the
	// lookup cannot tell.
	late, err := sc.PaymentIntents.Create(ctx, "k-late", payment)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if _, err := sc.PaymentIntents.Create(ctx, fmt.Sprintf("k-other-%d", i), stripe.PaymentIntentParams{Amount: 100, Currency: "usd"}); err != nil {
			t.Fatal(err)
		}
	}
	wantLookup(t, sc.PaymentIntents, "k-late", providers.Inconclusive, "")
	wantLookup(t, sc.PaymentIntents, "k-never", providers.Inconclusive, "")
	caps := sc.PaymentIntents.Capabilities()
	if caps.Lookup != providers.Eventual || caps.IndexLag != time.Minute || caps.DedupWindow != 24*time.Hour {
		t.Fatalf("capabilities %+v", caps)
	}
	// Once the lag has passed, the search sees it.
	clock.Advance(2 * time.Minute)
	wantLookup(t, sc.PaymentIntents, "k-late", providers.Found, late.ID)
}

func TestRefundLookup(t *testing.T) {
	t.Parallel()
	_, sc, _ := lookupFixture(t, 1)
	ctx := context.Background()
	pi, err := sc.PaymentIntents.Create(ctx, "pay", stripe.PaymentIntentParams{Amount: 100000, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true})
	if err != nil {
		t.Fatal(err)
	}
	re, err := sc.Refunds.Create(ctx, "r-found", stripe.RefundParams{PaymentIntent: pi.ID, Amount: 500})
	if err != nil {
		t.Fatal(err)
	}
	wantLookup(t, sc.Refunds, "r-found", providers.Found, re.ID)
	wantLookup(t, sc.Refunds, "r-absent", providers.NotFound, "")
	for i := range 100 {
		if _, err := sc.Refunds.Create(ctx, fmt.Sprintf("r-other-%d", i), stripe.RefundParams{PaymentIntent: pi.ID, Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// The refund is now beyond the one page the scan may read.
	wantLookup(t, sc.Refunds, "r-found", providers.Inconclusive, "")
	if caps := sc.Refunds.Capabilities(); caps.Lookup != providers.Consistent || caps.DedupWindow != 24*time.Hour {
		t.Fatalf("capabilities %+v", caps)
	}
}

func TestRefundLookupPages(t *testing.T) {
	t.Parallel()
	_, sc, _ := lookupFixture(t, 3)
	ctx := context.Background()
	pi, err := sc.PaymentIntents.Create(ctx, "pay", stripe.PaymentIntentParams{Amount: 100000, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true})
	if err != nil {
		t.Fatal(err)
	}
	re, err := sc.Refunds.Create(ctx, "r-old", stripe.RefundParams{PaymentIntent: pi.ID, Amount: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 150 {
		if _, err := sc.Refunds.Create(ctx, fmt.Sprintf("r-%d", i), stripe.RefundParams{PaymentIntent: pi.ID, Amount: 1}); err != nil {
			t.Fatal(err)
		}
	}
	wantLookup(t, sc.Refunds, "r-old", providers.Found, re.ID) // on the second page
	wantLookup(t, sc.Refunds, "r-absent", providers.NotFound, "")
}

func TestLookupFailureIsAnError(t *testing.T) {
	t.Parallel()
	s, sc, _ := lookupFixture(t, 1)
	s.Faults.Add(fault.Rule{Route: "GET /v1/payment_intents/search", Action: fault.FailBeforeCommit, Status: 500})
	s.Faults.Add(fault.Rule{Route: "GET /v1/refunds", Action: fault.FailBeforeCommit, Status: 503})
	for _, a := range []providers.Adapter{sc.PaymentIntents, sc.Refunds} {
		res, err := a.Lookup(context.Background(), "k")
		var pe *providers.ProviderError
		if !errors.As(err, &pe) || res.Status != providers.Inconclusive {
			t.Fatalf("%T: %+v, %v", a, res, err)
		}
	}
}

// The search is read page by page, up to MaxSearchPages: a match on a
// later page is found, and a bound that cuts the results makes the lookup
// inconclusive, never "not found". Stripe's exact match ignores case, so
// objects carrying the key in another case fill the pages.
func TestPaymentIntentLookupPagesSearch(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC))
	s := newFake(t, &stripefake.Config{Seed: 8, Clock: clock})
	ctx := context.Background()
	target, err := newClient(s.URL, &stripe.Config{HTTP: providers.Config{Clock: clock}}).PaymentIntents.Create(ctx, "page-key", stripe.PaymentIntentParams{Amount: 100, Currency: "usd"})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		form := url.Values{"amount": {"100"}, "currency": {"usd"}, "metadata[" + stripe.MetadataKey + "]": {"PAGE-KEY"}}
		req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/payment_intents", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("create: %d", resp.StatusCode)
		}
	}
	// Past the lag and the skew, only the search can find them.
	clock.Advance(2 * time.Hour)
	cfg := func(pages int) *stripe.Config {
		return &stripe.Config{HTTP: providers.Config{Clock: clock}, SearchLag: time.Minute, ClockSkew: time.Second, MaxSearchPages: pages}
	}
	wantLookup(t, newClient(s.URL, cfg(1)).PaymentIntents, "page-key", providers.Inconclusive, "")
	wantLookup(t, newClient(s.URL, cfg(2)).PaymentIntents, "page-key", providers.Found, target.ID)
	wantLookup(t, newClient(s.URL, cfg(0)).PaymentIntents, "page-key", providers.Found, target.ID)
	wantLookup(t, newClient(s.URL, cfg(1)).PaymentIntents, "page-key-absent", providers.NotFound, "")
}

// The adapters link an object to its page in Stripe's Dashboard, in the
// key's mode, and only when they talk to Stripe's API.
func TestLink(t *testing.T) {
	live := stripe.New("https://api.stripe.com", &stripe.Config{APIKey: "sk_live_x"})
	test := stripe.New("https://api.stripe.com", &stripe.Config{APIKey: "sk_test_x"})
	fake := stripe.New("http://127.0.0.1:1", &stripe.Config{APIKey: "sk_test_x"})
	var _ providers.Linker = live.Refunds
	for _, tc := range []struct {
		l         providers.Linker
		ref, want string
	}{
		{live.Refunds, "re_123", "https://dashboard.stripe.com/refunds/re_123"},
		{test.Refunds, "re_123", "https://dashboard.stripe.com/test/refunds/re_123"},
		{live.PaymentIntents, "pi_9", "https://dashboard.stripe.com/payments/pi_9"},
		{test.PaymentIntents, "pi_9", "https://dashboard.stripe.com/test/payments/pi_9"},
		{live.Refunds, "pi_9", ""},   // not a refund
		{live.Refunds, "", ""},       // no reference yet
		{live.Refunds, "re_1/x", ""}, // not an id
		{fake.Refunds, "re_123", ""}, // no Dashboard behind a fake
	} {
		if got := tc.l.Link(tc.ref, "dk"); got != tc.want {
			t.Errorf("%T.Link(%q) = %q, want %q", tc.l, tc.ref, got, tc.want)
		}
	}
}
