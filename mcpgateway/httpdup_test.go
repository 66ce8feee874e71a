package mcpgateway_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/mcpgateway"
)

// post sends one JSON-RPC message in a session and returns the session
// and the body of the answer (the first SSE event's data, or the JSON), or
// the error.
func post(ctx context.Context, url, session, msg string) (string, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(msg))
	if err != nil {
		return "", err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err.Error()
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				return resp.Header.Get("Mcp-Session-Id"), d
			}
		}
		return resp.Header.Get("Mcp-Session-Id"), ""
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.Header.Get("Mcp-Session-Id"), string(bytes.TrimSpace(b))
}

// Over streamable HTTP, a request that reuses the id of one in
// flight in the same session is answered with an error.
func TestDuplicateIDHTTP(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{})
	cfg.Run.ID = "r"
	_, url := startGateway(t, ledgermem.New(nil), cfg)
	defer rec.release() // before the gateway closes: it waits for the call
	ctx := context.Background()
	session, _ := post(ctx, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	post(ctx, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go post(bctx, url, session, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"act","arguments":{"id":"b","block":true}}}`)
	waitFor(t, "the blocking call to reach the upstream", func() bool { return rec.count() == 1 })
	dctx, dcancel := context.WithTimeout(ctx, time.Minute) // no answer at all: the test fails, not hangs
	defer dcancel()
	_, body := post(dctx, url, session, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if !strings.Contains(body, `"error"`) || !strings.Contains(body, "already in use") {
		t.Fatalf("the reused id: %q", body)
	}
}
