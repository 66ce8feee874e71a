package stripefake_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/internal/testutil"
)

// A PaymentIntent goes through its routes as in Stripe: created without a
// method, updated, confirmed for a manual capture, captured in part; a
// second one is confirmed and canceled; transitions its status forbids
// are refused and saved under their key.
func TestPaymentIntentLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	pi := post(t, s, "/v1/payment_intents", "", piForm("2000", "payment_method_types[]", "card", "capture_method", "manual", "metadata[keep]", "1", "metadata[drop]", "2"))
	wantStatus(t, pi, http.StatusOK)
	id := pi.Str("id")
	if pi.Str("status") != "requires_payment_method" || pi.Str("capture_method") != "manual" {
		t.Fatalf("created: %s", pi.Raw)
	}
	up := post(t, s, "/v1/payment_intents/"+id, "", url.Values{"amount": {"1500"}, "description": {"order 7"}, "payment_method": {"pm_card_visa"}, "metadata[drop]": {""}, "metadata[add]": {"3"}})
	if up.Num("amount") != 1500 || up.Str("description") != "order 7" || up.Str("status") != "requires_confirmation" ||
		up.Str("metadata", "keep") != "1" || up.Get("metadata", "drop") != nil || up.Str("metadata", "add") != "3" {
		t.Fatalf("updated: %s", up.Raw)
	}
	conf := post(t, s, "/v1/payment_intents/"+id+"/confirm", "conf-1", url.Values{"expand[]": {"latest_charge"}})
	if conf.Str("status") != "requires_capture" || conf.Num("amount_capturable") != 1500 || conf.Num("amount_received") != 0 ||
		conf.Get("latest_charge", "captured") != false || conf.Get("latest_charge", "paid") != true {
		t.Fatalf("confirmed: %s", conf.Raw)
	}
	wantError(t, post(t, s, "/v1/payment_intents/"+id+"/confirm", "", nil), http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state")
	wantError(t, post(t, s, "/v1/payment_intents/"+id+"/capture", "", url.Values{"amount_to_capture": {"1501"}}), http.StatusBadRequest, "invalid_request_error", "amount_too_large")
	wantError(t, post(t, s, "/v1/payment_intents/"+id, "", url.Values{"amount": {"900"}}), http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state")
	capt := post(t, s, "/v1/payment_intents/"+id+"/capture", "cap-1", url.Values{"amount_to_capture": {"1000"}, "expand[]": {"latest_charge.balance_transaction"}})
	if capt.Str("status") != "succeeded" || capt.Num("amount_received") != 1000 || capt.Num("amount_capturable") != 0 ||
		capt.Num("latest_charge", "amount_captured") != 1000 || capt.Num("latest_charge", "amount_refunded") != 500 ||
		capt.Str("latest_charge", "balance_transaction", "object") != "balance_transaction" || capt.Num("latest_charge", "balance_transaction", "amount") != 1000 {
		t.Fatalf("captured: %s", capt.Raw)
	}
	if again := post(t, s, "/v1/payment_intents/"+id+"/capture", "cap-1", url.Values{"amount_to_capture": {"1000"}, "expand[]": {"latest_charge.balance_transaction"}}); again.Header.Get("Idempotent-Replayed") != "true" || again.Raw != capt.Raw {
		t.Fatalf("capture replay: %v %s", again.Header, again.Raw)
	}
	wantError(t, post(t, s, "/v1/payment_intents/"+id+"/cancel", "", nil), http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state")
	if r := post(t, s, "/v1/payment_intents/"+id, "", url.Values{"metadata[note]": {"shipped"}}); r.Status != http.StatusOK || r.Str("metadata", "note") != "shipped" {
		t.Fatalf("metadata update after success: %s", r.Raw)
	}

	other := post(t, s, "/v1/payment_intents", "", piForm("700", "capture_method", "manual", "payment_method", "pm_card_visa", "automatic_payment_methods[enabled]", "true", "automatic_payment_methods[allow_redirects]", "never"))
	oid := other.Str("id")
	wantError(t, post(t, s, "/v1/payment_intents/"+oid+"/cancel", "", url.Values{"cancellation_reason": {"bored"}}), http.StatusBadRequest, "invalid_request_error", "")
	post(t, s, "/v1/payment_intents/"+oid+"/confirm", "", nil)
	canc := post(t, s, "/v1/payment_intents/"+oid+"/cancel", "", url.Values{"cancellation_reason": {"duplicate"}, "expand[]": {"latest_charge"}})
	if canc.Str("status") != "canceled" || canc.Str("cancellation_reason") != "duplicate" || canc.Get("canceled_at") == nil ||
		canc.Num("latest_charge", "amount_refunded") != 700 || canc.Num("amount_capturable") != 0 {
		t.Fatalf("canceled: %s", canc.Raw)
	}
	wantError(t, post(t, s, "/v1/payment_intents/"+oid+"/capture", "", nil), http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state")
	wantError(t, post(t, s, "/v1/payment_intents/pi_nope/confirm", "", nil), http.StatusNotFound, "invalid_request_error", "resource_missing")

	// Confirming a redirect-capable intent needs a return_url.
	redirecting := post(t, s, "/v1/payment_intents", "", piForm("900", "payment_method", "pm_card_visa"))
	r := post(t, s, "/v1/payment_intents/"+redirecting.Str("id")+"/confirm", "", nil)
	wantStatus(t, r, http.StatusBadRequest)
	if r.Str("error", "param") != "return_url" {
		t.Fatalf("confirm without return_url: %s", r.Raw)
	}
	if r := post(t, s, "/v1/payment_intents/"+redirecting.Str("id")+"/confirm", "", url.Values{"return_url": {"https://example.com/back"}}); r.Str("status") != "succeeded" {
		t.Fatalf("confirm with return_url: %s", r.Raw)
	}

	kinds := map[string]int{}
	for _, e := range s.Journal() {
		kinds[e.Kind]++
	}
	want := map[string]int{fakes.KindPaymentIntent: 3, fakes.KindPaymentIntentUpdate: 2, fakes.KindPaymentIntentConfirm: 3, fakes.KindPaymentIntentCapture: 1, fakes.KindPaymentIntentCancel: 1}
	for k, n := range want {
		if kinds[k] != n {
			t.Errorf("journal has %d %s effects, want %d (all: %v)", kinds[k], k, n, kinds)
		}
	}
}

// GET /v1/charges lists every charge newest first, by PaymentIntent too.
func TestListCharges(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	direct := post(t, s, "/v1/charges", "", url.Values{"amount": {"2500"}, "currency": {"eur"}, "source": {"tok_visa"}})
	pi := post(t, s, "/v1/payment_intents", "", piForm("1000", "payment_method_types[]", "card", "confirm", "true", "payment_method", "pm_card_visa"))
	all := get(t, s, "/v1/charges")
	if !slices.Equal(testutil.IDs(all.Data()), []string{pi.Str("latest_charge"), direct.Str("id")}) || all.Str("url") != "/v1/charges" {
		t.Fatalf("charges: %s", all.Raw)
	}
	of := get(t, s, "/v1/charges?payment_intent="+pi.Str("id")+"&expand[]=data.payment_intent")
	if ids := testutil.IDs(of.Data()); len(ids) != 1 || of.Data()[0]["payment_intent"].(map[string]any)["id"] != pi.Str("id") {
		t.Fatalf("charges of %s: %s", pi.Str("id"), of.Raw)
	}
	if page := get(t, s, "/v1/charges?limit=1"); page.Get("has_more") != true || len(page.Data()) != 1 {
		t.Fatalf("page: %s", page.Raw)
	}
	if none := get(t, s, "/v1/charges?customer=cus_1"); len(none.Data()) != 0 {
		t.Fatalf("charges of a customer: %s", none.Raw)
	}
	wantError(t, get(t, s, "/v1/charges?expand[]=payment_intent"), http.StatusBadRequest, "invalid_request_error", "")
}

// Stripe-Version is checked against the known versions and echoed;
// restricted test keys are accepted; errors carry doc_url and
// request_log_url, and a replayed error keeps the first request's.
func TestVersionKeysAndErrorBodies(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	send := func(version, auth, key, body string) reply {
		t.Helper()
		header := []string{"Content-Type", "application/x-www-form-urlencoded", "Authorization", auth}
		if version != "" {
			header = append(header, "Stripe-Version", version)
		}
		if key != "" {
			header = append(header, "Idempotency-Key", key)
		}
		r, err := testutil.Do(s.Client(), http.MethodPost, s.URL+"/v1/payment_intents", body, header...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bearer := "Bearer " + testKey
	if r := send("", bearer, "", "amount=100&currency=usd"); r.Status != http.StatusOK || r.Header.Get("Stripe-Version") != "2025-08-27.basil" {
		t.Fatalf("default version: %d %v", r.Status, r.Header)
	}
	if r := send("2024-06-20", bearer, "", "amount=100&currency=usd"); r.Status != http.StatusOK || r.Header.Get("Stripe-Version") != "2024-06-20" {
		t.Fatalf("pinned version: %d %v", r.Status, r.Header)
	}
	bad := send("1999-01-01", bearer, "", "amount=100&currency=usd")
	wantError(t, bad, http.StatusBadRequest, "invalid_request_error", "")
	if !strings.Contains(bad.Str("error", "message"), "1999-01-01") {
		t.Fatalf("unknown version: %s", bad.Raw)
	}
	if r := send("", "Bearer rk_test_51restricted", "", "amount=100&currency=usd"); r.Status != http.StatusOK {
		t.Fatalf("restricted key: %s", r.Raw)
	}
	for _, auth := range []string{"Bearer rk_live_1", "Bearer pk_test_1", "Bearer rk_test_"} {
		if r := send("", auth, "", "amount=100&currency=usd"); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", auth, r.Status)
		}
	}

	small := send("", bearer, "", "amount=10&currency=usd")
	wantError(t, small, http.StatusBadRequest, "invalid_request_error", "amount_too_small")
	if small.Str("error", "doc_url") != "https://stripe.com/docs/error-codes/amount-too-small" ||
		small.Str("error", "request_log_url") != "https://dashboard.stripe.com/test/logs/"+small.Header.Get("Request-Id") {
		t.Fatalf("error body: %v %s", small.Header, small.Raw)
	}
	declined := send("", bearer, "dec-log", "amount=100&currency=usd&confirm=true&payment_method=pm_card_chargeDeclined&payment_method_types[]=card")
	replayed := send("", bearer, "dec-log", "amount=100&currency=usd&confirm=true&payment_method=pm_card_chargeDeclined&payment_method_types[]=card")
	if declined.Str("error", "doc_url") != "https://stripe.com/docs/error-codes/card-declined" ||
		declined.Str("error", "request_log_url") != "https://dashboard.stripe.com/test/logs/"+declined.Header.Get("Request-Id") || replayed.Raw != declined.Raw {
		t.Fatalf("decline %s, replay %s", declined.Raw, replayed.Raw)
	}
}
