package mcpgateway_test

import (
	"encoding/json"
	"os"
	"testing"
)

// What the upstream sends the client reaches the TypeScript client (which
// speaks 2025-11-25, an older protocol than the gateway's first session
// with the upstream) as it reaches it directly, compared field by field:
// the upstream's sampling request during a call (the client's model
// answers "forty-two"), its list-changed notifications for tools,
// prompts and resources, and the tools, prompts and resources listed
// after the change; over stdio and over streamable HTTP.
func TestRelayTypeScript(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	changed := []string{"notifications/prompts/list_changed", "notifications/resources/list_changed", "notifications/tools/list_changed"}
	plan := func(env map[string]string) map[string]any {
		return map[string]any{"env": env, "steps": []any{
			tsCall("ask", map[string]any{"question": "six times seven?"}, nil),
			tsCall("evolve", map[string]any{}, nil),
			map[string]any{"notifications": changed},
			map[string]any{"list": "tools"},
			map[string]any{"list": "prompts"},
			map[string]any{"list": "resources"},
		}}
	}
	direct := runTS(t, plan(map[string]string{envUpstream: t.TempDir()}), self)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, map[string]any{"transfer": map[string]any{"identity": []any{map[string]any{"path": "account"}}}}, nil)
			var via []json.RawMessage
			if transport == "stdio" {
				via = runTS(t, plan(nil), append([]string{oncelyBinary(t)}, s.args("--run-id", "relay")...)...)
			} else {
				via = runTS(t, plan(nil), "--url", s.http(t, nil, "--run-id", "relay"))
			}
			if len(direct) != 6 || len(via) != 6 {
				t.Fatalf("direct %s\nthrough the gateway %s", direct, via)
			}
			if res := decodeTS(t, via[:1]); res[0].text() != "the model said: forty-two\n" {
				t.Fatalf("ask through the gateway: %s", via[0])
			}
			for i, what := range []string{"ask", "evolve", "notifications", "tools/list", "prompts/list", "resources/list"} {
				sameJSON(t, what, direct[i], via[i])
			}
		})
	}
}
