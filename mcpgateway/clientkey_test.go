package mcpgateway_test

import (
	"encoding/json"
	"fmt"
	"testing"
)

// checkoutCall is a TypeScript step calling checkout with a client key in
// one of the three places the protocols put it ("" sends none).
func checkoutCall(placement, key, id, amount, requestID string) map[string]any {
	args := map[string]any{"id": id, "amount": amount}
	step := map[string]any{"name": "checkout", "arguments": args}
	switch {
	case key == "":
	case placement == "sep":
		step["idempotencyKey"] = key
	case placement == "acp":
		args["meta"] = map[string]any{"idempotency_key": key, "request_id": requestID}
	case placement == "ucp":
		args["meta"] = map[string]any{"idempotency-key": key, "ucp-agent": map[string]any{"profile": "https://agent.example/" + requestID}}
	}
	return step
}

// Keys that clients send, in each place the protocols put them (MCP
// SEP-3182's params.idempotencyKey, the Agentic Commerce Protocol's
// arguments.meta.idempotency_key, the Universal Commerce Protocol's
// arguments.meta["idempotency-key"]), through the TypeScript client, for
// each clientKey setting: the same key with the same arguments gets the
// first call's answer (a commerce request's other headers may differ);
// the same key with other arguments is refused as a conflict and not
// run; a new key is a new action where the key is the identity, or part
// of it; the key reaches the upstream where the client put it; the
// gateway advertises tools.idempotency. Before, the gateway read no key:
// a retry with the same key but a rephrased amount ran again.
func TestClientKeys(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"identity", "combine", "ignore"} {
		for _, placement := range []string{"sep", "acp", "ucp"} {
			t.Run(mode+"/"+placement, func(t *testing.T) {
				t.Parallel()
				s := newSetup(t, map[string]any{"checkout": map[string]any{
					"identity": []any{map[string]any{"path": "id"}}, "clientKey": mode, "replay": true}}, nil)
				call := func(key, id, amount, req string) map[string]any {
					return checkoutCall(placement, key, id, amount, req)
				}
				plan := map[string]any{"steps": []any{
					map[string]any{"capabilities": true},
					call("K1", "o1", "10", "r1"), // 1: executed
					call("K1", "o1", "10", "r2"), // 2: the same request again
					call("K1", "o1", "20", "r3"), // 3: the same key, another amount
					call("K2", "o1", "10", "r4"), // 4: another key, the same arguments
					call("K1", "o2", "10", "r5"), // 5: the same key, another id
					call("", "o3", "10", ""),     // 6: no key
					call("", "o3", "10", ""),     // 7: no key, again
				}}
				lines := runTS(t, plan, append([]string{oncelyBinary(t)}, s.args("--run-id", "keys")...)...)
				var caps struct {
					Tools map[string]any `json:"tools"`
				}
				if err := json.Unmarshal(lines[0], &caps); err != nil {
					t.Fatal(err)
				}
				if _, ok := caps.Tools["idempotency"]; ok != (mode != "ignore") {
					t.Errorf("capabilities %s: tools.idempotency advertised %v", lines[0], ok)
				}
				res := decodeTS(t, lines[1:])
				want := map[string][]string{
					"identity": {"executed", "already done", "conflict", "executed", "conflict", "executed", "already done"},
					"combine":  {"executed", "already done", "conflict", "executed", "executed", "executed", "already done"},
					"ignore":   {"executed", "already done", "already done", "already done", "executed", "executed", "already done"},
				}[mode]
				for i, w := range want {
					if got := res[i].outcome(); got != w {
						t.Errorf("call %d: %s %q, want %s", i+1, got, res[i].text(), w)
					}
				}
				if res[1].text() != res[0].text()+"Already done earlier in this run: checkout: checkout o1 completed for 10. Do not repeat it.\n" && mode != "ignore" {
					t.Errorf("the repeat with the same key: %q", res[1].text())
				}
				j := journal(t, s.dir)
				runs := map[string]int{"identity": 3, "combine": 4, "ignore": 3}[mode]
				if n := countPrefix(j, "checkout "); n != runs {
					t.Errorf("journal %q: %d checkouts, want %d", j, n, runs)
				}
				if countPrefix(j, "checkout o1 20") != 0 {
					t.Errorf("a conflicting call ran: %q", j)
				}
				// The key reached the upstream where the client put it.
				first := []string{"checkout o1 10 meta-key=K1"}
				if placement == "sep" {
					first = []string{"params-key K1", "checkout o1 10 meta-key=<nil>"}
				}
				if len(j) < len(first) || fmt.Sprint(j[:len(first)]) != fmt.Sprint(first) {
					t.Errorf("journal %q, want it to start with %q", j, first)
				}
			})
		}
	}
}

// A call whose keys disagree (params and arguments.meta) is refused
// before anything runs.
func TestClientKeysDisagree(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{"checkout": map[string]any{
		"identity": []any{map[string]any{"path": "id"}}, "clientKey": "identity"}}, nil)
	step := checkoutCall("acp", "K1", "o1", "10", "r1")
	step["idempotencyKey"] = "K2"
	res := runTSCalls(t, map[string]any{"steps": []any{step}}, append([]string{oncelyBinary(t)}, s.args("--run-id", "keys")...)...)
	if !res[0].IsError || res[0].outcome() != "invalid input" {
		t.Fatalf("%+v", res[0])
	}
	if j := journal(t, s.dir); countPrefix(j, "checkout") != 0 {
		t.Fatalf("journal: %q", j)
	}
}

// Over streamable HTTP too: the capability is advertised and a key in
// params is the identity.
func TestClientKeysHTTP(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{"checkout": map[string]any{
		"identity": []any{map[string]any{"path": "id"}}, "clientKey": "identity"}}, nil)
	lines := runTS(t, map[string]any{"steps": []any{
		map[string]any{"capabilities": true},
		checkoutCall("sep", "K1", "o1", "10", ""),
		checkoutCall("sep", "K1", "o1", "10", ""),
		checkoutCall("sep", "K1", "o1", "11", ""),
	}}, "--url", s.http(t, nil, "--run-id", "keys"))
	var caps struct {
		Tools map[string]any `json:"tools"`
	}
	if err := json.Unmarshal(lines[0], &caps); err != nil || caps.Tools["idempotency"] == nil {
		t.Fatalf("capabilities %s", lines[0])
	}
	res := decodeTS(t, lines[1:])
	if res[0].outcome() != "executed" || res[1].outcome() != "already done" || res[2].outcome() != "conflict" {
		t.Fatalf("%+v", res)
	}
	if j := journal(t, s.dir); countPrefix(j, "checkout") != 1 || countPrefix(j, "params-key K1") != 1 {
		t.Fatalf("journal: %q", j)
	}
}
