package mcpgateway_test

import (
	"strings"
	"testing"
)

// The host passes the run id per session, and a restart or a
// reconnect in the same run does not act again: over stdio in the
// environment variable ONCELY_RUN_ID (two gateway processes, one
// effect), over HTTP in the Oncely-Run header (two sessions of the
// TypeScript client, one effect). Without one, the gateway says at start
// what that means. Before, every process and every session was its own
// run: two effects in each case.
func TestRunIDPerSession(t *testing.T) {
	t.Parallel()
	tools := map[string]any{"append_line": map[string]any{"identity": []any{map[string]any{"path": "ticket", "norm": "integer"}}}}
	s := newSetup(t, tools, nil)
	call := map[string]any{"ticket": 11, "text": "hello"}
	for i, want := range []string{"executed", "already done"} {
		cs := s.stdio(t, nil, env(t, "ONCELY_RUN_ID=conversation-1"))
		if res := callOK(t, cs, "append_line", call); outcome(res) != want {
			t.Fatalf("process %d: %s %q", i+1, outcome(res), allText(res))
		}
		_ = cs.Close()
	}
	if j := journal(t, s.dir); countPrefix(j, "append_line 11") != 1 {
		t.Fatalf("journal after a restart with ONCELY_RUN_ID: %q", j)
	}

	// Without a run id: the gateway says what that means.
	_, log := s.stdioLog(t, nil, nil)
	waitFor(t, "the warning", func() bool { return strings.Contains(log.String(), "no run id is configured") })

	h := newSetup(t, tools, nil)
	url := h.http(t, nil)
	plan := map[string]any{"headers": map[string]any{"Oncely-Run": "conversation-2"},
		"steps": []any{tsCall("append_line", map[string]any{"ticket": 12, "text": "hi"}, nil)}}
	for i, want := range []string{"executed", "already done"} {
		if r := runTSCalls(t, plan, "--url", url); r[0].outcome() != want {
			t.Fatalf("HTTP session %d: %+v", i+1, r[0])
		}
	}
	if j := journal(t, h.dir); countPrefix(j, "append_line 12") != 1 {
		t.Fatalf("journal after a reconnect with Oncely-Run: %q", j)
	}
}
