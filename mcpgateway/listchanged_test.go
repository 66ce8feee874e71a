package mcpgateway_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/internal/tooling"
)

// The upstream's list-changed notifications (tools, prompts, resources)
// reach the clients, on the current protocol (delivered on the stream a
// client opens with subscriptions/listen) and on the one before it (on
// the session), and the gateway lists the tools again before it tells
// them: a configured tool whose input schema changed is converted to the
// new one (transfer's amount, a decimal the model sends as a string,
// reaches the new version as the number it now asks for). Before, the
// gateway announced no list-changed capability and relayed nothing.
func TestListChangedRelayed(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "latest"
		}
		t.Run("protocol="+name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, map[string]any{
				"transfer": map[string]any{"identity": []any{
					map[string]any{"path": "account", "norm": "integer"}, map[string]any{"path": "amount", "norm": "decimal"}}},
			}, nil)
			var tools, prompts, resources atomic.Int64
			cmd := exec.Command(oncelyBinary(t), s.args("--run-id", "changed")...)
			cmd.Env = env(t)
			stderr := &tooling.Buffer{Max: 1 << 20}
			cmd.Stderr = stderr
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test-client", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { tools.Add(1) },
				PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { prompts.Add(1) },
				ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { resources.Add(1) },
			}).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connecting: %v\n%s", err, stderr)
			}
			t.Cleanup(func() { _ = cs.Close() })
			init := cs.InitializeResult()
			if c := init.Capabilities; c.Tools == nil || !c.Tools.ListChanged || c.Prompts == nil || !c.Prompts.ListChanged || c.Resources == nil || !c.Resources.ListChanged {
				b, _ := json.Marshal(c)
				t.Fatalf("capabilities %s: want the upstream's list-changed notifications", b)
			}
			if version != "" && init.ProtocolVersion != version {
				t.Fatalf("protocol %s, want %s", init.ProtocolVersion, version)
			}
			if res := callOK(t, cs, "evolve", nil); res.IsError {
				t.Fatalf("evolve: %q", allText(res))
			}
			waitFor(t, "the three list-changed notifications", func() bool {
				return tools.Load() > 0 && prompts.Load() > 0 && resources.Load() > 0
			})
			lt, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var desc string
			for _, tl := range lt.Tools {
				if tl.Name == "transfer" {
					desc = tl.Description
				}
			}
			if !strings.Contains(desc, "(v2)") {
				t.Fatalf("transfer after the change: %q", desc)
			}
			res := callOK(t, cs, "transfer", map[string]any{"account": 7, "amount": "10.50"})
			if res.IsError || outcome(res) != "executed" {
				t.Fatalf("transfer to the new version: %s %q", outcome(res), allText(res))
			}
			if j := journal(t, s.dir); countPrefix(j, "transfer-v2 7 10.5") != 1 {
				t.Fatalf("journal: %q", j)
			}
		})
	}
}
