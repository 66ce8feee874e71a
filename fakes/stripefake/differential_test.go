package stripefake_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/fakes/stripefake/stripemocktest"
)

func TestMain(m *testing.M) { os.Exit(stripemocktest.Main(m)) }

// diffCase is one request sent to the fake and to stripe-mock. Its path
// and params may name objects the fake needs ({pi}, ...): the fake gets
// fresh ones in the state the route needs, stripe-mock (stateless) any
// well-formed id.
type diffCase struct {
	method, path, params string
	// auth replaces the Bearer test key ("-": no Authorization).
	auth string
	// version is sent as Stripe-Version.
	version string
}

func (c diffCase) String() string {
	s := c.method + " " + c.path
	if c.params != "" {
		s += " " + c.params
	}
	if c.auth != "" {
		s += " auth=" + c.auth
	}
	if c.version != "" {
		s += " version=" + c.version
	}
	return s
}

// mockIDs are the ids stripe-mock gets for the placeholders.
var mockIDs = map[string]string{
	"{pi}": "pi_3MtwBwLkdIwHu7ix28a3tqPa", "{pi_confirm}": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
	"{pi_capture}": "pi_3MtwBwLkdIwHu7ix28a3tqPa", "{pi_paid}": "pi_3MtwBwLkdIwHu7ix28a3tqPa",
	"{ch}": "ch_3MmlLrLkdIwHu7ix0snN0B15", "{re}": "re_1Nispe2eZvKYlo2Cd31jOCgZ",
}

const (
	piBase   = "amount=2000&currency=usd"
	longText = "0123456789012345678901234567890123456789012345678901234567890"
)

// diffTable holds the requests on which the fake and stripe-mock must
// agree: both accept, or both refuse with the same error type and, where
// stripe-mock names the parameter, the same param.
var diffTable = []diffCase{
	// Create a PaymentIntent: valid.
	{method: "POST", path: "/v1/payment_intents", params: piBase},
	{method: "POST", path: "/v1/payment_intents", params: "amount=500&currency=jpy"},
	{method: "POST", path: "/v1/payment_intents", params: "amount=2000&currency=EUR"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&payment_method_types[]=card"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&payment_method_types[0]=card&payment_method_types[1]=link"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[enabled]=true"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=never"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&payment_method=pm_card_visa&payment_method_types[]=card"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&payment_method=pm_card_visa&return_url=https%3A%2F%2Fexample.com%2Fdone"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&payment_method=pm_card_visa&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=never"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=false"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&capture_method=manual"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&capture_method=automatic_async"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&capture_method=automatic"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&statement_descriptor_suffix=ORDER+7"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&setup_future_usage=off_session"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&setup_future_usage=on_session"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&off_session=true&payment_method=pm_card_visa&payment_method_types[]=card"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&off_session=one_off&payment_method=pm_card_visa&payment_method_types[]=card"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&description=order+7&receipt_email=jenny%40example.com&metadata[order]=7&metadata[oncely_key]=k1"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&payment_method=pm_card_visa"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[]=customer"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[]=payment_method&payment_method=pm_card_visa"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[]=latest_charge"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[]=latest_charge.balance_transaction&confirm=true&payment_method=pm_card_visa&payment_method_types[]=card"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[0]=customer&expand[1]=latest_charge"},
	// Create a PaymentIntent: refused by both.
	{method: "POST", path: "/v1/payment_intents", params: "currency=usd"},
	{method: "POST", path: "/v1/payment_intents", params: "amount=2000"},
	{method: "POST", path: "/v1/payment_intents", params: "amount=ten&currency=usd"},
	{method: "POST", path: "/v1/payment_intents", params: "amount=20.5&currency=usd"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&colour=red"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&metadata[a][b]=c"},
	{method: "POST", path: "/v1/payment_intents", params: "amount[x]=100&currency=usd"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&capture_method=later"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&setup_future_usage=sometimes"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=yes"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[enabled]=maybe"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[allow_redirects]=never"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[enabled]=true&automatic_payment_methods[allow_redirects]=sometimes"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&amount_to_capture=100"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&cancellation_reason=duplicate"},
	{method: "POST", path: "/v1/payment_intents", params: piBase + "&instructions_email=a%40example.com"},

	// Update a PaymentIntent.
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "description=order+8"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "amount=1500&currency=eur"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "metadata[k]=v&metadata[gone]="},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "capture_method=manual&setup_future_usage=on_session&statement_descriptor_suffix=X"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "payment_method=pm_card_visa&payment_method_types[]=card&receipt_email=a%40example.com"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "expand[]=latest_charge&expand[]=customer"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "colour=red"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "amount=abc"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "confirm=true"},
	{method: "POST", path: "/v1/payment_intents/{pi}", params: "capture_method=later"},

	// Confirm.
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "return_url=https%3A%2F%2Fexample.com%2Fdone"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "payment_method=pm_card_visa&receipt_email=a%40example.com"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "off_session=true&setup_future_usage=off_session"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "capture_method=manual"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "expand[]=latest_charge.balance_transaction&expand[]=payment_method"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "colour=red"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "capture_method=later"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "amount=100"},
	{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "metadata[a]=b"},

	// Cancel.
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel"},
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel", params: "cancellation_reason=duplicate"},
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel", params: "cancellation_reason=abandoned&expand[]=latest_charge"},
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel", params: "cancellation_reason=requested_by_customer"},
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel", params: "cancellation_reason=fraudulent"},
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel", params: "cancellation_reason=bored"},
	{method: "POST", path: "/v1/payment_intents/{pi}/cancel", params: "colour=red"},

	// Capture.
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture"},
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture", params: "amount_to_capture=1000"},
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture", params: "metadata[a]=b&statement_descriptor_suffix=X"},
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture", params: "expand[]=latest_charge.balance_transaction"},
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture", params: "amount_to_capture=abc"},
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture", params: "amount=100"},
	{method: "POST", path: "/v1/payment_intents/{pi_capture}/capture", params: "colour=red"},

	// Retrieve a PaymentIntent.
	{method: "GET", path: "/v1/payment_intents/{pi}"},
	{method: "GET", path: "/v1/payment_intents/{pi_paid}", params: "expand[]=latest_charge"},
	{method: "GET", path: "/v1/payment_intents/{pi}", params: "expand[]=customer&expand[]=payment_method"},
	{method: "GET", path: "/v1/payment_intents/{pi_paid}", params: "expand[]=latest_charge.balance_transaction"},
	{method: "GET", path: "/v1/payment_intents/{pi}", params: "client_secret=pi_secret_x"},
	{method: "GET", path: "/v1/payment_intents/{pi}", params: "colour=red"},

	// List PaymentIntents.
	{method: "GET", path: "/v1/payment_intents"},
	{method: "GET", path: "/v1/payment_intents", params: "limit=3"},
	{method: "GET", path: "/v1/payment_intents", params: "created[gte]=1&created[lt]=4102444800"},
	{method: "GET", path: "/v1/payment_intents", params: "created=1700000000"},
	{method: "GET", path: "/v1/payment_intents", params: "customer=cus_1"},
	{method: "GET", path: "/v1/payment_intents", params: "starting_after={pi}"},
	{method: "GET", path: "/v1/payment_intents", params: "ending_before={pi}"},
	{method: "GET", path: "/v1/payment_intents", params: "expand[]=data.latest_charge"},
	{method: "GET", path: "/v1/payment_intents", params: "limit=abc"},
	{method: "GET", path: "/v1/payment_intents", params: "colour=red"},

	// Search PaymentIntents.
	{method: "GET", path: "/v1/payment_intents/search", params: "query=status%3A%27succeeded%27"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=metadata%5B%27oncely_key%27%5D%3A%27k1%27&limit=100"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=amount%3E1000+AND+currency%3A%27usd%27"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=amount%3E1000+currency%3A%27usd%27"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=status%3A%27succeeded%27+or+status%3A%27canceled%27"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=-status%3A%27canceled%27&page=page_1"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=metadata%5B%27k%27%5D%3Anull&expand[]=data.latest_charge"},
	{method: "GET", path: "/v1/payment_intents/search"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=status%3A%27succeeded%27&limit=abc"},
	{method: "GET", path: "/v1/payment_intents/search", params: "query=status%3A%27succeeded%27&colour=red"},

	// Refunds.
	{method: "POST", path: "/v1/refunds", params: "payment_intent={pi_paid}"},
	{method: "POST", path: "/v1/refunds", params: "charge={ch}"},
	{method: "POST", path: "/v1/refunds", params: "payment_intent={pi_paid}&amount=100&reason=duplicate"},
	{method: "POST", path: "/v1/refunds", params: "charge={ch}&reason=requested_by_customer&metadata[a]=b&instructions_email=a%40example.com"},
	{method: "POST", path: "/v1/refunds", params: "charge={ch}&expand[]=balance_transaction&expand[]=charge"},
	{method: "POST", path: "/v1/refunds", params: "payment_intent={pi_paid}&expand[]=payment_intent"},
	{method: "POST", path: "/v1/refunds", params: "charge={ch}&reason=bored"},
	{method: "POST", path: "/v1/refunds", params: "charge={ch}&amount=abc"},
	{method: "POST", path: "/v1/refunds", params: "charge={ch}&colour=red"},
	{method: "GET", path: "/v1/refunds/{re}"},
	{method: "GET", path: "/v1/refunds/{re}", params: "expand[]=charge&expand[]=balance_transaction"},
	{method: "GET", path: "/v1/refunds/{re}", params: "colour=red"},
	{method: "GET", path: "/v1/refunds"},
	{method: "GET", path: "/v1/refunds", params: "limit=2&payment_intent={pi_paid}"},
	{method: "GET", path: "/v1/refunds", params: "charge={ch}&created[lt]=4102444800"},
	{method: "GET", path: "/v1/refunds", params: "expand[]=data.charge"},
	{method: "GET", path: "/v1/refunds", params: "limit=abc"},
	{method: "GET", path: "/v1/refunds", params: "colour=red"},

	// Charges.
	{method: "POST", path: "/v1/charges", params: piBase + "&source=tok_visa"},
	{method: "POST", path: "/v1/charges", params: piBase + "&source=tok_visa&description=d&receipt_email=a%40example.com&metadata[a]=b"},
	{method: "POST", path: "/v1/charges", params: piBase + "&source=tok_visa&expand[]=balance_transaction"},
	{method: "POST", path: "/v1/charges", params: "amount=abc&currency=usd&source=tok_visa"},
	{method: "POST", path: "/v1/charges", params: piBase + "&source=tok_visa&colour=red"},
	{method: "GET", path: "/v1/charges/{ch}"},
	{method: "GET", path: "/v1/charges/{ch}", params: "expand[]=balance_transaction&expand[]=customer"},
	{method: "GET", path: "/v1/charges/{ch}", params: "colour=red"},
	{method: "GET", path: "/v1/charges"},
	{method: "GET", path: "/v1/charges", params: "limit=5&payment_intent={pi_paid}"},
	{method: "GET", path: "/v1/charges", params: "customer=cus_1&transfer_group=g1&created[gte]=1"},
	{method: "GET", path: "/v1/charges", params: "expand[]=data.payment_intent&expand[]=data.balance_transaction"},
	{method: "GET", path: "/v1/charges", params: "limit=abc"},
	{method: "GET", path: "/v1/charges", params: "colour=red"},

	// Routes neither serves, authentication, versions.
	{method: "GET", path: "/v1/no_such_thing"},
	{method: "POST", path: "/v1/payment_intents/{pi}/refund"},
	{method: "DELETE", path: "/v1/payment_intents/{pi}"},
	{method: "GET", path: "/v1/charges", auth: "-"},
	{method: "GET", path: "/v1/charges", auth: "Bearer pk_test_123"},
	{method: "GET", path: "/v1/charges", auth: "Bearer rk_test_123"},
	{method: "POST", path: "/v1/payment_intents", params: piBase, auth: "Bearer rk_test_123"},
	{method: "GET", path: "/v1/charges", version: "2025-08-27.basil"},
	{method: "GET", path: "/v1/charges", version: "2026-08-26.dahlia"},
}

// stripeOnly holds requests Stripe refuses but stripe-mock accepts: its
// specification does not carry the rule (amount limits, the currency list,
// exclusive parameters, length limits, the search query language, which
// fields expand). The fake refuses each as Stripe documents; stripe-mock
// must still accept it, so that a stripe-mock that learns the rule moves
// the request into diffTable.
var stripeOnly = []struct {
	diffCase
	code, param string // the fake's error
}{
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=1&currency=usd"}, "amount_too_small", "amount"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=49&currency=eur"}, "amount_too_small", "amount"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=29&currency=gbp"}, "amount_too_small", "amount"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=49&currency=jpy"}, "amount_too_small", "amount"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=100000000&currency=usd"}, "amount_too_large", "amount"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=-5&currency=usd"}, "parameter_invalid_integer", "amount"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=2000&currency=xyz"}, "", "currency"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: "amount=2000&currency=dollars"}, "", "currency"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[enabled]=true&payment_method_types[]=card"}, "", "automatic_payment_methods"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&payment_method=pm_card_visa"}, "", "return_url"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&confirm=true&payment_method=pm_card_visa&automatic_payment_methods[enabled]=true"}, "", "return_url"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&off_session=true"}, "", "off_session"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&automatic_payment_methods[colour]=red&automatic_payment_methods[enabled]=true"}, "parameter_unknown", "automatic_payment_methods[colour]"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&statement_descriptor_suffix=" + longText}, "", "statement_descriptor_suffix"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&metadata[k]=" + strings.Repeat(longText, 9)}, "", "metadata[k]"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&metadata[" + longText + "]=v"}, "", "metadata[" + longText + "]"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[]=colour"}, "", "expand"},
	{diffCase{method: "POST", path: "/v1/payment_intents", params: piBase + "&expand[]=latest_charge.colour"}, "", "expand"},
	{diffCase{method: "POST", path: "/v1/payment_intents/{pi_confirm}/confirm", params: "payment_method_types[]=card&return_url=done.html"}, "", "return_url"},
	{diffCase{method: "POST", path: "/v1/charges", params: "currency=usd&source=tok_visa"}, "parameter_missing", "amount"},
	{diffCase{method: "POST", path: "/v1/charges", params: piBase}, "parameter_missing", "source"},
	{diffCase{method: "POST", path: "/v1/charges", params: "amount=10&currency=usd&source=tok_visa"}, "amount_too_small", "amount"},
	{diffCase{method: "POST", path: "/v1/refunds", params: "amount=100"}, "parameter_missing", ""},
	{diffCase{method: "POST", path: "/v1/refunds", params: "charge={ch}&payment_intent={pi_paid}"}, "", "payment_intent"},
	{diffCase{method: "GET", path: "/v1/payment_intents", params: "limit=0"}, "parameter_invalid_integer", "limit"},
	{diffCase{method: "GET", path: "/v1/charges", params: "limit=101"}, "", "limit"},
	{diffCase{method: "GET", path: "/v1/payment_intents/search", params: "query=metadata%5B%27k%27%5D~%27abc%27"}, "", "query"},
	{diffCase{method: "GET", path: "/v1/payment_intents/search", params: "query=status%3Asucceeded"}, "", "query"},
	{diffCase{method: "GET", path: "/v1/payment_intents/search", params: "query=amount%3E1+AND+amount%3C9+OR+amount%3A5"}, "", "query"},
	{diffCase{method: "GET", path: "/v1/payment_intents/search", params: "query=colour%3A%27red%27"}, "", "query"},
	{diffCase{method: "GET", path: "/v1/payment_intents/search", params: "query=status%3A%27a%27&page=garbage"}, "", "page"},
	{diffCase{method: "GET", path: "/v1/charges", version: "1999-01-01"}, "", ""},
}

// answer is what a server said about one request.
type answer struct {
	status         int
	typ, param     string
	message, raw   string
	stripeVersion  string
	requestLogURL  string
	docURL, code   string
	hasErrorObject bool
}

func (a answer) accepted() bool { return a.status >= 200 && a.status < 300 }

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, a.raw) }

func send2(t *testing.T, hc *http.Client, base string, c diffCase, ids map[string]string) answer {
	t.Helper()
	path, params := c.path, c.params
	for ph, id := range ids {
		path, params = strings.ReplaceAll(path, ph, id), strings.ReplaceAll(params, ph, id)
	}
	u := base + path
	var body io.Reader
	if c.method == http.MethodGet || c.method == http.MethodDelete {
		if params != "" {
			u += "?" + params
		}
	} else {
		body = strings.NewReader(params)
	}
	req, err := http.NewRequest(c.method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch c.auth {
	case "":
		req.Header.Set("Authorization", "Bearer "+testKey)
	case "-":
	default:
		req.Header.Set("Authorization", c.auth)
	}
	if c.version != "" {
		req.Header.Set("Stripe-Version", c.version)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", c, err)
	}
	a := answer{status: resp.StatusCode, raw: strings.TrimSpace(string(raw)), stripeVersion: resp.Header.Get("Stripe-Version")}
	var e struct {
		Error *struct {
			Type, Param, Message, Code string
			DocURL                     string `json:"doc_url"`
			RequestLogURL              string `json:"request_log_url"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) == nil && e.Error != nil {
		a.hasErrorObject = true
		a.typ, a.param, a.message, a.code = e.Error.Type, e.Error.Param, e.Error.Message, e.Error.Code
		a.docURL, a.requestLogURL = e.Error.DocURL, e.Error.RequestLogURL
	}
	return a
}

var mockPropertyRE = regexp.MustCompile(`object property (?:for )?'([^']+)'`)

// mockParam is the parameter stripe-mock's validation message names, in
// Stripe's notation (a[b]); its error bodies have no param field.
func mockParam(message string) string {
	var path string
	for i, m := range mockPropertyRE.FindAllStringSubmatch(message, -1) {
		if i == 0 {
			path = m[1]
		} else {
			path += "[" + m[1] + "]"
		}
	}
	return path
}

// fixtures creates, in the fake, the objects the placeholders stand for,
// each in the state its routes need.
func fixtures(t *testing.T, s *stripefake.Server) map[string]string {
	t.Helper()
	create := func(path, form string) reply {
		t.Helper()
		r := call(t, s, request{method: http.MethodPost, path: path, body: form})
		wantStatus(t, r, http.StatusOK)
		return r
	}
	paid := create("/v1/payment_intents", piBase+"&confirm=true&payment_method=pm_card_visa&payment_method_types[]=card")
	capturable := create("/v1/payment_intents", piBase+"&capture_method=manual&confirm=true&payment_method=pm_card_visa&payment_method_types[]=card")
	ch := create("/v1/charges", piBase+"&source=tok_visa")
	return map[string]string{
		"{pi}":         create("/v1/payment_intents", piBase).Str("id"),
		"{pi_confirm}": create("/v1/payment_intents", piBase+"&payment_method=pm_card_visa&payment_method_types[]=card").Str("id"),
		"{pi_capture}": capturable.Str("id"),
		"{pi_paid}":    paid.Str("id"),
		"{ch}":         ch.Str("id"),
		"{re}":         create("/v1/refunds", "charge="+ch.Str("id")+"&amount=100").Str("id"),
	}
}

// TestDifferentialAgainstStripeMock sends every request of diffTable to
// the fake and to stripe-mock, which validates requests against Stripe's
// OpenAPI specification, and requires the same verdict.
func TestDifferentialAgainstStripeMock(t *testing.T) {
	t.Parallel()
	mock := stripemocktest.URL(t)
	s := start(t, nil)
	hc := &http.Client{}
	agreed := 0
	for _, c := range diffTable {
		fake := send2(t, s.Client(), s.URL, c, fixtures(t, s))
		ref := send2(t, hc, mock, c, mockIDs)
		switch {
		case fake.accepted() != ref.accepted():
			t.Errorf("%s:\n  fake:        %s\n  stripe-mock: %s", c, fake, ref)
			continue
		case ref.accepted():
		case fake.status/100 != 4 || ref.status/100 != 4:
			t.Errorf("%s: not a 4xx refusal:\n  fake:        %s\n  stripe-mock: %s", c, fake, ref)
			continue
		case fake.typ != ref.typ:
			t.Errorf("%s: error type %q, stripe-mock %q\n  fake:        %s\n  stripe-mock: %s", c, fake.typ, ref.typ, fake, ref)
			continue
		case mockParam(ref.message) != "" && fake.param != mockParam(ref.message):
			t.Errorf("%s: param %q, stripe-mock names %q\n  fake:        %s\n  stripe-mock: %s", c, fake.param, mockParam(ref.message), fake, ref)
			continue
		}
		agreed++
	}
	t.Logf("differential: %d requests, %d agreed", len(diffTable), agreed)
}

// TestStripeOnlyRules checks the rules stripe-mock does not model: the
// fake refuses as Stripe does, with a complete error body, and
// stripe-mock still accepts.
func TestStripeOnlyRules(t *testing.T) {
	t.Parallel()
	mock := stripemocktest.URL(t)
	s := start(t, nil)
	hc := &http.Client{}
	for _, c := range stripeOnly {
		fake := send2(t, s.Client(), s.URL, c.diffCase, fixtures(t, s))
		if fake.status != http.StatusBadRequest || fake.typ != "invalid_request_error" || fake.code != c.code || fake.param != c.param ||
			fake.message == "" || !strings.HasPrefix(fake.requestLogURL, "https://dashboard.stripe.com/test/logs/req_") || (fake.code != "" && fake.docURL == "") {
			t.Errorf("%s: fake answered %s, want 400 invalid_request_error code %q param %q with its URLs", c.diffCase, fake, c.code, c.param)
		}
		if ref := send2(t, hc, mock, c.diffCase, mockIDs); !ref.accepted() {
			t.Errorf("%s: stripe-mock now refuses it (%s): move it to diffTable", c.diffCase, ref)
		}
	}
	t.Logf("stripe-only rules: %d requests", len(stripeOnly))
}
