package mcpgateway_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/mcpgateway/internal/mcptest"
)

var gatewayBin struct {
	once sync.Once
	path string
	err  error
	out  []byte
	dir  string
}

// buildGateway builds the gateway's own process (internal/gatewaymain)
// once per test binary.
func buildGateway(t *testing.T) string {
	t.Helper()
	gatewayBin.once.Do(func() {
		gatewayBin.dir, gatewayBin.err = os.MkdirTemp("", "idemkit-gateway-")
		if gatewayBin.err != nil {
			return
		}
		gatewayBin.path = filepath.Join(gatewayBin.dir, "gateway")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", gatewayBin.path, "./internal/gatewaymain")
		gatewayBin.out, gatewayBin.err = cmd.CombinedOutput()
	})
	if gatewayBin.err != nil {
		t.Fatalf("building the gateway: %v\n%s", gatewayBin.err, gatewayBin.out)
	}
	return gatewayBin.path
}

// tsResult is what the TypeScript client prints per call.
type tsResult struct {
	Content []struct {
		Type, Text string
	} `json:"content"`
	IsError bool           `json:"isError"`
	Meta    map[string]any `json:"_meta"`
}

// runTS runs tools/mcp/client.mjs, which spawns the gateway over stdio and
// makes the calls in order.
func runTS(t *testing.T, gateway, cfgFile, db string, calls ...map[string]any) []tsResult {
	t.Helper()
	dir, node := mcptest.Dir(t)
	plan, err := json.Marshal(map[string]any{"calls": calls})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "client.mjs"), gateway, "-config", cfgFile, "-ledger", db)
	cmd.Stdin = bytes.NewReader(plan)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
	}
	var results []tsResult
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r tsResult
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("TypeScript client printed %q: %v", line, err)
		}
		results = append(results, r)
	}
	if len(results) != len(calls) {
		t.Fatalf("%d results for %d calls:\n%s", len(results), len(calls), stderr.String())
	}
	return results
}

// A real TypeScript MCP client (@modelcontextprotocol/sdk) spawns the
// gateway over stdio and calls add_observations twice, then a second
// client process (a new gateway process) calls it again: one upstream
// effect, and the repeats replay the first result.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	gateway := buildGateway(t)
	mem, db, cfgFile := tempFile(t, "memory.jsonl"), tempFile(t, "ledger.db"), tempFile(t, "gateway.json")
	b, err := json.Marshal(memoryConfig(t, mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"idemkit/run": "ts-run"}
	add := func(text string) map[string]any {
		return map[string]any{"name": "add_observations", "arguments": observe("carol", text), "_meta": meta}
	}
	res := runTS(t, gateway, cfgFile, db,
		map[string]any{"name": "create_entities", "arguments": entity("carol")},
		add("ordered the wrong size"), add("got the wrong size"))
	first, again := res[1], res[2]
	if first.IsError || first.Meta["idemkit/outcome"] != "executed" {
		t.Fatalf("first call: %+v", first)
	}
	if again.IsError || again.Meta["idemkit/outcome"] != "already done" || again.Content[0].Text != first.Content[0].Text {
		t.Fatalf("repeat: %+v", again)
	}
	if last := again.Content[len(again.Content)-1].Text; !strings.HasPrefix(last, "Already done earlier in this run") {
		t.Errorf("repeat text: %q", last)
	}
	if obs := observations(t, mem, "carol"); len(obs) != 1 {
		t.Fatalf("observations: %q, want one", obs)
	}

	res = runTS(t, gateway, cfgFile, db, add("the size is wrong"))
	if res[0].Meta["idemkit/outcome"] != "already done" {
		t.Fatalf("after the restart: %+v", res[0])
	}
	if obs := observations(t, mem, "carol"); len(obs) != 1 {
		t.Fatalf("observations after the restart: %q, want one", obs)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if gatewayBin.dir != "" {
		_ = os.RemoveAll(gatewayBin.dir)
	}
	os.Exit(code)
}
