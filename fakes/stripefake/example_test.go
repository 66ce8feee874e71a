package stripefake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/oncely/oncely/fakes/stripefake"
)

// A keyed create sent twice commits one PaymentIntent; the second answer is
// the stored first one, marked as a replay.
func Example() {
	s := stripefake.NewServer(&stripefake.Config{Seed: 1})
	defer s.Close()

	form := url.Values{"amount": {"2000"}, "currency": {"usd"}, "metadata[oncely_key]": {"order-42"}}
	var ids []string
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/payment_intents", strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer sk_test_example")
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", "order-42")
		resp, err := s.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		var pi struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&pi)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, pi.Status, "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
		ids = append(ids, pi.ID)
	}
	fmt.Println("same id:", ids[0] == ids[1])
	for _, e := range s.Journal() {
		fmt.Println(e.Seq, e.Kind, e.Key, e.Params["amount"], e.Params["metadata.oncely_key"])
	}
	// Output:
	// 200 requires_payment_method replayed: false
	// 200 requires_payment_method replayed: true
	// same id: true
	// 1 payment_intent order-42 2000 order-42
}
