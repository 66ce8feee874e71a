package mcpgateway_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/mcpgateway"
)

// A gateway in front of an MCP server whose send_email tool sends an email
// per call. The client calls it twice with a rephrased text: one email.
func Example() {
	ctx := context.Background()
	sent := 0
	upstream := mcp.NewServer(&mcp.Implementation{Name: "mailer", Version: "1"}, nil)
	type email struct {
		Ticket string `json:"ticket"`
		Text   string `json:"text"`
	}
	mcp.AddTool(upstream, &mcp.Tool{Name: "send_email"}, func(ctx context.Context, req *mcp.CallToolRequest, in email) (*mcp.CallToolResult, any, error) {
		sent++ // the idempotency key is in req.Params.Meta["oncely/key"]
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "email sent on ticket " + in.Ticket}}}, nil, nil
	})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstream }, nil))
	defer up.Close()

	cfg, err := mcpgateway.ParseConfig([]byte(`{
		"upstream": {"url": "` + up.URL + `"},
		"run": {"id": "support-desk"},
		"tools": {"send_email": {"identity": [{"path": "ticket", "norm": "trimmed"}], "replay": true}}
	}`))
	if err != nil {
		panic(err)
	}
	gw, err := mcpgateway.New(ctx, ledgermem.New(nil), cfg, nil)
	if err != nil {
		panic(err)
	}
	defer gw.Close()
	srv := httptest.NewServer(gw.Handler(nil)) // or gw.Serve(ctx, gw.Stdio())
	defer srv.Close()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()
	for _, text := range []string{"Your refund is on its way.", "We have refunded you!"} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{"ticket": "T-42", "text": text}})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Meta[mcpgateway.OutcomeMeta])
		for _, c := range res.Content {
			fmt.Println(" ", c.(*mcp.TextContent).Text)
		}
	}
	fmt.Println("emails sent:", sent)
	// Output:
	// executed
	//   email sent on ticket T-42
	// already done
	//   email sent on ticket T-42
	//   Already done earlier in this run: send_email: email sent on ticket T-42. Do not repeat it.
	// emails sent: 1
}

// A configuration for @modelcontextprotocol/server-memory whose
// add_observations is exactly-once per entity and observation: the
// identity names the action (what is observed of whom), so that a second,
// different observation of the same entity is another action, stored,
// while a repeat of the same call is not. server-memory checks a call
// before it writes (an observation of an entity that does not exist is
// refused, nothing written), so its errors are declared definite: the
// same call runs again once the entity exists.
func ExampleParseConfig() {
	cfg, err := mcpgateway.ParseConfig([]byte(`{
  "upstream": {
    "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
    "env": {"MEMORY_FILE_PATH": "/Users/me/.local/share/memory.jsonl"}
  },
  "tools": {
    "add_observations": {
      "identity": [
        {"path": "observations[*].entityName", "norm": "trimmed"},
        {"path": "observations[*].contents", "norm": "trimmed"}
      ],
      "replay": true,
      "errorResult": "definite"
    }
  }
}`))
	if err != nil {
		panic(err)
	}
	for _, f := range cfg.Tools["add_observations"].Identity {
		fmt.Println(f.Path, f.Norm)
	}
	// Output:
	// observations[*].entityName trimmed
	// observations[*].contents trimmed
}
