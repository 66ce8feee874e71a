package mcpgateway_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// A real TypeScript MCP client (@modelcontextprotocol/sdk) spawns oncely mcp
// over stdio and calls add_observations twice, then a second client
// process (a new gateway process) calls it again: one upstream effect,
// and the repeats replay the first result.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	mem, db, cfgFile := tempFile(t, "memory.jsonl"), tempFile(t, "ledger.db"), tempFile(t, "gateway.json")
	b, err := json.Marshal(memoryConfig(t, mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	gateway := []string{oncelyBinary(t), "mcp", "--config", cfgFile, "--ledger", "sqlite://" + db}
	meta := map[string]any{"oncely/run": "ts-run"}
	add := tsCall("add_observations", observe("carol", "ordered the wrong size"), meta)
	res := runTSCalls(t, map[string]any{"steps": []any{tsCall("create_entities", entity("carol"), nil), add, add}}, gateway...)
	first, again := res[1], res[2]
	if first.IsError || first.outcome() != "executed" {
		t.Fatalf("first call: %+v", first)
	}
	if again.IsError || again.outcome() != "already done" || again.Content[0].Text != first.Content[0].Text {
		t.Fatalf("repeat: %+v", again)
	}
	if last := again.Content[len(again.Content)-1].Text; !strings.HasPrefix(last, "Already done earlier in this run") {
		t.Errorf("repeat text: %q", last)
	}
	if obs := observations(t, mem, "carol"); len(obs) != 1 {
		t.Fatalf("observations: %q, want one", obs)
	}

	res = runTSCalls(t, map[string]any{"steps": []any{add}}, gateway...)
	if res[0].outcome() != "already done" {
		t.Fatalf("after the restart: %+v", res[0])
	}
	if obs := observations(t, mem, "carol"); len(obs) != 1 {
		t.Fatalf("observations after the restart: %q, want one", obs)
	}
}
