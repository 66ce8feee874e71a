package keyheaderfake_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/oncely/oncely/fakes/keyheaderfake"
)

// The fake as an http.Handler, mounted where a test wants it (here under
// /orders-api/ of a server of the test's own); NewServer serves it on
// 127.0.0.1 instead.
func ExampleNewHandler() {
	h := keyheaderfake.NewHandler(nil)
	mux := http.NewServeMux()
	mux.Handle("/orders-api/", http.StripPrefix("/orders-api", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/orders-api/v1/orders", strings.NewReader(`{"sku":"BOOK","quantity":1}`))
		req.Header.Set("Idempotency-Key", `"order-7"`)
		resp, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("orders:", len(h.Journal()))
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// orders: 1
}
