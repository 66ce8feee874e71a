package keyheaderfake_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/oncely/oncely/fakes/keyheaderfake"
)

// The IETF Idempotency-Key draft in action: a repeat is replayed, the key
// with another payload is refused with 422, and a request without a key
// with 400.
func Example() {
	s := keyheaderfake.NewServer(nil)
	defer s.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/orders", strings.NewReader(body))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"), "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	post(`"order-1"`, `{"sku":"BOOK","quantity":1}`)
	post(`"order-1"`, `{"sku":"BOOK","quantity":1}`)
	post(`"order-1"`, `{"sku":"BOOK","quantity":2}`)
	post("", `{"sku":"BOOK","quantity":1}`)
	fmt.Println("orders:", len(s.Journal()))
	// Output:
	// 201 application/json replayed: false
	// 201 application/json replayed: true
	// 422 application/problem+json replayed: false
	// 400 application/problem+json replayed: false
	// orders: 1
}
