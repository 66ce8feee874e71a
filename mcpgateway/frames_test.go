package mcpgateway_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowConfig is a setup whose tools are the upstream's slow (held until
// the test releases it) and append_line.
func slowConfig(t *testing.T, top map[string]any) *setup {
	return newSetup(t, map[string]any{
		"slow":        map[string]any{"identity": []any{map[string]any{"path": "id"}}},
		"append_line": map[string]any{"identity": []any{map[string]any{"path": "ticket", "norm": "integer"}}, "replay": true},
	}, top)
}

// release lets the upstream's slow call for id finish.
func (s *setup) release(t *testing.T, id string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, "release-"+id), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// collect reads messages until it has one for every id wanted (a batch
// answer counts for each of its ids), and returns them by id ("null" for
// a null id).
func (c *rawClient) collect(want ...string) map[string][]map[string]any {
	c.t.Helper()
	got := map[string][]map[string]any{}
	missing := func() bool {
		for _, id := range want {
			if len(got[id]) == 0 {
				return true
			}
		}
		return false
	}
	for missing() {
		l := c.nextRaw()
		var msgs []map[string]any
		if err := json.Unmarshal(l, &msgs); err != nil {
			var m map[string]any
			if err := json.Unmarshal(l, &m); err != nil {
				c.t.Fatalf("the gateway wrote %q", l)
			}
			msgs = []map[string]any{m}
		} else {
			for _, m := range msgs {
				m["batch"] = true
			}
		}
		for _, m := range msgs {
			id := fmt.Sprint(m["id"])
			if m["id"] == nil {
				id = "null"
			}
			got[id] = append(got[id], m)
		}
	}
	return got
}

func errorCode(m map[string]any) float64 {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(float64)
	return c
}

// Every malformed frame a client may send over stdio is answered
// with a JSON-RPC error and the session goes on: the call in flight while
// they arrive is answered (executed), and a valid call afterwards
// succeeds. Before, the first of them ended the gateway (exit 1, "the MCP
// client or the upstream went away") and the call in flight was never
// answered.
func TestHostileFramesStdio(t *testing.T) {
	t.Parallel()
	s := slowConfig(t, nil)
	c := s.raw(t, nil, "--run-id", "hostile")
	c.initialize("2025-06-18")

	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"id":"x"}}}`)
	waitFor(t, "the slow call to reach the upstream", func() bool { return countPrefix(journal(t, s.dir), "slow-start x") == 1 })

	huge := `{"method":"tools/call","params":{"name":"append_line","arguments":{"ticket":1,"text":"` + strings.Repeat("A", 17<<20) + `"}},"jsonrpc":"2.0","id":3}`
	deep := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"append_line","arguments":{"ticket":1,"text":"deep","extra":` +
		strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}}}`
	frames := []struct {
		name, frame, id string
		code            float64
	}{
		{"trailing comma", `{"jsonrpc":"2.0","id":2,"method":"tools/list",}`, "2", -32700},
		{"not JSON", `this is not JSON`, "null", -32700},
		{"17 MB line", huge, "3", -32600},
		{"1001 levels deep", deep, "4", -32600},
		{"empty batch", `[]`, "null", -32600},
		{"batch under 2025-06-18", `[{"jsonrpc":"2.0","id":5,"method":"ping"},{"jsonrpc":"2.0","id":6,"method":"ping"}]`, "5", -32600},
		{"id that is an object", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", -32600},
		// Truncated, with the id of the call in flight: not answered under
		// that id, which the client would take for the call's answer.
		{"truncated, id in flight", `{"jsonrpc":"2.0","id":1,"method":"tools/list"`, "null", -32700},
	}
	for _, f := range frames {
		c.send(f.frame)
		got := c.collect(f.id)
		m := got[f.id][0]
		if errorCode(m) != f.code {
			t.Errorf("%s: answered %v, want error %v", f.name, m, f.code)
		}
		if f.id == "5" && (len(got["6"]) != 1 || errorCode(got["6"][0]) != -32600 || m["batch"] != true) {
			t.Errorf("%s: the batch's second request: %v", f.name, got["6"])
		}
	}

	s.release(t, "x")
	first := c.collect("1")["1"][0]
	if meta := result(first)["_meta"].(map[string]any); meta["oncely/outcome"] != "executed" {
		t.Fatalf("the call in flight: %v", first)
	}
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"append_line","arguments":{"ticket":5,"text":"after the storm"}}}`)
	if m := c.collect("7")["7"][0]; result(m)["isError"] == true || result(m)["_meta"].(map[string]any)["oncely/outcome"] != "executed" {
		t.Fatalf("a valid call after the malformed frames: %v", m)
	}
	if j := journal(t, s.dir); countPrefix(j, "slow x") != 1 || countPrefix(j, "append_line 5 after the storm") != 1 || countPrefix(j, "append_line 1") != 0 {
		t.Fatalf("journal: %q", j)
	}
}

func result(m map[string]any) map[string]any {
	r, _ := m["result"].(map[string]any)
	return r
}

// Under protocol 2025-03-26, which has batches, a batch is served: one
// array of answers, an invalid member answered in place.
func TestBatchStdio(t *testing.T) {
	t.Parallel()
	s := slowConfig(t, nil)
	c := s.raw(t, nil, "--run-id", "batch")
	c.initialize("2025-03-26")
	c.send(`[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","id":11,"method":"tools/list"},{"jsonrpc":"2.0","id":[1],"method":"ping"}]`)
	got := c.collect("10", "11", "null")
	if got["10"][0]["batch"] != true || got["10"][0]["error"] != nil || result(got["11"][0])["tools"] == nil || errorCode(got["null"][0]) != -32600 {
		t.Fatalf("batch answers: %v", got)
	}
}

// A request that reuses the id of a request in flight is
// answered with an error at once (before, it got no answer at all), and
// the first request is answered when it ends.
func TestDuplicateIDStdio(t *testing.T) {
	t.Parallel()
	s := slowConfig(t, nil)
	c := s.raw(t, nil, "--run-id", "dup")
	c.initialize("2025-06-18")
	c.send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"slow","arguments":{"id":"d"}}}`)
	waitFor(t, "the slow call to reach the upstream", func() bool { return countPrefix(journal(t, s.dir), "slow-start d") == 1 })
	c.send(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"append_line","arguments":{"ticket":9,"text":"second"}}}`)
	dup := c.collect("a")["a"][0]
	if errorCode(dup) != -32600 || !strings.Contains(fmt.Sprint(dup["error"]), "already in use") {
		t.Fatalf("the reused id: %v", dup)
	}
	s.release(t, "d")
	first := c.collect("a")["a"][0]
	if result(first)["_meta"].(map[string]any)["oncely/outcome"] != "executed" {
		t.Fatalf("the first request: %v", first)
	}
	if j := journal(t, s.dir); countPrefix(j, "append_line") != 0 {
		t.Fatalf("the refused request ran: %q", j)
	}
}

// A client that goes away while a configured call is in flight
// does not cut the call short: it runs to its end and is recorded, the
// gateway exits when it is, and a repeat in a new process is answered
// from the record. Before, the call's context ended with the session and
// an effect that had happened was left uncertain.
func TestClientLeavesMidCall(t *testing.T) {
	t.Parallel()
	s := slowConfig(t, nil)
	c := s.raw(t, nil, "--run-id", "leaving")
	c.initialize("2025-06-18")
	c.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"id":"gone"}}}`)
	waitFor(t, "the slow call to reach the upstream", func() bool { return countPrefix(journal(t, s.dir), "slow-start gone") == 1 })
	if err := c.in.Close(); err != nil { // the client leaves
		t.Fatal(err)
	}
	s.release(t, "gone")
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the gateway: %v\n%s", err, c.stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the gateway did not exit\n%s", c.stderr)
	}
	if !strings.Contains(c.stderr.String(), `outcome=executed`) {
		t.Errorf("the call was not recorded executed:\n%s", c.stderr)
	}
	cs := s.stdio(t, nil, nil, "--run-id", "leaving")
	if res := callOK(t, cs, "slow", map[string]any{"id": "gone"}); outcome(res) != "already done" {
		t.Fatalf("a repeat: %s %q", outcome(res), allText(res))
	}
	if j := journal(t, s.dir); countPrefix(j, "slow gone") != 1 {
		t.Fatalf("journal: %q", j)
	}
}
