package mcpgateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/internal/tooling"
)

// The upstream's request for the client's model (sampling) reaches the
// client whatever protocol it speaks: on 2026-07-28 the upstream asks in
// its result (multi-round-trip) and the client, asked the same way, calls
// again with the answer; on 2025-11-25 the upstream, spoken to in the
// client's version, sends the request the gateway relays. Before, the
// gateway's own client took the upstream's request for input, had no
// model to ask, and the call failed ("client does not support
// CreateMessage").
func TestSamplingAcrossProtocols(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "latest"
		}
		t.Run("protocol="+name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, nil, nil)
			cmd := exec.Command(oncelyBinary(t), s.args("--run-id", "sampling")...)
			cmd.Env = env(t)
			stderr := &tooling.Buffer{Max: 1 << 20}
			cmd.Stderr = stderr
			var asked []string
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test-client", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					if tc, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
						asked = append(asked, tc.Text)
					}
					return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "forty-two"}}, nil
				},
			}).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connecting: %v\n%s", err, stderr)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if version != "" && cs.InitializeResult().ProtocolVersion != version {
				t.Fatalf("protocol %s, want %s", cs.InitializeResult().ProtocolVersion, version)
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "six times seven?"}})
			if err != nil {
				t.Fatalf("ask: %v\n%s", err, stderr)
			}
			if res.IsError || allText(res) != "the model said: forty-two" || fmt.Sprint(asked) != "[six times seven?]" {
				t.Fatalf("ask: %q (isError %v), the model was asked %q", allText(res), res.IsError, asked)
			}
		})
	}
}

// Everything the gateway does not guard is as the upstream sent it when
// the client speaks another protocol version than the gateway's first
// session with the upstream (2026-07-28): a raw client on 2025-06-18 and
// on 2025-11-25 lists tools, prompts and resources, gets a prompt and
// reads a resource through oncely mcp and directly, and the results are the
// same, field by field. Before, the gateway passed the upstream's own JSON
// only when both sides spoke the same version, and otherwise re-encoded
// the go-sdk's typed form (adding, for one, the cache fields of 2026-07-28).
func TestTransparencyAcrossProtocols(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	requests := []string{
		`"method":"tools/list","params":{}`,
		`"method":"prompts/list"`,
		`"method":"resources/list","params":{"_meta":{"trace":"x"}}`,
		`"method":"prompts/get","params":{"name":"greet"}`,
		`"method":"resources/read","params":{"uri":"note://one"}`,
	}
	for _, version := range []string{"2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, map[string]any{"transfer": map[string]any{"identity": []any{map[string]any{"path": "account"}}}}, nil)
			up := exec.Command(self)
			up.Env = env(t, envUpstream+"="+t.TempDir())
			direct := rawCommand(t, up)
			via := s.raw(t, nil, "--run-id", "across")
			results := func(c *rawClient) []json.RawMessage {
				c.initialize(version)
				var out []json.RawMessage
				for i, r := range requests {
					c.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,%s}`, i, r))
					for {
						var m struct {
							ID     *int            `json:"id"`
							Result json.RawMessage `json:"result"`
							Error  json.RawMessage `json:"error"`
						}
						l := c.nextRaw()
						if err := json.Unmarshal(l, &m); err != nil {
							t.Fatalf("%q: %v", l, err)
						}
						if m.ID == nil {
							continue // a notification
						}
						if *m.ID != i || m.Result == nil {
							t.Fatalf("answer to %s: %s", r, l)
						}
						out = append(out, m.Result)
						break
					}
				}
				return out
			}
			d, v := results(direct), results(via)
			for i, r := range requests {
				what := strings.SplitN(strings.TrimPrefix(r, `"method":"`), `"`, 2)[0]
				sameJSON(t, what, d[i], v[i])
			}
		})
	}
}

// A configured tool whose upstream asks for the client's model before it
// acts (sampling) works on protocol 2026-07-28 too (the TypeScript SDK
// does not speak it: the go-sdk client does): the client gets the
// upstream's request for input as it came, calls again with the answer,
// and that call runs and is recorded; a repeat is already done. On
// 2025-11-25 the gateway asks the client with a request of its own.
// Before, on 2026-07-28 the call failed, saying the gateway relays input
// requests of a configured tool only before that protocol.
func TestSamplingGuardedAcrossProtocols(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "latest"
		}
		t.Run("protocol="+name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t, map[string]any{"ask": map[string]any{"identity": []any{map[string]any{"path": "question"}}}}, nil)
			cmd := exec.Command(oncelyBinary(t), s.args("--run-id", "sampling-guarded")...)
			cmd.Env = env(t)
			stderr := &tooling.Buffer{Max: 1 << 20}
			cmd.Stderr = stderr
			asked := 0
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test-client", Version: "1"}, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					asked++
					return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "forty-two"}}, nil
				},
			}).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connecting: %v\n%s", err, stderr)
			}
			t.Cleanup(func() { _ = cs.Close() })
			if v := cs.InitializeResult().ProtocolVersion; (version == "" && v != "2026-07-28") || (version != "" && v != version) {
				t.Fatalf("protocol %s", v)
			}
			for i, want := range []string{"executed", "already done"} {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "six times seven?"}})
				if err != nil {
					t.Fatalf("ask: %v\n%s", err, stderr)
				}
				if res.IsError || outcome(res) != want || !strings.Contains(allText(res), "the model said: forty-two") {
					t.Fatalf("call %d: %s %q (isError %v)", i+1, outcome(res), allText(res), res.IsError)
				}
			}
			if asked != 1 {
				t.Fatalf("the model was asked %d times", asked)
			}
		})
	}
}

// A client's capabilities reach the upstream even when the client comes
// while the gateway lists the upstream's tools because the upstream said
// they changed as it started (server-everything registers its sampling
// tools when it is initialized): the gateway lets the listing end, then
// connects to the upstream again telling it. Before, the gateway kept
// the capabilities it had told the upstream, and under load
// server-everything's trigger-sampling-request was missing through it.
func TestClientCapsDuringListing(t *testing.T) {
	t.Parallel()
	s := newSetup(t, nil, nil)
	if err := os.WriteFile(filepath.Join(s.dir, "slow-list"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := s.raw(t, nil, "--run-id", "caps")
	waitFor(t, "the gateway's listing to be held", func() bool { return countPrefix(journal(t, s.dir), "list-blocked") > 0 })
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.next(); m["id"] != "init" || m["result"] == nil {
		t.Fatalf("initialize: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	waitFor(t, "the gateway to take the client's capabilities", func() bool {
		return strings.Contains(c.stderr.String(), "the upstream keeps the client capabilities it was told") ||
			strings.Contains(c.stderr.String(), "once the gateway's listing of its tools ends")
	})
	if err := os.WriteFile(filepath.Join(s.dir, "release-list"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"caps","arguments":{}}}`)
	for {
		m := c.next()
		if m["id"] == nil {
			continue // a notification
		}
		b, _ := json.Marshal(m)
		if !strings.Contains(string(b), `\"sampling\"`) {
			t.Fatalf("the upstream was told %s\n%s", b, c.stderr)
		}
		return
	}
}
