package stripefake_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/stripefake"
)

// The fake Stripe as an http.Handler, served by a test's own server, with
// a fault rule: the first refund request commits and its connection
// drops, as after a timeout. The journal shows the refund that the client
// never heard of.
func ExampleNewHandler() {
	h := stripefake.NewHandler(&stripefake.Config{Seed: 1})
	srv := httptest.NewServer(h)
	defer srv.Close()
	h.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.CommitThenDrop})

	post := func(path string, form url.Values, key string) error {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer sk_test_example")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	if err := post("/v1/payment_intents", url.Values{
		"amount": {"2500"}, "currency": {"eur"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"},
		"automatic_payment_methods[enabled]": {"true"}, "automatic_payment_methods[allow_redirects]": {"never"},
	}, "order-7-payment"); err != nil {
		panic(err)
	}
	pi := h.Journal()[0].ID
	err := post("/v1/refunds", url.Values{"payment_intent": {pi}, "amount": {"1000"}}, "order-7-refund")
	fmt.Println("refund answered:", err == nil)
	for _, e := range h.Journal() {
		fmt.Println(e.Seq, e.Kind, e.Key)
	}
	// Output:
	// refund answered: false
	// 1 payment_intent order-7-payment
	// 2 refund order-7-refund
}
