package mcpgateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// envUpstream makes the test binary the purpose-built upstream: a go-sdk
// MCP server on stdio whose tools write each effect as one line to the
// journal in the directory the variable names, which the tests read.
const envUpstream = "ONCELY_TEST_UPSTREAM"

// journalMu orders the upstream's journal lines.
var journalMu sync.Mutex

func record(dir, format string, args ...any) error {
	journalMu.Lock()
	defer journalMu.Unlock()
	f, err := os.OpenFile(filepath.Join(dir, "journal.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, format+"\n", args...)
	return err
}

// journal returns the upstream's effects, one line each.
func journal(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "journal.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// countPrefix counts the journal lines that start with p.
func countPrefix(lines []string, p string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, p) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

// upstreamMain serves the purpose-built upstream over stdio until the
// client leaves.
func upstreamMain(dir string) int {
	// With the file slow-list in dir, the upstream acts as one whose
	// tools change as it starts (server-everything adds tools once it
	// knows its client): after its first tools/list it adds a tool,
	// telling its client the list changed, and every tools/list after the
	// first waits for the file release-list.
	slowList := func() bool { _, err := os.Stat(filepath.Join(dir, "slow-list")); return err == nil }
	s := mcp.NewServer(&mcp.Implementation{Name: "purpose-built", Version: "1"}, nil)
	var lists atomic.Int64
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" || !slowList() {
				return next(ctx, method, req)
			}
			if lists.Add(1) == 1 {
				defer func() {
					go s.AddTool(&mcp.Tool{Name: "late", InputSchema: &jsonschema.Schema{Type: "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return &mcp.CallToolResult{Content: text("late")}, nil
					})
				}()
				return next(ctx, method, req)
			}
			_ = record(dir, "list-blocked")
			for {
				if _, err := os.Stat(filepath.Join(dir, "release-list")); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
			return next(ctx, method, req)
		}
	})
	mcp.AddTool(s, &mcp.Tool{Name: "caps", Description: "the client capabilities this server was told"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			b, _ := json.Marshal(req.Session.InitializeParams().Capabilities)
			return &mcp.CallToolResult{Content: text(string(b))}, nil, nil
		})

	type line struct {
		Ticket int    `json:"ticket"`
		Text   string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "append_line", Description: "append a line for a ticket"},
		func(_ context.Context, _ *mcp.CallToolRequest, a line) (*mcp.CallToolResult, any, error) {
			if err := record(dir, "append_line %d %s", a.Ticket, a.Text); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: text(fmt.Sprintf("line for ticket %d written", a.Ticket))}, nil, nil
		})

	type transfer struct {
		Account int    `json:"account"`
		Amount  string `json:"amount" jsonschema:"a decimal amount, as a string"`
		Memo    string `json:"memo,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "transfer", Description: "transfer an amount to an account"},
		func(_ context.Context, _ *mcp.CallToolRequest, a transfer) (*mcp.CallToolResult, any, error) {
			if err := record(dir, "transfer %d %s", a.Account, a.Amount); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: text(fmt.Sprintf("transferred %s to account %d", a.Amount, a.Account))}, nil, nil
		})

	type refund struct {
		Order string `json:"order"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "refund", Description: "refund an order"},
		func(_ context.Context, _ *mcp.CallToolRequest, a refund) (*mcp.CallToolResult, any, error) {
			if err := record(dir, "refund %s", a.Order); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: text("refunded " + a.Order)}, nil, nil
		})

	// act fails as asked: "after" acts, then answers an error (ambiguous
	// for the gateway); "before" answers an error without acting, with a
	// text the configuration may mark definite; "rpc" answers a JSON-RPC
	// error -32602 without acting.
	type act struct {
		ID   string `json:"id"`
		Fail string `json:"fail,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "act", Description: "act once on an id"},
		func(_ context.Context, _ *mcp.CallToolRequest, a act) (*mcp.CallToolResult, any, error) {
			switch a.Fail {
			case "before":
				return &mcp.CallToolResult{IsError: true, Content: text("E_QUOTA: nothing was done for " + a.ID)}, nil, nil
			case "rpc":
				return nil, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "id " + a.ID + " is not open for action"}
			}
			if err := record(dir, "act %s", a.ID); err != nil {
				return nil, nil, err
			}
			if a.Fail == "after" {
				return &mcp.CallToolResult{IsError: true, Content: text("lost the connection to the bank after acting on " + a.ID)}, nil, nil
			}
			return &mcp.CallToolResult{Content: text("acted on " + a.ID)}, nil, nil
		})

	type ticketIn struct {
		Subject string `json:"subject"`
		Body    string `json:"body,omitempty"`
		Fail    bool   `json:"fail,omitempty" jsonschema:"act, then answer an error"`
	}
	type ticketOut struct {
		ID      string `json:"id"`
		Subject string `json:"subject"`
	}
	var tickets sync.Mutex
	mcp.AddTool(s, &mcp.Tool{Name: "create_ticket", Description: "open a ticket"},
		func(_ context.Context, _ *mcp.CallToolRequest, a ticketIn) (*mcp.CallToolResult, ticketOut, error) {
			tickets.Lock()
			defer tickets.Unlock()
			n := countPrefix(journalLines(dir), "create_ticket ") + 1
			if err := record(dir, "create_ticket %d %s", n, a.Subject); err != nil {
				return nil, ticketOut{}, err
			}
			if a.Fail {
				return &mcp.CallToolResult{IsError: true, Content: text("the ticket system timed out")}, ticketOut{}, nil
			}
			return nil, ticketOut{ID: fmt.Sprintf("T-%d", n), Subject: a.Subject}, nil
		})

	// slow records that it started, waits until the file release-ID
	// exists, then acts.
	type slow struct {
		ID string `json:"id"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "act once the test releases it"},
		func(ctx context.Context, _ *mcp.CallToolRequest, a slow) (*mcp.CallToolResult, any, error) {
			if err := record(dir, "slow-start %s", a.ID); err != nil {
				return nil, nil, err
			}
			for {
				if _, err := os.Stat(filepath.Join(dir, "release-"+a.ID)); err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(5 * time.Millisecond):
				}
			}
			if err := record(dir, "slow %s", a.ID); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: text("slow done " + a.ID)}, nil, nil
		})

	// report sends three progress notifications when the call asks for
	// them.
	type report struct {
		Steps int `json:"steps"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "report", Description: "report progress"},
		func(ctx context.Context, req *mcp.CallToolRequest, a report) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := range a.Steps {
				if tok != nil {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i + 1), Total: float64(a.Steps), Message: fmt.Sprintf("step %d", i+1)}); err != nil {
						return nil, nil, err
					}
				}
			}
			return &mcp.CallToolResult{Content: text(fmt.Sprintf("reported %d steps, token %v", a.Steps, tok))}, nil, nil
		})

	// retire removes the refund tool: the upstream's tool list changes.
	mcp.AddTool(s, &mcp.Tool{Name: "retire", Description: "stop offering refund"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			s.RemoveTools("refund")
			return &mcp.CallToolResult{Content: text("refund retired")}, nil, nil
		})

	// A prompt and a resource, so that the upstream offers those lists,
	// and evolve, which changes all three lists: transfer's amount becomes
	// a number (a new version of the tool), a prompt and a resource are
	// added.
	s.AddPrompt(&mcp.Prompt{Name: "greet", Description: "a greeting"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hello"}}}}, nil
	})
	note := func(uri string) mcp.ResourceHandler {
		return func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "a note"}}}, nil
		}
	}
	s.AddResource(&mcp.Resource{URI: "note://one", Name: "one"}, note("note://one"))
	mcp.AddTool(s, &mcp.Tool{Name: "evolve", Description: "change the tools, prompts and resources offered"},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			type transferV2 struct {
				Account int     `json:"account"`
				Amount  float64 `json:"amount" jsonschema:"the amount, as a number"`
			}
			mcp.AddTool(s, &mcp.Tool{Name: "transfer", Description: "transfer an amount to an account (v2)"},
				func(_ context.Context, _ *mcp.CallToolRequest, a transferV2) (*mcp.CallToolResult, any, error) {
					if err := record(dir, "transfer-v2 %d %v", a.Account, a.Amount); err != nil {
						return nil, nil, err
					}
					return &mcp.CallToolResult{Content: text(fmt.Sprintf("transferred %v to account %d", a.Amount, a.Account))}, nil, nil
				})
			s.AddPrompt(&mcp.Prompt{Name: "farewell"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "bye"}}}}, nil
			})
			s.AddResource(&mcp.Resource{URI: "note://two", Name: "two"}, note("note://two"))
			return &mcp.CallToolResult{Content: text("evolved")}, nil, nil
		})

	// ask asks the client's model (sampling) before it answers: on
	// protocol 2026-07-28 in its result (multi-round-trip), on an earlier
	// one with a request of its own (the go-sdk does that for it).
	type ask struct {
		Question string `json:"question"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "ask the client's model"},
		func(_ context.Context, req *mcp.CallToolRequest, a ask) (*mcp.CallToolResult, any, error) {
			answer, ok := req.Params.InputResponses["q"]
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.CreateMessageParams{
					MaxTokens: 5, Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: a.Question}}}}}}, nil, nil
			}
			var said string
			switch r := answer.(type) {
			case *mcp.CreateMessageResult:
				if tc, ok := r.Content.(*mcp.TextContent); ok {
					said = tc.Text
				}
			case *mcp.CreateMessageWithToolsResult:
				for _, c := range r.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						said += tc.Text
					}
				}
			}
			return &mcp.CallToolResult{Content: text("the model said: " + said)}, nil, nil
		})

	// checkout acts like a commerce protocol's tool: its meta argument
	// carries the protocol's headers, an idempotency key among them.
	type checkout struct {
		ID     string         `json:"id"`
		Amount string         `json:"amount"`
		Meta   map[string]any `json:"meta,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "checkout", Description: "complete a checkout"},
		func(_ context.Context, _ *mcp.CallToolRequest, a checkout) (*mcp.CallToolResult, any, error) {
			key := a.Meta["idempotency_key"]
			if key == nil {
				key = a.Meta["idempotency-key"]
			}
			if err := record(dir, "checkout %s %s meta-key=%v", a.ID, a.Amount, key); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: text(fmt.Sprintf("checkout %s completed for %s", a.ID, a.Amount))}, nil, nil
		})

	if err := s.Run(context.Background(), keyRecorder{Transport: &mcp.StdioTransport{}, dir: dir}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// journalLines reads the journal inside the upstream.
func journalLines(dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "journal.txt"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// keyRecorder records the params.idempotencyKey of every tools/call the
// upstream reads (the go-sdk's typed params do not hold it).
type keyRecorder struct {
	mcp.Transport
	dir string
}

func (k keyRecorder) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := k.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return keyConn{Connection: c, dir: k.dir}, nil
}

type keyConn struct {
	mcp.Connection
	dir string
}

func (c keyConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if req, ok := m.(*jsonrpc.Request); ok && req.Method == "tools/call" {
		var p struct {
			IdempotencyKey *string `json:"idempotencyKey"`
		}
		if json.Unmarshal(req.Params, &p) == nil && p.IdempotencyKey != nil {
			_ = record(c.dir, "params-key %s", *p.IdempotencyKey)
		}
	}
	return m, err
}
