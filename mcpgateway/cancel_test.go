package mcpgateway_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// A call the TypeScript client cancels (notifications/cancelled) gets no
// response, as the specification says a receiver should not answer a
// cancelled request: the SDK, which no longer awaits it, reports none
// ("Received a response for an unknown message ID"). The action still
// runs to its end, once, and a repeat is told it is already done. Over
// stdio and over streamable HTTP. Before, the gateway answered the
// cancelled call when it ended.
func TestCancelledCallUnanswered(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			s := slowConfig(t, nil)
			journalFile := filepath.Join(s.dir, "journal.txt")
			slow := map[string]any{"id": "c"}
			plan := map[string]any{"reportErrors": true, "steps": []any{
				map[string]any{"name": "slow", "arguments": slow, "cancelWhen": map[string]any{"file": journalFile, "contains": "slow-start c\n"}},
				map[string]any{"touch": filepath.Join(s.dir, "release-c")},
				map[string]any{"waitFor": map[string]any{"file": journalFile, "contains": "slow c\n"}},
				tsCall("slow", slow, nil),
				tsCall("slow", slow, nil),
			}}
			var lines []json.RawMessage
			if transport == "stdio" {
				lines = runTS(t, plan, append([]string{oncelyBinary(t)}, s.args("--run-id", "cancel")...)...)
			} else {
				lines = runTS(t, plan, "--url", s.http(t, nil, "--run-id", "cancel"))
			}
			if len(lines) != 4 {
				t.Fatalf("the client printed %s", lines)
			}
			res := decodeTS(t, lines[:3])
			if res[0].Error == nil {
				t.Fatalf("the cancelled call: %s", lines[0])
			}
			if res[2].outcome() != "already done" {
				t.Fatalf("a repeat: %s", lines[2])
			}
			var reported struct{ Errors []string }
			if err := json.Unmarshal(lines[3], &reported); err != nil || len(reported.Errors) != 0 {
				t.Fatalf("the client reported %s", lines[3])
			}
			if j := journal(t, s.dir); countPrefix(j, "slow c") != 1 {
				t.Fatalf("journal: %q", j)
			}
		})
	}
}
