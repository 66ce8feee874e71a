package mcpgateway_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

// memoryExample is the configuration of the guide's server-memory example
// (docs/mcp-gateway.md, ExampleParseConfig), its upstream command
// replaced by the pinned server-memory writing to file.
func memoryExample(t *testing.T, file string) map[string]any {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(memoryExampleJSON(t)), &cfg); err != nil {
		t.Fatal(err)
	}
	cmd, env := mcptest.Memory(t, file)
	cfg["upstream"] = map[string]any{"command": cmd, "env": env}
	return cfg
}

// memoryExampleJSON is the configuration ExampleParseConfig parses, which
// the guide shows.
func memoryExampleJSON(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "func ExampleParseConfig() {\n\tcfg, err := mcpgateway.ParseConfig([]byte(`")
	js, _, ok2 := strings.Cut(rest, "`))")
	if !ok || !ok2 {
		t.Fatal("ExampleParseConfig's configuration not found")
	}
	return js
}

// The guide shows ExampleParseConfig's configuration as it is.
func TestGuideShowsMemoryExample(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../docs/mcp-gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), "```json\n"+memoryExampleJSON(t)+"\n```") {
		t.Fatalf("docs/mcp-gateway.md does not show ExampleParseConfig's configuration:\n%s", memoryExampleJSON(t))
	}
}

// The guide's server-memory example no longer loses an action: an
// observation of an entity that does not exist yet is refused by
// server-memory before it writes ("Entity with name erin not found"),
// which the example declares definite; once the entity is created, the
// same call runs and the observation is stored, as it is when
// server-memory is reached directly. Before, the refusal left the record
// uncertain and every later call was refused, the observation never
// stored.
func TestMemoryExampleKeepsTheAction(t *testing.T) {
	t.Parallel()
	mem := tempFile(t, "memory.jsonl")
	s := newSetupFor(t, memoryExample(t, mem))
	add := tsCall("add_observations", observe("erin", "prefers email"), nil)
	plan := map[string]any{"steps": []any{add, tsCall("create_entities", entity("erin"), nil), add, add}}
	res := runTSCalls(t, plan, append([]string{oncelyBinary(t)}, s.args("--run-id", "memory-example")...)...)
	if r := res[0]; !r.IsError || r.outcome() != "failed" || !strings.Contains(r.text(), "Entity with name erin not found") {
		t.Fatalf("before the entity exists: %+v", r)
	}
	if r := res[2]; r.IsError || r.outcome() != "executed" {
		t.Fatalf("after it was created: %+v", r)
	}
	if r := res[3]; r.outcome() != "already done" {
		t.Fatalf("a repeat: %+v", r)
	}
	// Directly: the same calls store the observation once.
	direct := tempFile(t, "direct.jsonl")
	cmd, env := mcptest.Memory(t, direct)
	runTSCalls(t, map[string]any{"env": env, "steps": []any{add, tsCall("create_entities", entity("erin"), nil), add}}, cmd...)
	if d, v := observations(t, direct, "erin"), observations(t, mem, "erin"); len(v) != 1 || strings.Join(d, "|") != strings.Join(v, "|") {
		t.Fatalf("observations through the gateway %q, directly %q", v, d)
	}
}

// A repeat of an action left uncertain is told the upstream's own words
// that made it uncertain, not a generic reason: with add_observations'
// errors left ambiguous (the default), the refusal of an observation of a
// missing entity is uncertain, and the repeat after the entity was
// created says "Entity with name fay not found", in the same gateway
// process and in a new one. Before, a new process gave a generic reason.
func TestUncertainRepeatTellsUpstreamWords(t *testing.T) {
	t.Parallel()
	mem := tempFile(t, "memory.jsonl")
	cfg := memoryExample(t, mem)
	tc := cfg["tools"].(map[string]any)["add_observations"].(map[string]any)
	delete(tc, "errorResult")
	s := newSetupFor(t, cfg)
	add := tsCall("add_observations", observe("fay", "likes tea"), nil)
	gateway := append([]string{oncelyBinary(t)}, s.args("--run-id", "memory-uncertain")...)
	res := runTSCalls(t, map[string]any{"steps": []any{add, tsCall("create_entities", entity("fay"), nil), add}}, gateway...)
	if r := res[0]; r.outcome() != "uncertain" {
		t.Fatalf("the refused call: %+v", r)
	}
	if r := res[2]; r.outcome() != "uncertain" || !strings.Contains(r.text(), "Entity with name fay not found") {
		t.Fatalf("the repeat: %q", r.text())
	}
	// A new gateway process (a restart) knows it from the ledger.
	res = runTSCalls(t, map[string]any{"steps": []any{add}}, gateway...)
	r := res[0]
	t.Logf("repeat: %q", r.text())
	if r.outcome() != "uncertain" || !strings.Contains(r.text(), "Entity with name fay not found") {
		t.Fatalf("the repeat: %q", r.text())
	}
	if obs := observations(t, mem, "fay"); len(obs) != 0 {
		t.Fatalf("observations: %q", obs)
	}
	_ = os.Remove(mem)
}
