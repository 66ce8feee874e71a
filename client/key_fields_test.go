package client_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// TestArrayIndexPaths: a field's path reaches into arrays by index, as
// the MCP gateway's paths do; an array and an object keyed by the same
// indexes (the gateway's projection of it) give the same key.
func TestArrayIndexPaths(t *testing.T) {
	t.Parallel()
	tool := client.Tool{Name: "add_observations", Identity: []client.Field{{Path: "observations.0.entityName", Norm: client.Trimmed},
		{Path: "order.lines.1.sku", Norm: client.String}}}
	key := func(input string) (string, error) {
		return tool.Key("run-1", client.Call{Tool: tool.Name, Input: json.RawMessage(input)}, 0)
	}
	want, err := key(`{"observations": [{"entityName": " alice "}], "order": {"lines": [{"sku": "a"}, {"sku": 7}]}}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"observations": [{"entityName": "alice", "contents": ["x"]}, {"entityName": "bob"}], "order": {"lines": [{}, {"sku": "7"}]}}`,
		`{"observations": {"0": {"entityName": "alice"}}, "order": {"lines": {"1": {"sku": 7}}}}`,
	} {
		if got, err := key(in); err != nil || got != want {
			t.Errorf("key(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []string{
		`{"observations": [], "order": {"lines": [{}, {"sku": 7}]}}`,                              // no element 0
		`{"observations": {"00": {"entityName": "alice"}}, "order": {"lines": [{}, {"sku": 7}]}}`, // not index 0
		`{"observations": "alice", "order": {"lines": [{}, {"sku": 7}]}}`,                         // not a container
	} {
		if _, err := key(in); err == nil {
			t.Errorf("key(%s): no error for a missing field", in)
		}
	}

	// The tool binds the normalized values at the same paths.
	exec := client.New(ledgermem.New(nil), nil)
	var bound struct {
		Observations []struct {
			EntityName string `json:"entityName"`
		} `json:"observations"`
		Order struct {
			Lines []struct {
				SKU string `json:"sku"`
			} `json:"lines"`
		} `json:"order"`
	}
	tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		return client.Effect{Summary: "added"}, inv.Bind(&bound)
	}
	if err := exec.Register(tool); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: tool.Name, ID: "toolu_1",
		Input: json.RawMessage(`{"observations": [{"entityName": " alice "}], "order": {"lines": [{}, {"sku": 7}]}}`)})
	if err != nil || res.Outcome != client.Executed || res.Key != want {
		t.Fatalf("Execute: %+v, %v", res, err)
	}
	if bound.Observations[0].EntityName != "alice" || bound.Order.Lines[1].SKU != "7" {
		t.Errorf("bound %+v, want the normalized values", bound)
	}
}
