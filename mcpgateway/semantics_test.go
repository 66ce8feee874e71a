package mcpgateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/mcpgateway"
	"github.com/oncely/oncely/telemetry/oncelyotel"
)

// recorder is a go-sdk MCP server on loopback whose "act" tool records
// every call it gets (its arguments and _meta) and answers with a text of
// the requested size, or an error result when asked.
type recorder struct {
	mu    sync.Mutex
	calls []*mcp.CallToolParamsRaw
	url   string
	hold  chan struct{} // closed: blocked calls return
	once  sync.Once
}

// release lets the blocked calls return.
func (r *recorder) release() { r.once.Do(func() { close(r.hold) }) }

func newRecorder(t *testing.T) *recorder {
	r := &recorder{hold: make(chan struct{})}
	s := mcp.NewServer(&mcp.Implementation{Name: "recorder", Version: "1"}, nil)
	type in struct {
		ID      string `json:"id"`
		Size    int    `json:"size,omitempty"`
		Fail    bool   `json:"fail,omitempty"`
		Block   bool   `json:"block,omitempty"`
		OncelyK string `json:"idempotencyKey,omitempty"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "act"}, func(ctx context.Context, req *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
		r.mu.Lock()
		r.calls = append(r.calls, req.Params)
		r.mu.Unlock()
		if a.Block { // until the caller gives up, or the test ends
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-r.hold:
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released " + a.ID}}}, nil, nil
			}
		}
		if a.Fail {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "card declined"}}}, nil, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "acted on " + a.ID + strings.Repeat(".", a.Size)}}}, nil, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(srv.Close)
	t.Cleanup(r.release)
	r.url = srv.URL
	return r
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func (r *recorder) config(tc mcpgateway.ToolConfig) *mcpgateway.Config {
	if tc.Identity == nil {
		tc.Identity = []mcpgateway.FieldConfig{{Path: "id"}}
	}
	return &mcpgateway.Config{Upstream: mcpgateway.Upstream{URL: r.url}, Tools: map[string]mcpgateway.ToolConfig{"act": tc}}
}

// headerClient connects with a fixed HTTP header on every request.
func headerClient(t *testing.T, url, name, value string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerRT{name, value}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type headerRT struct{ name, value string }

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.name, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// The run id comes from the header when the client sends one; without
// one, each session is its own run.
func TestRunIDSources(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	_, url := startGateway(t, ledgermem.New(nil), rec.config(mcpgateway.ToolConfig{}))
	a := headerClient(t, url, mcpgateway.DefaultRunHeader, "run-h")
	b := headerClient(t, url, mcpgateway.DefaultRunHeader, "run-h")
	args := map[string]any{"id": "1"}
	if o := outcome(call(t, a, "act", args, nil)); o != "executed" {
		t.Fatal(o)
	}
	if o := outcome(call(t, b, "act", args, nil)); o != "already done" {
		t.Fatalf("same header, other session: %s", o)
	}
	c, d := connect(t, url), connect(t, url) // no header: the session is the run
	if o := outcome(call(t, c, "act", args, nil)); o != "executed" {
		t.Fatalf("new session: %s", o)
	}
	if o := outcome(call(t, c, "act", args, nil)); o != "already done" {
		t.Fatalf("same session: %s", o)
	}
	if o := outcome(call(t, d, "act", args, nil)); o != "executed" {
		t.Fatalf("other session: %s", o)
	}
	if o := outcome(call(t, d, "act", args, mcp.Meta{mcpgateway.DefaultRunMeta: "run-h"})); o != "already done" {
		t.Fatalf("_meta run id: %s", o)
	}
	if n := rec.count(); n != 3 {
		t.Fatalf("upstream calls: %d, want 3", n)
	}
	for _, p := range rec.calls {
		if _, ok := p.Meta[mcpgateway.DefaultRunMeta]; ok {
			t.Error("the run id's _meta entry reached the upstream")
		}
		if k, _ := p.Meta[mcpgateway.DefaultKeyMeta].(string); len(k) != 64 {
			t.Errorf("downstream key in _meta: %q", k)
		}
	}
}

// Missing identity: refused with the executor's text, nothing sent. The
// key as an argument. An error result: uncertain by default, never
// repeated; "definite": failed, and a retry runs.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{Key: mcpgateway.KeyConfig{Argument: "idempotencyKey"}})
	cfg.Run.ID = "r"
	_, url := startGateway(t, ledgermem.New(nil), cfg)
	cs := connect(t, url)

	res := call(t, cs, "act", map[string]any{"size": 1}, nil)
	if !res.IsError || outcome(res) != "invalid input" || !strings.Contains(lastText(res), `needs "id"`) || rec.count() != 0 {
		t.Fatalf("missing identity: %s %v (upstream calls %d)", outcome(res), texts(res), rec.count())
	}
	call(t, cs, "act", map[string]any{"id": "k"}, nil)
	if k := string(rec.calls[0].Arguments); !strings.Contains(k, `"idempotencyKey":"`) {
		t.Errorf("key argument not injected: %s", k)
	}

	res = call(t, cs, "act", map[string]any{"id": "f", "fail": true}, nil)
	if !res.IsError || outcome(res) != "uncertain" {
		t.Fatalf("error result: %s %v", outcome(res), texts(res))
	}
	call(t, cs, "act", map[string]any{"id": "f", "fail": true}, nil)
	if n := rec.count(); n != 2 {
		t.Fatalf("an uncertain call was repeated: %d upstream calls", n)
	}

	rec2 := newRecorder(t)
	cfg2 := rec2.config(mcpgateway.ToolConfig{ErrorResult: "definite"})
	cfg2.Run.ID = "r"
	_, url2 := startGateway(t, ledgermem.New(nil), cfg2)
	cs2 := connect(t, url2)
	for range 2 {
		res = call(t, cs2, "act", map[string]any{"id": "f", "fail": true}, nil)
		if !res.IsError || outcome(res) != "failed" || !strings.Contains(lastText(res), "card declined") {
			t.Fatalf("definite error result: %s %v", outcome(res), texts(res))
		}
	}
	if n := rec2.count(); n != 2 {
		t.Fatalf("a failed call may be retried: %d upstream calls, want 2", n)
	}
}

// An identity that is empty once normalized is a missing one: refused,
// nothing sent, not one action for every empty id.
func TestEmptyIdentity(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{Identity: []mcpgateway.FieldConfig{{Path: "id", Norm: "trimmed"}}})
	cfg.Run.ID = "r"
	_, url := startGateway(t, ledgermem.New(nil), cfg)
	cs := connect(t, url)
	for _, id := range []string{"", "   ", ""} {
		res := call(t, cs, "act", map[string]any{"id": id}, nil)
		if !res.IsError || outcome(res) != "invalid input" || !strings.Contains(lastText(res), `act needs "id" to run safely`) {
			t.Errorf("id %q: %s %v", id, outcome(res), texts(res))
		}
	}
	if n := rec.count(); n != 0 {
		t.Errorf("upstream calls: %d, want 0", n)
	}
}

// A result larger than the ledger keeps is returned the first time, and a
// repeat says it cannot be shown again.
func TestReplayTooLarge(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{Replay: true})
	cfg.Run.ID = "r"
	gw, err := mcpgateway.New(context.Background(), ledgermem.New(nil), cfg, &mcpgateway.Options{Client: &client.Config{MaxResultBytes: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler(nil))
	t.Cleanup(func() { srv.Close(); _ = gw.Close() })
	cs := connect(t, srv.URL)
	args := map[string]any{"id": "big", "size": 4096}
	if res := call(t, cs, "act", args, nil); outcome(res) != "executed" || len(texts(res)[0]) < 4096 {
		t.Fatalf("first: %s", outcome(res))
	}
	res := call(t, cs, "act", args, nil)
	if outcome(res) != "already done" || len(res.Content) != 1 || !strings.Contains(lastText(res), "result was not kept") {
		t.Fatalf("repeat: %s %v", outcome(res), texts(res))
	}
}

// An action an operator resolved done has no stored result: a replay
// says it was not kept, not that it was too large.
func TestReplayResolved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{Replay: true})
	cfg.Run.ID = "r"
	store := ledgermem.New(nil)
	_, url := startGateway(t, store, cfg)
	cs := connect(t, url)
	args := map[string]any{"id": "x", "fail": true} // an error result: uncertain
	res := call(t, cs, "act", args, nil)
	key, _ := res.Meta[mcpgateway.KeyMeta].(string)
	if outcome(res) != "uncertain" || key == "" {
		t.Fatalf("first: %s %v", outcome(res), texts(res))
	}
	if _, err := ledger.Resolve(ctx, store, key, ledger.Resolution{Done: true, Summary: "done by hand", By: "alice"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	res = call(t, cs, "act", args, nil)
	if outcome(res) != "already done" || !strings.Contains(lastText(res), "result was not kept") || strings.Contains(lastText(res), "too large") {
		t.Fatalf("after the operator resolved it: %s %v", outcome(res), texts(res))
	}
}

// An upstream call that runs past callTimeout is uncertain, and a repeat
// does not call the upstream again.
func TestUpstreamTimeout(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{})
	cfg.Run.ID = "r"
	cfg.CallTimeout = mcpgateway.Duration(100 * time.Millisecond) // the upstream never answers: any bound gives the same outcome
	_, url := startGateway(t, ledgermem.New(nil), cfg)
	cs := connect(t, url)
	for range 2 {
		res := call(t, cs, "act", map[string]any{"id": "slow", "block": true}, nil)
		if !res.IsError || outcome(res) != "uncertain" || !strings.HasPrefix(lastText(res), "Outcome unknown") {
			t.Fatalf("timed out: %s %v", outcome(res), texts(res))
		}
	}
	if n := rec.count(); n != 1 {
		t.Fatalf("upstream calls: %d, want 1", n)
	}
}

// The gateway's tools and calls can be instrumented: with oncelyotel, each
// call of a configured tool is a span with the tool run inside.
func TestInstrumented(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	cfg := rec.config(mcpgateway.ToolConfig{})
	cfg.Run.ID = "r"
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	in, err := oncelyotel.New(&oncelyotel.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := mcpgateway.New(context.Background(), in.Store(ledgermem.New(nil)), cfg, &mcpgateway.Options{
		Tool:     in.Tool,
		Executor: func(e *client.Executor) mcpgateway.Executor { return in.Executor(e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler(nil))
	t.Cleanup(func() { srv.Close(); _ = gw.Close() })
	cs := connect(t, srv.URL)
	call(t, cs, "act", map[string]any{"id": "1"}, nil)
	call(t, cs, "act", map[string]any{"id": "1"}, nil)
	names := map[string]int{}
	for _, s := range spans.Ended() {
		names[s.Name()]++
	}
	if names["oncely.execute"] != 2 || names["oncely.tool.run"] != 1 || names["oncely.claim"] != 2 {
		t.Fatalf("spans: %v", names)
	}
}
