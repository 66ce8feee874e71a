package mcpgateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/client"
)

// TestPathsAgreeWithClient: the gateway derives a key from its projection
// of the arguments; a client.Tool with the same paths derives the same
// key from the arguments themselves, and refuses the same missing ones.
func TestPathsAgreeWithClient(t *testing.T) {
	t.Parallel()
	raw := `{"observations": [{"entityName": "alice", "contents": ["x"]}, {"entityName": "bob"}], "order": {"id": 7}, "note": "free text"}`
	args, err := client.ParseInput([]byte(raw), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{
		{"observations.0.entityName"},
		{"observations.1.entityName", "order.id"},
		{"observations.2.entityName"},  // missing
		{"observations.01.entityName"}, // not an index
	} {
		t.Run(strings.Join(paths, ","), func(t *testing.T) {
			t.Parallel()
			tool := client.Tool{Name: "add_observations"}
			for _, p := range paths {
				tool.Identity = append(tool.Identity, client.Field{Path: p})
			}
			projected, err := json.Marshal(projected(t, args, paths...))
			if err != nil {
				t.Fatal(err)
			}
			viaGateway, gerr := tool.Key("run-1", client.Call{Tool: tool.Name, Input: projected}, 0)
			direct, derr := tool.Key("run-1", client.Call{Tool: tool.Name, Input: json.RawMessage(raw)}, 0)
			if viaGateway != direct || (gerr == nil) != (derr == nil) {
				t.Errorf("gateway key %q (%v), client key %q (%v)", viaGateway, gerr, direct, derr)
			}
		})
	}
}
