package mcpgateway

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/client"
)

func gatewayWith(tools map[string]*upstreamTool) *Gateway {
	g := &Gateway{}
	g.catalog.set(tools)
	return g
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text + "\n")
		}
	}
	return b.String()
}

// A result the executor shared with a merged duplicate: the call that ran
// the tool is told executed, the merged one already done.
func TestAnswerMerged(t *testing.T) {
	t.Parallel()
	first, err := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded 7"}}, StructuredContent: map[string]any{"id": "re_1"}})
	if err != nil {
		t.Fatal(err)
	}
	res := client.Result{Outcome: client.Executed, Key: "k", Summary: "refund: refunded 7", Payload: first, Shared: true, Text: "Done: refund: refunded 7"}
	for _, replay := range []bool{false, true} {
		g := gatewayWith(map[string]*upstreamTool{"refund": {output: true}})
		tool := &guarded{name: "refund", cfg: ToolConfig{Replay: replay}}
		ran := g.answer(tool, &upCall{result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded 7"}}}}, res)
		if ran.Meta[OutcomeMeta] != "executed" {
			t.Errorf("replay %v: the call that ran: %v", replay, ran.Meta)
		}
		merged := g.answer(tool, &upCall{}, res)
		if merged.Meta[OutcomeMeta] != "already done" || merged.IsError ||
			!strings.Contains(resultText(merged), "Already done earlier in this run: refund: refunded 7. Do not repeat it.") {
			t.Errorf("replay %v: the merged call: %v %q", replay, merged.Meta, resultText(merged))
		}
		if fmt.Sprint(merged.StructuredContent) != "map[id:re_1]" {
			t.Errorf("replay %v: the merged call's structuredContent: %v", replay, merged.StructuredContent)
		}
		if replay != strings.Contains(resultText(merged), "refunded 7\nAlready") {
			t.Errorf("replay %v: content %q", replay, resultText(merged))
		}
	}
}

// A repeat of a tool with an outputSchema whose first result was not kept:
// an error result by default, a plain one with unkept "text".
func TestAnswerUnkept(t *testing.T) {
	t.Parallel()
	res := client.Result{Outcome: client.AlreadyDone, Key: "k", Summary: "done by hand", Text: "Already done earlier in this run: done by hand. Do not repeat it."}
	g := gatewayWith(map[string]*upstreamTool{"t": {output: true}, "plain": {}})
	for _, tc := range []struct {
		tool, unkept string
		isError      bool
	}{{"t", "", true}, {"t", "error", true}, {"t", "text", false}, {"plain", "", false}} {
		r := g.answer(&guarded{name: tc.tool, cfg: ToolConfig{Unkept: tc.unkept}}, &upCall{}, res)
		if r.IsError != tc.isError || r.StructuredContent != nil || r.Meta[OutcomeMeta] != "already done" {
			t.Errorf("%s unkept %q: isError %v, %v", tc.tool, tc.unkept, r.IsError, r.Meta)
		}
	}
}

func TestConform(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model any
		bound string
		types []string
		want  string // "" when the model's value is kept
	}{
		{"42", `42`, []string{"integer"}, "42"},
		{json.Number("42"), `42`, []string{"integer"}, ""},
		{"10.50", `10.5`, []string{"string"}, ""},
		{json.Number("10.5"), `"10.5"`, []string{"string"}, `"10.5"`},
		{json.Number("7"), `"7"`, []string{"number"}, ""},
		{"true", `"true"`, []string{"boolean"}, "true"},
		{"x", `"x"`, []string{"integer"}, ""},         // no conversion possible: as sent
		{"4.5", `4.5`, []string{"integer"}, ""},       // not an integer
		{" alice", `"alice"`, []string{"string"}, ""}, // conforms: as sent
	} {
		v, ok := conform(tc.model, json.RawMessage(tc.bound), tc.types)
		got := ""
		if ok {
			b, _ := json.Marshal(v)
			got = string(b)
		}
		if got != tc.want {
			t.Errorf("conform(%#v, %s, %v) = %s, want %s", tc.model, tc.bound, tc.types, got, tc.want)
		}
	}
}

func TestSniffID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ frame, want string }{
		{`{"jsonrpc":"2.0","id":5,"method":"x",}`, "5"},
		{`{"method":"x","params":{"a":1,},"jsonrpc":"2.0","id":"abc"}`, `"abc"`},
		{`{"method":"x","params":{"id":9}`, ""},
		{`{"method":"x","params":{"a":{"id":9}}}`, ""},
		{`not json`, ""},
		{"{\"jsonrpc\":\"2.0\",\"id\":12,\"params\":\n\"…\"}", "12"},
		{`{"jsonrpc":"2.0","id":{"a":1}}`, ""},
		{`{"id":123456789012345678901,"method":"x"`, ""},
	} {
		if got := string(sniffID([]byte(tc.frame))); got != tc.want {
			t.Errorf("sniffID(%q) = %q, want %q", tc.frame, got, tc.want)
		}
	}
}

func TestDepth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		doc  string
		want int
	}{{`1`, 0}, {`{}`, 1}, {`[[{"a":"[[[["}]]]`, 3}, {`{"a":"\"{"}`, 1}} {
		if got := depth([]byte(tc.doc)); got != tc.want {
			t.Errorf("depth(%s) = %d, want %d", tc.doc, got, tc.want)
		}
	}
}

func TestNearest(t *testing.T) {
	t.Parallel()
	have := []string{"refund", "create_refund", "list_orders", "send_email"}
	for _, tc := range []struct{ name, want string }{
		{"refnud", "[refund]"}, {"send_mail", "[send_email]"}, {"zzz", "[]"},
	} {
		if got := fmt.Sprint(nearest(tc.name, have)); got != tc.want {
			t.Errorf("nearest(%s) = %s, want %s", tc.name, got, tc.want)
		}
	}
}
