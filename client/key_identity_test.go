package client_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/oncely/oncely/client"
)

func TestCanonicalIdentityIsWhatKeyHashes(t *testing.T) {
	t.Parallel()
	tool := client.Tool{Name: "refund", Identity: []client.Field{{Path: "order.id", Norm: client.Integer}, {Path: "amount", Norm: client.Decimal}}}
	for _, in := range []string{`{"order": {"id": 42}, "amount": 10}`, `{"amount": "10.00", "order": {"id": "42"}, "note": "x"}`} {
		call := client.Call{Tool: "refund", Input: json.RawMessage(in)}
		canon, err := tool.CanonicalIdentity("run-1", call, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := `["run:run-1","refund",[["order.id","42"],["amount","10"]]]`; string(canon) != want {
			t.Errorf("%s: canonical identity %s, want %s", in, canon, want)
		}
		key, err := tool.Key("run-1", call, 0)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(canon); hex.EncodeToString(sum[:]) != key {
			t.Errorf("%s: key %s is not the sha256 of %s", in, key, canon)
		}
	}
	if _, err := tool.CanonicalIdentity("run-1", client.Call{Tool: "refund", Input: json.RawMessage(`{"amount": 1}`)}, 0); err == nil {
		t.Error("a missing identity field gave a canonical identity")
	}
}
