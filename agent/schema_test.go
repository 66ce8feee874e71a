package agent_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/oncely/oncely/agent"
	"github.com/oncely/oncely/client"
)

func TestRequireIdentity(t *testing.T) {
	t.Parallel()
	props := map[string]any{
		"ticketId": map[string]any{"type": "string"},
		"order": map[string]any{"type": "object", "properties": map[string]any{
			"id": map[string]any{"type": "integer"}, "note": map[string]any{"type": "string"},
		}},
		"text": map[string]any{"type": "string"},
	}
	got, req, err := agent.RequireIdentity(props, []string{"text"},
		[]client.Field{{Path: "ticketId"}, {Path: "order.id"}, {Path: "ticketId"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"text", "ticketId", "order"}; !reflect.DeepEqual(req, want) {
		t.Errorf("required %v, want %v", req, want)
	}
	order := got["order"].(map[string]any)
	if r := order["required"]; !reflect.DeepEqual(r, []string{"id"}) {
		t.Errorf("order requires %v, want [id]", r)
	}
	if _, changed := props["order"].(map[string]any)["required"]; changed {
		t.Error("the caller's properties were changed")
	}
	for _, path := range []string{"missing", "text.inner"} {
		if _, _, err := agent.RequireIdentity(props, nil, []client.Field{{Path: path}}); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want one naming the field", path, err)
		}
	}
}
