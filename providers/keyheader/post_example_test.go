package keyheader_test

import (
	"context"
	"fmt"

	"github.com/oncely/oncely/fakes/keyheaderfake"
	"github.com/oncely/oncely/providers/keyheader"
)

// Post sends the downstream key in the Idempotency-Key header (as a
// Structured Field string); the API replays its first answer to a
// repeat, so the same key creates one order. Capabilities declares the
// API's window, inside which reconcile resends instead of looking up.
func ExampleClient_Post() {
	srv := keyheaderfake.NewServer(nil)
	defer srv.Close()
	api := keyheader.New(srv.URL, nil)
	ctx := context.Background()

	for range 2 {
		var order struct{ ID, Status string }
		res, err := api.Post(ctx, "cart-c9", "/v1/orders", map[string]any{"sku": "BOOK-1", "quantity": 1}, &order)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Status, order.Status, "replayed:", res.Header.Get("Idempotent-Replayed") == "true")
	}
	fmt.Println("orders:", len(srv.Journal()))
	fmt.Println("window:", api.Capabilities().DedupWindow)
	// Output:
	// 201 created replayed: false
	// 201 created replayed: true
	// orders: 1
	// window: 24h0m0s
}
