package client_test

import (
	"encoding/json"
	"fmt"

	"github.com/oncely/oncely/client"
)

// The model sent the order id as a number, then as a string: the
// normalized identity, and so the key, is the same.
func ExampleTool_CanonicalIdentity() {
	tool := client.Tool{Name: "refund_order", Identity: []client.Field{{Path: "orderId", Norm: client.Integer}}}
	for _, input := range []string{`{"orderId": 42, "note": "refund it"}`, `{"orderId": "42", "note": "please refund"}`} {
		canon, err := tool.CanonicalIdentity("run-1", client.Call{Tool: "refund_order", Input: json.RawMessage(input)}, 0)
		if err != nil {
			panic(err)
		}
		fmt.Println(string(canon))
	}
	// Output:
	// ["run:run-1","refund_order",[["orderId","42"]]]
	// ["run:run-1","refund_order",[["orderId","42"]]]
}
