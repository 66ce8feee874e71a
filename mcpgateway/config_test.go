package mcpgateway

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	c, err := ParseConfig([]byte(`{
		"upstream": {"command": ["node", "server.js"], "env": {"A": "1"}},
		"ledger": "sqlite:///var/lib/oncely/ledger.db",
		"run": {"id": "desk", "meta": "example.com/run"},
		"callTimeout": "90s",
		"tools": {"t": {"identity": [{"path": "a.0.b", "norm": "integer"}], "validated": [{"path": "c"}],
			"scope": "global", "key": {"argument": "idempotencyKey"}, "replay": true, "errorResult": "definite"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(c.CallTimeout) != 90*time.Second || c.Run.ID != "desk" || c.Tools["t"].Key.Argument != "idempotencyKey" {
		t.Errorf("parsed: %+v", c)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseConfig(b)
	if err != nil || !reflect.DeepEqual(again, c) {
		t.Errorf("round trip: %v\n%+v\n%+v", err, again, c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	const tool = `"tools": {"t": {"identity": [{"path": "id"}]}}`
	for _, tc := range []struct{ name, doc, want string }{
		{"unknown field", `{"upstream": {"url": "http://x"}, "tols": {}}`, "unknown field"},
		{"no upstream", `{` + tool + `}`, "a command or a url is required"},
		{"both", `{"upstream": {"url": "http://x", "command": ["a"]}}`, "not both"},
		{"not http", `{"upstream": {"url": "ftp://x"}}`, "not http"},
		{"no identity", `{"upstream": {"url": "http://x"}, "tools": {"t": {}}}`, "no identity fields"},
		{"bad norm", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id", "norm": "upper"}]}}}`, "unknown norm"},
		{"bad path", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "a..b"}]}}}`, "is not a path"},
		{"bad bracket", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "a[x].b"}]}}}`, "is not an index or [*]"},
		{"unbalanced", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "a[*.b"}]}}}`, "unbalanced"},
		{"twice", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "a.0"}, {"path": "a[0]"}]}}}`, "named twice"},
		{"bad definite", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id"}], "definite": [{}]}}}`, "set text or code"},
		{"bad definite text", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id"}], "definite": [{"text": "("}]}}}`, "definite[0]"},
		{"bad unkept", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id"}], "unkept": "x"}}}`, "unkept"},
		{"bad missing tools", `{"upstream": {"url": "http://x"}, "missingTools": "ignore"}`, "missingTools"},
		{"deep limit", `{"upstream": {"url": "http://x"}, "limits": {"maxDepth": 5000}}`, "maxDepth"},
		{"bad scope", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id"}], "scope": "world"}}}`, "scope"},
		{"bad error class", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id"}], "errorResult": "maybe"}}}`, "errorResult"},
		{"two keys", `{"upstream": {"url": "http://x"}, "tools": {"t": {"identity": [{"path": "id"}], "key": {"argument": "k", "meta": "k"}}}}`, "not both"},
		{"bad meta", `{"upstream": {"url": "http://x"}, "run": {"meta": "a b"}}`, "not a _meta key"},
		{"bad duration", `{"upstream": {"url": "http://x"}, "callTimeout": 5}`, "duration"},
		{"trailing", `{"upstream": {"url": "http://x"}} {}`, "after the configuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(tc.doc))
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig mentioning %q", err, tc.want)
			}
		})
	}
}

func TestProject(t *testing.T) {
	t.Parallel()
	args := map[string]any{
		"observations": []any{map[string]any{"entityName": "alice", "contents": []any{"x"}}},
		"order":        map[string]any{"id": json.Number("7")},
		"note":         "free text",
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  string
	}{
		{"array index", []string{"observations.0.entityName"}, `{"observations":{"0":{"entityName":"alice"}}}`},
		{"object path", []string{"order.id"}, `{"order":{"id":7}}`},
		{"two paths share a parent", []string{"order.id", "observations.0.entityName"}, `{"observations":{"0":{"entityName":"alice"}},"order":{"id":7}}`},
		{"missing stays missing", []string{"observations.1.entityName", "order.sku"}, `{}`},
		{"no leading zeros", []string{"observations.00.entityName"}, `{}`},
		{"brackets index an array", []string{"observations[0].entityName"}, `{"observations":{"0":{"entityName":"alice"}}}`},
		{"every element", []string{"observations[*].contents"}, `{"observations[*]":{"contents":"[[\"x\"]]"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(projected(t, args, tc.paths...))
			if err != nil || string(b) != tc.want {
				t.Fatalf("project = %s (%v), want %s", b, err, tc.want)
			}
		})
	}
}

// projected is the gateway's projection of args for identity paths.
func projected(t *testing.T, args map[string]any, paths ...string) map[string]any {
	t.Helper()
	g := &Gateway{log: slog.New(slog.DiscardHandler)}
	tool := &guarded{name: "t"}
	for _, p := range paths {
		fp, err := parsePath(p)
		if err != nil {
			t.Fatal(err)
		}
		tool.fields = append(tool.fields, field{path: fp, identity: true})
	}
	out, refused := g.project(tool, args)
	if refused != nil {
		t.Fatalf("refused: %v", refused.Content[0].(*mcp.TextContent).Text)
	}
	return out
}

func TestLoadConfigYAML(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yml := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(yml, []byte(`
upstream:
  command: [node, server.js]
callTimeout: 2m
tools:
  add_observations:
    identity:
      - {path: observations.0.entityName, norm: trimmed}
    replay: true
`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(yml)
	if err != nil {
		t.Fatal(err)
	}
	if tc := c.Tools["add_observations"]; !tc.Replay || tc.Identity[0].Norm != "trimmed" || time.Duration(c.CallTimeout) != 2*time.Minute {
		t.Errorf("parsed: %+v", c)
	}
	bad := filepath.Join(dir, "bad.yml")
	if err := os.WriteFile(bad, []byte("upstream: {url: 'http://x'}\ntols: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(bad); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("misspelt field: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.json")); !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}
