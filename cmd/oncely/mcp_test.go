package main

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
)

// envUpstream makes the test binary an MCP server on stdio (a go-sdk
// server): the upstream that oncely mcp fronts in TestMCP. Its one tool,
// append_line, appends a line to the file the variable names: the effect
// journal, which the test reads.
const envUpstream = "ONCELY_TEST_MCP_UPSTREAM"

// upstreamMain serves append_line over stdio until the client leaves.
func upstreamMain(journal string) int {
	s := mcp.NewServer(&mcp.Implementation{Name: "journal", Version: "1"}, nil)
	type in struct {
		Ticket int    `json:"ticket"`
		Text   string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "append_line", Description: "append a line to the journal"},
		func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			f, err := os.OpenFile(journal, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return nil, nil, err
			}
			defer f.Close()
			if _, err := fmt.Fprintf(f, "%d %s\n", a.Ticket, a.Text); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("line for ticket %d written", a.Ticket)}}}, nil, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// An MCP client calls a tool twice through oncely mcp (a real process over
// stdio, fronting a real MCP server), then once more through a second
// oncely mcp process on the same ledger: one line in the journal; the
// repeats say it was done and replay the first result.
func TestMCP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.txt")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"upstream": map[string]any{"command": []string{self}, "env": map[string]string{envUpstream: journal}},
		"tools": map[string]any{"append_line": map[string]any{
			"identity": []map[string]string{{"path": "ticket", "norm": "integer"}}, "replay": true,
		}},
		"run": map[string]any{"id": "run-1"},
	}
	raw, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	ledgerURL := "sqlite://" + filepath.Join(dir, "oncely.db")
	call := func(ticket any, text string) *mcp.CallToolResult {
		t.Helper()
		ctx := context.Background()
		cmd := exec.Command(bin, "mcp", "--config", cfgPath, "--ledger", ledgerURL)
		cmd.Env = baseEnv(t)
		c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
		sess, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: "append_line", Arguments: map[string]any{"ticket": ticket, "text": text}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	text := func(r *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text + "\n")
			}
		}
		return b.String()
	}
	first := call("42", "Hello") // the upstream takes an integer: it gets the normalized 42
	second := call(42, "Hello again, reworded")
	lines, err := os.ReadFile(journal)
	if err != nil {
		t.Fatalf("%v; the calls answered %q and %q", err, text(first), text(second))
	}
	if got := strings.Count(string(lines), "\n"); got != 1 {
		t.Fatalf("journal has %d lines, want 1:\n%s", got, lines)
	}
	if first.IsError || !strings.Contains(text(first), "line for ticket 42 written") {
		t.Errorf("first call: %q", text(first))
	}
	if second.IsError || !strings.Contains(text(second), "line for ticket 42 written") || !strings.Contains(text(second), "Already done") {
		t.Errorf("repeat through a new gateway process: %q", text(second))
	}
}

func TestMCPBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"upstream": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte(`{"upstream": {"command": ["`+filepath.Join(dir, "no-such-server")+`"]}, "tools": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		code  int
		parts []string
	}{
		{[]string{"mcp"}, exitUsage, []string{"no --config"}},
		{[]string{"mcp", "--config", filepath.Join(dir, "missing.json")}, exitUsage, []string{"missing.json"}},
		{[]string{"mcp", "--config", bad}, exitUsage, []string{"upstream"}},
		{[]string{"mcp", "--config", good, "--ledger", "frob://x"}, exitUsage, []string{"unknown scheme"}},
		{[]string{"mcp", "--config", good, "--ledger", "sqlite://" + filepath.Join(dir, "oncely.db")}, exitOperational, []string{"no-such-server"}},
	} {
		runCLI(t, nil, tc.args...).wantError(t, tc.code, tc.parts...)
	}
}
