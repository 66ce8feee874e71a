package mcpgateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

// callOK makes a call that must not fail at the protocol level.
func callOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func allText(res *mcp.CallToolResult) string { return strings.Join(texts(res), "\n") }

// Errors before any action are definite failures, shown in the
// upstream's own words, and the model's corrected call runs; an error
// after the tool may have acted stays uncertain, still in the upstream's
// words; the configuration marks more texts definite. Before, every error
// result was "Outcome unknown" with the upstream's text hidden, and the
// corrected call was blocked until an operator resolved the record.
func TestErrorsBeforeAction(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{
		"transfer": map[string]any{"identity": []any{map[string]any{"path": "account", "norm": "integer"}}},
		"act": map[string]any{"identity": []any{map[string]any{"path": "id"}},
			"definite": []any{map[string]any{"text": "^E_QUOTA:"}}},
	}, nil)
	cs := s.stdio(t, nil, nil, "--run-id", "errors")

	// The upstream's input validation (go-sdk: amount is a string).
	bad := callOK(t, cs, "transfer", map[string]any{"account": 7, "amount": 10.5})
	if !bad.IsError || outcome(bad) != "failed" || !strings.Contains(allText(bad), `validating "arguments"`) || !strings.Contains(allText(bad), "You may retry") {
		t.Fatalf("schema error: %s %q", outcome(bad), allText(bad))
	}
	fixed := callOK(t, cs, "transfer", map[string]any{"account": 7, "amount": "10.50"})
	if fixed.IsError || outcome(fixed) != "executed" {
		t.Fatalf("the corrected call: %s %q", outcome(fixed), allText(fixed))
	}

	// A JSON-RPC error -32602 from the tool: definite, with its message.
	rpc := callOK(t, cs, "act", map[string]any{"id": "r", "fail": "rpc"})
	if !rpc.IsError || outcome(rpc) != "failed" || !strings.Contains(allText(rpc), "id r is not open for action") {
		t.Fatalf("JSON-RPC -32602: %s %q", outcome(rpc), allText(rpc))
	}

	// A text the configuration marks definite.
	for range 2 {
		q := callOK(t, cs, "act", map[string]any{"id": "q", "fail": "before"})
		if !q.IsError || outcome(q) != "failed" || !strings.Contains(allText(q), "E_QUOTA: nothing was done for q") {
			t.Fatalf("marked definite: %s %q", outcome(q), allText(q))
		}
	}

	// An error after acting: uncertain, in the upstream's words, and a
	// repeat does not act again.
	amb := callOK(t, cs, "act", map[string]any{"id": "a", "fail": "after"})
	if !amb.IsError || outcome(amb) != "uncertain" || !strings.Contains(allText(amb), "lost the connection to the bank") || !strings.Contains(allText(amb), "Outcome unknown") {
		t.Fatalf("ambiguous: %s %q", outcome(amb), allText(amb))
	}
	again := callOK(t, cs, "act", map[string]any{"id": "a"})
	// The repeat is told the upstream's words too, not a generic cause.
	if outcome(again) != "uncertain" || !strings.Contains(allText(again), "Do not retry") || !strings.Contains(allText(again), "lost the connection to the bank") {
		t.Fatalf("repeat of an uncertain call: %s %q", outcome(again), allText(again))
	}
	if j := journal(t, s.dir); countPrefix(j, "transfer 7 10.50") != 1 || countPrefix(j, "act a") != 1 || countPrefix(j, "act q") != 0 || countPrefix(j, "act r") != 0 {
		t.Fatalf("journal: %q", j)
	}
}

// With server-memory and the TypeScript client: server-memory
// refuses an observation's contents given as a string before acting; the
// corrected call of the same action runs and is stored.
func TestErrorsBeforeActionMemory(t *testing.T) {
	t.Parallel()
	mem := tempFile(t, "memory.jsonl")
	cmd, envs := mcptest.Memory(t, mem)
	s := newSetupFor(t, map[string]any{
		"upstream": map[string]any{"command": cmd, "env": envs},
		"tools": map[string]any{"add_observations": map[string]any{
			"identity": []any{map[string]any{"path": "observations.0.entityName", "norm": "trimmed"}}}},
	})
	bad := map[string]any{"observations": []any{map[string]any{"entityName": "dora", "contents": "likes tea"}}}
	res := runTSCalls(t, map[string]any{"steps": []any{
		tsCall("create_entities", entity("dora"), nil),
		tsCall("add_observations", bad, nil),
		tsCall("add_observations", observe("dora", "likes tea"), nil),
	}}, append([]string{oncelyBinary(t)}, s.args("--run-id", "memory-errors")...)...)
	if r := res[1]; !r.IsError || r.outcome() != "failed" || !strings.Contains(r.text(), "Input validation error") {
		t.Fatalf("server-memory's validation error: %+v", r)
	}
	if r := res[2]; r.IsError || r.outcome() != "executed" {
		t.Fatalf("the corrected call: %+v", r)
	}
	if obs := observations(t, mem, "dora"); len(obs) != 1 || obs[0] != "likes tea" {
		t.Fatalf("observations: %q", obs)
	}
}
