package mcpgateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/mcpgateway"
	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

// memoryConfig fronts server-memory (its graph in file) and makes
// add_observations exactly-once per entity and observation: the identity
// names the action (what is observed of whom), so that another
// observation of the same entity is another action.
func memoryConfig(t *testing.T, file string) *mcpgateway.Config {
	t.Helper()
	cmd, env := mcptest.Memory(t, file)
	return &mcpgateway.Config{
		Upstream: mcpgateway.Upstream{Command: cmd, Env: env},
		Tools: map[string]mcpgateway.ToolConfig{
			"add_observations": {
				Identity: []mcpgateway.FieldConfig{
					{Path: "observations[*].entityName", Norm: "trimmed"},
					{Path: "observations[*].contents", Norm: "trimmed"},
				},
				Replay: true,
			},
		},
	}
}

func openLedger(t *testing.T, path string) ledger.Store {
	t.Helper()
	s, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startGateway builds a gateway and serves it over streamable HTTP on
// loopback; both end with the test.
func startGateway(t *testing.T, store ledger.Store, cfg *mcpgateway.Config) (*mcpgateway.Gateway, string) {
	t.Helper()
	gw, err := mcpgateway.New(context.Background(), store, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler(nil))
	t.Cleanup(func() { srv.Close(); _ = gw.Close() })
	return gw, srv.URL
}

// connect opens a go-sdk client session to an HTTP endpoint.
func connect(t *testing.T, url string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "oncely-test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func observe(entity, text string) map[string]any {
	return map[string]any{"observations": []any{map[string]any{"entityName": entity, "contents": []any{text}}}}
}

func entity(name string) map[string]any {
	return map[string]any{"entities": []any{map[string]any{"name": name, "entityType": "customer", "observations": []any{}}}}
}

// observations reads the entity's observations from server-memory's file.
func observations(t *testing.T, file, name string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Type, Name   string
			Observations []string
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Type == "entity" && e.Name == name {
			return e.Observations
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no entity %s in %s", name, file)
	return nil
}

func outcome(res *mcp.CallToolResult) string {
	s, _ := res.Meta[mcpgateway.OutcomeMeta].(string)
	return s
}

func texts(res *mcp.CallToolResult) []string {
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

func lastText(res *mcp.CallToolResult) string {
	ts := texts(res)
	if len(ts) == 0 {
		return ""
	}
	return ts[len(ts)-1]
}

// tempFile names a file in a fresh temporary directory.
func tempFile(t *testing.T, name string) string { return filepath.Join(t.TempDir(), name) }

func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }
