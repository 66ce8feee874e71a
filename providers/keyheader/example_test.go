package keyheader_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/keyheaderfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/keyheader"
	"github.com/oncely/oncely/reconcile"
)

// An order tool on an API that honours the Idempotency-Key header. The
// first answer is lost after the order was made; the adapter resends with
// the same key and the API replays the order instead of making another.
func Example() {
	srv := keyheaderfake.NewServer(&keyheaderfake.Config{Seed: 1})
	defer srv.Close()
	srv.Faults.Add(fault.Rule{Route: "POST /v1/orders", Attempt: 1, Action: fault.CommitThenDrop})
	api := keyheader.New(srv.URL, nil)

	placeOrder := client.Tool{
		Name:     "place_order",
		Identity: []client.Field{{Path: "cart", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				Cart string `json:"cart"`
				SKU  string `json:"sku"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			var order struct{ ID, Status string }
			res, err := api.Post(ctx, inv.DownstreamKey, "/v1/orders", map[string]any{"sku": in.SKU, "quantity": 1}, &order)
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: fmt.Sprintf("order %s after %d attempts", order.Status, res.Attempts), Ref: order.ID}, nil
		},
		Reconciler: reconcile.New(api, nil),
	}
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(placeOrder); err != nil {
		panic(err)
	}
	res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: "place_order", Input: json.RawMessage(`{"cart": "c9", "sku": "BOOK-1"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("orders:", len(srv.Journal()))
	// Output:
	// Done: order created after 2 attempts
	// orders: 1
}
