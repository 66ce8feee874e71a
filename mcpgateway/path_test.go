package mcpgateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/oncely/oncely/client"
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

// Values over every element stay apart and are not rewritten: ids above
// 2^53 under a normalizer that reads them exactly, and strings with the
// characters encoding/json would escape as HTML. A raw number no float64
// holds exactly is refused, as key derivation refuses it.
func TestEveryValueExact(t *testing.T) {
	t.Parallel()
	p, err := parsePath("items[*].id")
	if err != nil {
		t.Fatal(err)
	}
	every := func(raw, norm string) (string, error) {
		args, err := client.ParseInput([]byte(raw), 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.everyValue(args, norms[norm])
	}
	for _, norm := range []string{"integer", "string"} {
		a, errA := every(`{"items": [{"id": 9007199254740992}]}`, norm)
		b, errB := every(`{"items": [{"id": 9007199254740993}]}`, norm)
		if errA != nil || errB != nil || a == b {
			t.Errorf("%s: ids 2^53 and 2^53+1 give %s (%v) and %s (%v), want two values", norm, a, errA, b, errB)
		}
	}
	if v, err := every(`{"items": [{"id": "<a&b>"}]}`, "string"); err != nil || v != `["<a&b>"]` {
		t.Errorf(`"<a&b>" gives %s (%v), want ["<a&b>"]`, v, err)
	}
	if v, err := every(`{"items": [{"id": 9007199254740993}]}`, ""); err == nil {
		t.Errorf("a raw 2^53+1 gives %s, want it refused", v)
	}
}
