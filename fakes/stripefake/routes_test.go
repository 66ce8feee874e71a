package stripefake_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/stripefake"
)

func TestCreateAndRetrievePaymentIntent(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &stripefake.Config{Clock: clock})
	r := post(t, s, "/v1/payment_intents", "k1", piForm("2000",
		"metadata[oncely_key]", "act_1", "payment_method_types[]", "card", "description", "Order 42"))
	wantStatus(t, r, http.StatusOK)
	id := r.Str("id")
	if !strings.HasPrefix(id, "pi_") || r.Str("object") != "payment_intent" || r.Num("amount") != 2000 ||
		r.Str("currency") != "usd" || r.Str("status") != "requires_payment_method" || r.Get("livemode") != false ||
		r.Str("metadata", "oncely_key") != "act_1" || int64(r.Num("created")) != clock.Now().Unix() ||
		!strings.HasPrefix(r.Str("client_secret"), id+"_secret_") {
		t.Fatalf("unexpected PaymentIntent: %s", r.Raw)
	}
	if r.Header.Get("Idempotency-Key") != "k1" || !strings.HasPrefix(r.Header.Get("Request-Id"), "req_") {
		t.Fatalf("headers = %v", r.Header)
	}
	got := get(t, s, "/v1/payment_intents/"+id)
	wantStatus(t, got, http.StatusOK)
	if got.Raw != r.Raw {
		t.Fatalf("retrieve = %s, create = %s", got.Raw, r.Raw)
	}
	journal := s.Journal()
	if len(journal) != 1 {
		t.Fatalf("journal = %+v", journal)
	}
	e := journal[0]
	if e.Kind != fakes.KindPaymentIntent || e.ID != id || e.Key != "k1" || e.Params["amount"] != "2000" ||
		e.Params["metadata.oncely_key"] != "act_1" || !e.At.Equal(clock.Now()) {
		t.Fatalf("effect = %+v", e)
	}
	wantError(t, get(t, s, "/v1/payment_intents/pi_missing"), http.StatusNotFound, "invalid_request_error", "resource_missing")
}

func TestConfirmSucceedsOrDeclines(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ok := post(t, s, "/v1/payment_intents", "", piForm("1500", "payment_method_types[]", "card", "confirm", "true", "payment_method", "pm_card_visa", "expand[]", "latest_charge"))
	wantStatus(t, ok, http.StatusOK)
	if ok.Str("status") != "succeeded" || ok.Num("amount_received") != 1500 || ok.Str("latest_charge", "status") != "succeeded" ||
		ok.Str("latest_charge", "payment_intent") != ok.Str("id") {
		t.Fatalf("confirmed PaymentIntent: %s", ok.Raw)
	}
	chargeID := ok.Str("latest_charge", "id")
	if ch := get(t, s, "/v1/charges/"+chargeID); ch.Num("amount_captured") != 1500 || ch.Get("paid") != true {
		t.Fatalf("charge: %s", ch.Raw)
	}

	declined := post(t, s, "/v1/payment_intents", "dec-1", piForm("1500", "payment_method_types[]", "card", "confirm", "true", "payment_method", "pm_card_chargeDeclined"))
	wantError(t, declined, http.StatusPaymentRequired, "card_error", "card_declined")
	if declined.Str("error", "decline_code") != "generic_decline" || declined.Str("error", "payment_intent", "status") != "requires_payment_method" ||
		!strings.HasPrefix(declined.Str("error", "charge"), "ch_") {
		t.Fatalf("decline: %s", declined.Raw)
	}
	// The decline began executing: it is saved and replayed.
	again := post(t, s, "/v1/payment_intents", "dec-1", piForm("1500", "payment_method_types[]", "card", "confirm", "true", "payment_method", "pm_card_chargeDeclined"))
	if again.Status != http.StatusPaymentRequired || again.Header.Get("Idempotent-Replayed") != "true" || again.Raw != declined.Raw {
		t.Fatalf("replayed decline: %d %v %s", again.Status, again.Header, again.Raw)
	}
	if n := len(fakes.Filter(s.Journal(), fakes.KindPaymentIntent, "")); n != 1 {
		t.Fatalf("journal has %d payment intents, want 1 (declines are not effects)", n)
	}
	wantError(t, post(t, s, "/v1/payment_intents", "", piForm("100", "confirm", "true")), http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state")
	if r := post(t, s, "/v1/payment_intents", "", piForm("100", "payment_method", "pm_card_visa")); r.Str("status") != "requires_confirmation" {
		t.Fatalf("unconfirmed with a method: %s", r.Raw)
	}
}

func TestParameterValidation(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	cases := []struct {
		name, path, body, code, param string
	}{
		{"missing amount", "/v1/payment_intents", "currency=usd", "parameter_missing", "amount"},
		{"missing currency", "/v1/payment_intents", "amount=100", "parameter_missing", "currency"},
		{"unknown", "/v1/payment_intents", "amount=100&currency=usd&colour=red", "parameter_unknown", "colour"},
		{"nested", "/v1/payment_intents", "amount=100&currency=usd&metadata[a][b]=c", "", "metadata[a]"},
		{"scalar with key", "/v1/payment_intents", "amount[x]=100&currency=usd", "", "amount"},
		{"bad integer", "/v1/payment_intents", "amount=ten&currency=usd", "parameter_invalid_integer", "amount"},
		{"zero amount", "/v1/payment_intents", "amount=0&currency=usd", "parameter_invalid_integer", "amount"},
		{"bad currency", "/v1/payment_intents", "amount=100&currency=dollars", "", "currency"},
		{"bad boolean", "/v1/payment_intents", "amount=100&currency=usd&confirm=yes", "", "confirm"},
		{"unknown apm field", "/v1/payment_intents", "amount=100&currency=usd&automatic_payment_methods[x]=1", "parameter_unknown", "automatic_payment_methods[x]"},
		{"apm without enabled", "/v1/payment_intents", "amount=100&currency=usd&automatic_payment_methods[allow_redirects]=never", "parameter_missing", "automatic_payment_methods[enabled]"},
		{"array without brackets", "/v1/payment_intents", "amount=100&currency=usd&expand=latest_charge", "", "expand"},
		{"bad expand", "/v1/payment_intents", "amount=100&currency=usd&expand[]=colour", "", "expand"},
		{"bad nested expand", "/v1/payment_intents", "amount=100&currency=usd&expand[]=latest_charge.colour", "", "expand"},
		{"expand too deep", "/v1/payment_intents", "amount=100&currency=usd&expand[]=latest_charge.payment_intent.latest_charge.payment_intent.latest_charge", "", "expand"},
		{"below the minimum", "/v1/payment_intents", "amount=49&currency=usd", "amount_too_small", "amount"},
		{"below the GBP minimum", "/v1/payment_intents", "amount=29&currency=gbp", "amount_too_small", "amount"},
		{"below the JPY minimum", "/v1/payment_intents", "amount=49&currency=jpy", "amount_too_small", "amount"},
		{"above the maximum", "/v1/payment_intents", "amount=100000000&currency=eur", "amount_too_large", "amount"},
		{"unsupported currency", "/v1/payment_intents", "amount=100&currency=xyz", "", "currency"},
		{"apm and types", "/v1/payment_intents", "amount=100&currency=usd&automatic_payment_methods[enabled]=true&payment_method_types[]=card", "", "automatic_payment_methods"},
		{"redirects without return_url", "/v1/payment_intents", "amount=100&currency=usd&confirm=true&payment_method=pm_card_visa", "", "return_url"},
		{"bad capture method", "/v1/payment_intents", "amount=100&currency=usd&capture_method=later", "", "capture_method"},
		{"long descriptor suffix", "/v1/payment_intents", "amount=100&currency=usd&statement_descriptor_suffix=" + strings.Repeat("s", 23), "", "statement_descriptor_suffix"},
		{"off_session unconfirmed", "/v1/payment_intents", "amount=100&currency=usd&off_session=true", "", "off_session"},
		{"long metadata value", "/v1/payment_intents", "amount=100&currency=usd&metadata[k]=" + strings.Repeat("v", 501), "", "metadata[k]"},
		{"no refund target", "/v1/refunds", "amount=100", "parameter_missing", ""},
		{"bad reason", "/v1/refunds", "charge=ch_x&reason=bored", "", "reason"},
		{"missing source", "/v1/charges", "amount=100&currency=usd", "parameter_missing", "source"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := call(t, s, request{method: http.MethodPost, path: tc.path, body: tc.body})
			wantError(t, r, http.StatusBadRequest, "invalid_request_error", tc.code)
			if r.Str("error", "param") != tc.param {
				t.Fatalf("param = %q, want %q", r.Str("error", "param"), tc.param)
			}
		})
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("invalid requests committed %d effects", n)
	}
	ok := call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", body: "amount=100&currency=USD&metadata=&automatic_payment_methods[enabled]=true"})
	wantStatus(t, ok, http.StatusOK)
	if ok.Str("currency") != "usd" || ok.Get("automatic_payment_methods", "enabled") != true {
		t.Fatalf("created: %s", ok.Raw)
	}
	typed := call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", body: "amount=50&currency=eur&payment_method_types[0]=card&payment_method_types[1]=link"})
	wantStatus(t, typed, http.StatusOK)
	if typed.Get("automatic_payment_methods") != nil || !slices.Equal(typed.Get("payment_method_types").([]any), []any{"card", "link"}) {
		t.Fatalf("created with types: %s", typed.Raw)
	}
	yen := call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", body: "amount=50&currency=jpy&confirm=true&payment_method=pm_card_visa&return_url=https%3A%2F%2Fexample.com%2Fdone"})
	if yen.Status != http.StatusOK || yen.Str("status") != "succeeded" || yen.Num("amount") != 50 {
		t.Fatalf("confirmed with a return_url: %s", yen.Raw)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	for _, auth := range []string{"-", "Bearer sk_live_abcdefghijkl", "Bearer pk_test_abc", "Bearer sk_test_", "Token sk_test_abc"} {
		r := call(t, s, request{method: http.MethodGet, path: "/v1/payment_intents", auth: auth})
		wantError(t, r, http.StatusUnauthorized, "invalid_request_error", "")
		if strings.Contains(r.Raw, "abcdefghijkl") {
			t.Fatalf("the key was not redacted: %s", r.Raw)
		}
	}
	hr, _ := http.NewRequest(http.MethodGet, s.URL+"/v1/payment_intents", nil)
	hr.SetBasicAuth(testKey, "")
	resp, err := s.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("basic auth: status %d", resp.StatusCode)
	}
}

func TestMalformedInput(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	wantError(t, call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", body: "amount=%zz"}), http.StatusBadRequest, "invalid_request_error", "")
	wantError(t, call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", body: `{"amount":100}`}), http.StatusBadRequest, "invalid_request_error", "parameter_unknown")
	big := "amount=100&currency=usd&description=" + strings.Repeat("x", 1<<20)
	wantStatus(t, call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", body: big}), http.StatusRequestEntityTooLarge)
	wantError(t, call(t, s, request{method: http.MethodGet, path: "/v1/customers"}), http.StatusNotFound, "invalid_request_error", "")
	wantError(t, call(t, s, request{method: http.MethodDelete, path: "/v1/payment_intents/pi_1"}), http.StatusNotFound, "invalid_request_error", "")
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("malformed requests committed %d effects", n)
	}
}

// A chunked body (no Content-Length) is read like any other.
func TestChunkedBody(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	body := io.MultiReader(strings.NewReader("amount=700&"), bytes.NewReader([]byte("currency=eur")))
	hr, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/payment_intents", body)
	hr.Header.Set("Authorization", "Bearer "+testKey)
	hr.Header.Set("Idempotency-Key", "chunked-1")
	if hr.ContentLength != 0 {
		t.Fatalf("request has a length; it would not be chunked")
	}
	resp, err := s.Client().Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if e := s.Journal(); len(e) != 1 || e[0].Params["currency"] != "eur" {
		t.Fatalf("journal = %+v", e)
	}
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &stripefake.Config{Clock: clock})
	var created []string // oldest first
	for i := range 5 {
		r := post(t, s, "/v1/payment_intents", "", piForm("100"))
		created = append(created, r.Str("id"))
		if i%2 == 0 {
			clock.Advance(10 * time.Second) // two share a second, ordered by creation
		}
	}
	newestFirst := slices.Clone(created)
	slices.Reverse(newestFirst)

	p1 := get(t, s, "/v1/payment_intents?limit=2")
	if p1.Str("object") != "list" || p1.Str("url") != "/v1/payment_intents" || p1.Get("has_more") != true ||
		!slices.Equal(testutil.IDs(p1.Data()), newestFirst[:2]) {
		t.Fatalf("page 1: %s", p1.Raw)
	}
	p2 := get(t, s, "/v1/payment_intents?limit=2&starting_after="+newestFirst[1])
	if p2.Get("has_more") != true || !slices.Equal(testutil.IDs(p2.Data()), newestFirst[2:4]) {
		t.Fatalf("page 2: %v", testutil.IDs(p2.Data()))
	}
	p3 := get(t, s, "/v1/payment_intents?limit=2&starting_after="+newestFirst[3])
	if p3.Get("has_more") != false || !slices.Equal(testutil.IDs(p3.Data()), newestFirst[4:]) {
		t.Fatalf("page 3: %v", testutil.IDs(p3.Data()))
	}
	back := get(t, s, "/v1/payment_intents?limit=2&ending_before="+newestFirst[4])
	if back.Get("has_more") != true || !slices.Equal(testutil.IDs(back.Data()), newestFirst[2:4]) {
		t.Fatalf("ending_before: %v has_more %v", testutil.IDs(back.Data()), back.Get("has_more"))
	}
	// Created at T0, T10, T10, T20, T20; the clock is at T30.
	start := clock.Now().Add(-20 * time.Second).Unix()
	recent := get(t, s, "/v1/payment_intents?created[gte]="+strconv.FormatInt(start, 10))
	if !slices.Equal(testutil.IDs(recent.Data()), newestFirst[:4]) {
		t.Fatalf("created[gte]: %v, want %v", testutil.IDs(recent.Data()), newestFirst[:4])
	}
	if exact := get(t, s, "/v1/payment_intents?created="+strconv.FormatInt(start, 10)); !slices.Equal(testutil.IDs(exact.Data()), newestFirst[2:4]) {
		t.Fatalf("created=: %v", testutil.IDs(exact.Data()))
	}
	if exp := get(t, s, "/v1/payment_intents?limit=1&expand[]=data.latest_charge"); exp.Status != http.StatusOK {
		t.Fatalf("expand data.latest_charge: %s", exp.Raw)
	}
	wantError(t, get(t, s, "/v1/payment_intents?starting_after=pi_nope"), http.StatusNotFound, "invalid_request_error", "resource_missing")
	wantError(t, get(t, s, "/v1/payment_intents?limit=101"), http.StatusBadRequest, "invalid_request_error", "")
	wantError(t, get(t, s, "/v1/payment_intents?starting_after="+created[0]+"&ending_before="+created[1]), http.StatusBadRequest, "invalid_request_error", "")
	wantError(t, get(t, s, "/v1/payment_intents?created[eq]=1"), http.StatusBadRequest, "invalid_request_error", "parameter_unknown")
}

func TestSearchLagsAndMatches(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &stripefake.Config{Clock: clock, SearchLag: time.Minute})
	a := post(t, s, "/v1/payment_intents", "", piForm("500", "metadata[oncely_key]", "key-a", "metadata[tenant]", "acme"))
	clock.Advance(time.Second)
	b := post(t, s, "/v1/payment_intents", "", piForm("900", "metadata[oncely_key]", "key-b", "confirm", "true", "payment_method", "pm_card_visa", "payment_method_types[]", "card"))
	search := func(q string, extra ...string) reply {
		t.Helper()
		v := url.Values{"query": {q}}
		for i := 0; i+1 < len(extra); i += 2 {
			v.Add(extra[i], extra[i+1])
		}
		r := get(t, s, "/v1/payment_intents/search?"+v.Encode())
		wantStatus(t, r, http.StatusOK)
		return r
	}
	if r := search("metadata['oncely_key']:'key-a'"); len(r.Data()) != 0 || r.Str("object") != "search_result" {
		t.Fatalf("found before the index caught up: %s", r.Raw)
	}
	clock.Advance(59 * time.Second) // a is 60 s old, b 59 s
	if r := search("metadata['oncely_key']:'key-a'"); !slices.Equal(testutil.IDs(r.Data()), []string{a.Str("id")}) {
		t.Fatalf("a after the lag: %s", r.Raw)
	}
	if r := search(`metadata["oncely_key"]:"key-b"`); len(r.Data()) != 0 {
		t.Fatalf("b visible 59 s after creation with a 60 s lag")
	}
	clock.Advance(time.Second)
	for q, want := range map[string][]string{
		`metadata["oncely_key"]:"key-b"`:                          {b.Str("id")},
		"status:'succeeded'":                                      {b.Str("id")},
		"-status:'succeeded'":                                     {a.Str("id")},
		"amount>=500 AND currency:'usd'":                          {b.Str("id"), a.Str("id")},
		"amount>600 OR metadata['tenant']:'acme'":                 {b.Str("id"), a.Str("id")},
		"metadata['tenant']:null":                                 {b.Str("id")},
		"amount>=500 currency:'usd'":                              {b.Str("id"), a.Str("id")},
		"amount>600 or metadata['tenant']:'acme'":                 {b.Str("id"), a.Str("id")},
		"amount>600 Or metadata['tenant']:'acme'":                 {b.Str("id"), a.Str("id")},
		"metadata['oncely_key']:'KEY-A' and currency:'USD'":       {a.Str("id")},
		"metadata['oncely_key']:'key'":                            nil,
		"amount:500":                                              {a.Str("id")},
		"metadata['oncely_key']:'key-a' AND status:'nope'":        nil,
		`metadata['oncely_key']:'it\'s'`:                          nil,
		"created<" + strconv.FormatInt(clock.Now().Unix()-60, 10): {a.Str("id")},
		"customer:'cus_1'":                                        nil,
		"metadata['oncely_key']:'key-a'  AND  amount:500 ":        {a.Str("id")},
	} {
		if got := testutil.IDs(search(q).Data()); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("search %q = %v, want %v", q, got, want)
		}
	}
	p1 := search("currency:'usd'", "limit", "1")
	next := p1.Str("next_page")
	if p1.Get("has_more") != true || next == "" || !slices.Equal(testutil.IDs(p1.Data()), []string{b.Str("id")}) {
		t.Fatalf("search page 1: %s", p1.Raw)
	}
	p2 := search("currency:'usd'", "limit", "1", "page", next)
	if p2.Get("has_more") != false || !slices.Equal(testutil.IDs(p2.Data()), []string{a.Str("id")}) {
		t.Fatalf("search page 2: %s", p2.Raw)
	}
	for _, bad := range []string{"", "colour:'red'", "status:succeeded", "amount:'x'", "status>'a'", "a:1 AND b:2 OR c:3",
		"status:'a' AND amount:1 OR amount:2", "metadata[k]:'v'", "metadata['k':'v'", "status:'unterminated", "amount~'abc'", "status~'ab'", "metadata['oncely_key']~'key'", "status:'a'status:'b'", "status:'a' or amount:1 amount:2", "status:'a' XOR status:'b'"} {
		r := get(t, s, "/v1/payment_intents/search?"+url.Values{"query": {bad}}.Encode())
		if r.Status != http.StatusBadRequest || r.Str("error", "type") != "invalid_request_error" {
			t.Errorf("query %q: %d %s", bad, r.Status, r.Raw)
		}
	}
	wantError(t, get(t, s, "/v1/payment_intents/search?query=amount:1&page=garbage"), http.StatusBadRequest, "invalid_request_error", "")
}

func TestRefunds(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	pi := post(t, s, "/v1/payment_intents", "", piForm("1000", "payment_method_types[]", "card", "confirm", "true", "payment_method", "pm_card_visa"))
	piID, chID := pi.Str("id"), pi.Str("latest_charge")

	r1 := post(t, s, "/v1/refunds", "rf-1", url.Values{"payment_intent": {piID}, "amount": {"300"}, "metadata[oncely_key]": {"act-9"}, "reason": {"requested_by_customer"}})
	wantStatus(t, r1, http.StatusOK)
	if !strings.HasPrefix(r1.Str("id"), "re_") || r1.Str("object") != "refund" || r1.Num("amount") != 300 || r1.Str("charge") != chID ||
		r1.Str("payment_intent") != piID || r1.Str("status") != "succeeded" || r1.Str("metadata", "oncely_key") != "act-9" {
		t.Fatalf("refund: %s", r1.Raw)
	}
	tooMuch := post(t, s, "/v1/refunds", "rf-2", url.Values{"payment_intent": {piID}, "amount": {"701"}})
	wantError(t, tooMuch, http.StatusBadRequest, "invalid_request_error", "amount_too_large")
	// Decided while executing: saved under the key.
	if again := post(t, s, "/v1/refunds", "rf-2", url.Values{"payment_intent": {piID}, "amount": {"701"}}); again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("amount_too_large not replayed: %v", again.Header)
	}
	rest := post(t, s, "/v1/refunds", "", url.Values{"charge": {chID}, "expand[]": {"charge"}})
	if rest.Num("amount") != 700 || rest.Num("charge", "amount_refunded") != 1000 || rest.Get("charge", "refunded") != true {
		t.Fatalf("remaining refund: %s", rest.Raw)
	}
	wantError(t, post(t, s, "/v1/refunds", "", url.Values{"charge": {chID}}), http.StatusBadRequest, "invalid_request_error", "charge_already_refunded")
	wantError(t, post(t, s, "/v1/refunds", "", url.Values{"payment_intent": {"pi_nope"}}), http.StatusNotFound, "invalid_request_error", "resource_missing")
	wantError(t, post(t, s, "/v1/refunds", "", url.Values{"charge": {"ch_nope"}}), http.StatusNotFound, "invalid_request_error", "resource_missing")
	wantError(t, post(t, s, "/v1/refunds", "", url.Values{"charge": {chID}, "payment_intent": {piID}}), http.StatusBadRequest, "invalid_request_error", "")
	open := post(t, s, "/v1/payment_intents", "", piForm("100"))
	wantError(t, post(t, s, "/v1/refunds", "", url.Values{"payment_intent": {open.Str("id")}}), http.StatusBadRequest, "invalid_request_error", "payment_intent_unexpected_state")

	other := post(t, s, "/v1/payment_intents", "", piForm("50", "payment_method_types[]", "card", "confirm", "true", "payment_method", "pm_card_visa"))
	post(t, s, "/v1/refunds", "", url.Values{"payment_intent": {other.Str("id")}})

	list := get(t, s, "/v1/refunds?payment_intent="+piID)
	if !slices.Equal(testutil.IDs(list.Data()), []string{rest.Str("id"), r1.Str("id")}) || list.Str("url") != "/v1/refunds" {
		t.Fatalf("refunds of %s: %s", piID, list.Raw)
	}
	if all := get(t, s, "/v1/refunds?limit=1&starting_after="+rest.Str("id")); !slices.Equal(testutil.IDs(all.Data()), []string{r1.Str("id")}) || all.Get("has_more") != false {
		t.Fatalf("refund page: %s", all.Raw)
	}
	got := get(t, s, "/v1/refunds/"+r1.Str("id")+"?expand[]=payment_intent")
	if got.Str("payment_intent", "id") != piID {
		t.Fatalf("retrieve refund: %s", got.Raw)
	}
	wantError(t, get(t, s, "/v1/refunds/re_nope"), http.StatusNotFound, "invalid_request_error", "resource_missing")
	refunds := fakes.Filter(s.Journal(), fakes.KindRefund, "")
	if len(refunds) != 3 || refunds[0].Key != "rf-1" || refunds[0].Params["amount"] != "300" || refunds[0].Params["payment_intent"] != piID || refunds[0].Params["metadata.oncely_key"] != "act-9" {
		t.Fatalf("refund effects: %+v", refunds)
	}
}

func TestCharges(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	ch := post(t, s, "/v1/charges", "c-1", url.Values{"amount": {"2500"}, "currency": {"gbp"}, "source": {"tok_visa"}, "metadata[order]": {"o-1"}})
	wantStatus(t, ch, http.StatusOK)
	if !strings.HasPrefix(ch.Str("id"), "ch_") || ch.Str("object") != "charge" || ch.Str("status") != "succeeded" || ch.Get("paid") != true || ch.Get("payment_intent") != nil {
		t.Fatalf("charge: %s", ch.Raw)
	}
	if got := get(t, s, "/v1/charges/"+ch.Str("id")); got.Raw != ch.Raw {
		t.Fatalf("retrieve = %s", got.Raw)
	}
	dec := post(t, s, "/v1/charges", "", url.Values{"amount": {"2500"}, "currency": {"gbp"}, "source": {"tok_chargeDeclinedInsufficientFunds"}})
	wantError(t, dec, http.StatusPaymentRequired, "card_error", "card_declined")
	if dec.Str("error", "decline_code") != "insufficient_funds" {
		t.Fatalf("decline: %s", dec.Raw)
	}
	if failed := get(t, s, "/v1/charges/"+dec.Str("error", "charge")); failed.Str("status") != "failed" || failed.Str("failure_code") != "card_declined" {
		t.Fatalf("failed charge: %s", failed.Raw)
	}
	wantError(t, post(t, s, "/v1/charges", "", url.Values{"amount": {"100"}, "currency": {"usd"}, "source": {"card_123"}}), http.StatusNotFound, "invalid_request_error", "resource_missing")
	wantError(t, get(t, s, "/v1/charges/ch_nope"), http.StatusNotFound, "invalid_request_error", "resource_missing")
	if e := s.Journal(); len(e) != 1 || e[0].Kind != fakes.KindCharge || e[0].Key != "c-1" || e[0].Params["metadata.order"] != "o-1" {
		t.Fatalf("journal = %+v", e)
	}
}

func TestResetAndDeterministicIDs(t *testing.T) {
	t.Parallel()
	run := func(s *stripefake.Server) []string {
		var out []string
		for _, amount := range []string{"100", "200"} {
			out = append(out, post(t, s, "/v1/payment_intents", "k"+amount, piForm(amount)).Str("id"))
		}
		return out
	}
	s1 := start(t, &stripefake.Config{Seed: 99})
	s2 := start(t, &stripefake.Config{Seed: 99})
	s3 := start(t, &stripefake.Config{Seed: 100})
	first := run(s1)
	if !slices.Equal(first, run(s2)) {
		t.Fatal("same seed, same requests, different ids")
	}
	if slices.Equal(first, run(s3)) {
		t.Fatal("different seeds gave the same ids")
	}
	s1.Faults.Add(fault.Rule{Action: fault.FailBeforeCommit})
	s1.Reset()
	if len(s1.Journal()) != 0 {
		t.Fatal("Reset kept the journal")
	}
	// Ids restart from the seed, and the keys are forgotten: the same keyed
	// requests execute again (replays would not reach the journal).
	if again := run(s1); !slices.Equal(again, first) {
		t.Fatalf("after Reset: %v, want %v", again, first)
	}
	if n := len(s1.Journal()); n != 2 {
		t.Fatalf("after Reset the requests committed %d effects, want 2", n)
	}
	if n := len(get(t, s1, "/v1/payment_intents").Data()); n != 2 {
		t.Fatalf("after Reset the list holds %d objects, want 2", n)
	}
}
