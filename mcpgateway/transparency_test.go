package mcpgateway_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

// sameJSON compares two JSON values field by field, reporting every path
// where they differ.
func sameJSON(t *testing.T, what string, direct, via json.RawMessage) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(direct, &a); err != nil {
		t.Fatalf("%s direct: %v", what, err)
	}
	if err := json.Unmarshal(via, &b); err != nil {
		t.Fatalf("%s through the gateway: %v", what, err)
	}
	var diffs []string
	var walk func(path string, x, y any)
	walk = func(path string, x, y any) {
		switch xv := x.(type) {
		case map[string]any:
			yv, ok := y.(map[string]any)
			if !ok {
				diffs = append(diffs, path+": "+describe(x)+" vs "+describe(y))
				return
			}
			for k := range xv {
				if _, ok := yv[k]; !ok {
					diffs = append(diffs, path+"."+k+": dropped ("+describe(xv[k])+")")
				}
			}
			for k := range yv {
				if _, ok := xv[k]; !ok {
					diffs = append(diffs, path+"."+k+": added ("+describe(yv[k])+")")
				} else {
					walk(path+"."+k, xv[k], yv[k])
				}
			}
		case []any:
			yv, ok := y.([]any)
			if !ok || len(xv) != len(yv) {
				diffs = append(diffs, path+": "+describe(x)+" vs "+describe(y))
				return
			}
			for i := range xv {
				walk(path+"["+strings.TrimSpace(describe(i))+"]", xv[i], yv[i])
			}
		default:
			if !reflect.DeepEqual(x, y) {
				diffs = append(diffs, path+": "+describe(x)+" vs "+describe(y))
			}
		}
	}
	walk(what, a, b)
	if len(diffs) > 0 {
		t.Errorf("%s differs through the gateway:\n%s", what, strings.Join(diffs, "\n"))
	}
}

func describe(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 120 {
		return string(b[:120]) + "…"
	}
	return string(b)
}

// Everything the gateway does not guard is as the upstream sent
// it. The TypeScript client lists server-everything's and server-memory's
// tools, prompts, resources and templates, and completes a prompt
// argument, directly and through oncely mcp: the raw results are the same,
// field by field (before: execution.taskSupport dropped, default
// annotation hints re-encoded, ttlMs and cacheScope added, a prompt
// argument's required: false and a completion's hasMore: false dropped).
// A long-running call's progress notifications reach the client (before:
// 3 direct, 0 through the gateway), and the upstream's sampling request
// reaches the client, whose capabilities the upstream is told (before:
// the upstream saw the gateway's, and did not offer its sampling tool).
func TestTransparencyEverything(t *testing.T) {
	t.Parallel()
	cmd := mcptest.Everything(t)
	s := newSetupFor(t, map[string]any{"upstream": map[string]any{"command": cmd}})
	plan := map[string]any{"steps": []any{
		map[string]any{"list": "tools"},
		map[string]any{"list": "prompts"},
		map[string]any{"list": "resources"},
		map[string]any{"list": "resourceTemplates"},
		map[string]any{"complete": map[string]any{"ref": map[string]any{"type": "ref/prompt", "name": "completable-prompt"},
			"argument": map[string]any{"name": "department", "value": "E"}}},
		map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 0.03, "steps": 3}, "progress": true},
		map[string]any{"name": "trigger-sampling-request", "arguments": map[string]any{"prompt": "what is six times seven?", "maxTokens": 5}},
	}}
	var direct, via, viaHTTP []json.RawMessage
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); direct = runTS(t, plan, cmd...) }()
	go func() {
		defer wg.Done()
		via = runTS(t, plan, append([]string{oncelyBinary(t)}, s.args("--run-id", "transparent")...)...)
	}()
	url := s.http(t, nil, "--run-id", "transparent")
	go func() { defer wg.Done(); viaHTTP = runTS(t, plan, "--url", url) }()
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, what := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list", "completion/complete"} {
		sameJSON(t, what, direct[i], via[i])
		sameJSON(t, what+" (HTTP)", direct[i], viaHTTP[i])
	}
	var lists struct {
		Tools []struct {
			Name      string         `json:"name"`
			Execution map[string]any `json:"execution"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(via[0], &lists); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range lists.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, " "), "trigger-sampling-request") {
		t.Errorf("the upstream did not see the client's sampling capability: %v", names)
	}
	// How many of server-everything's progress notifications arrive before
	// its answer depends on scheduling (it does not wait for them to be
	// written), directly as through the gateway: logged here, and counted
	// exactly against an upstream that sends them before its answer in
	// TestRelayProgressGoSDK (the report tool, which sends them first).
	progress := decodeTS(t, []json.RawMessage{direct[5], via[5], viaHTTP[5]})
	t.Logf("progress notifications: %d direct, %d through the gateway (%d over HTTP), of 3", len(progress[0].Progress), len(progress[1].Progress), len(progress[2].Progress))
	sampled := decodeTS(t, []json.RawMessage{direct[6], via[6], viaHTTP[6]})
	for i, r := range sampled {
		if r.IsError || r.Error != nil || !strings.Contains(r.text(), "forty-two") {
			t.Errorf("sampling (%d): %+v", i, r)
		}
	}
}

// Server-memory: its lists are the same through the gateway, a
// configured tool's included.
func TestTransparencyMemory(t *testing.T) {
	t.Parallel()
	cmd, envs := mcptest.Memory(t, tempFile(t, "memory.jsonl"))
	s := newSetupFor(t, map[string]any{
		"upstream": map[string]any{"command": cmd, "env": envs},
		"tools": map[string]any{"add_observations": map[string]any{"identity": []any{
			map[string]any{"path": "observations[*].entityName"}, map[string]any{"path": "observations[*].contents"}}}},
	})
	plan := map[string]any{"env": envs, "steps": []any{
		map[string]any{"list": "tools"}, map[string]any{"list": "prompts"}, map[string]any{"list": "resources"}, map[string]any{"list": "resourceTemplates"},
	}}
	direct := runTS(t, plan, cmd...)
	via := runTS(t, plan, append([]string{oncelyBinary(t)}, s.args("--run-id", "transparent")...)...)
	for i, what := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		sameJSON(t, what, direct[i], via[i])
	}
}

// With the go-sdk client and the purpose-built upstream: progress of a
// configured call and of a passthrough one reaches the client under
// the client's own token, and a repeat that does not run the tool sends
// none.
func TestRelayProgressGoSDK(t *testing.T) {
	t.Parallel()
	for _, tools := range []map[string]any{
		{"report": map[string]any{"identity": []any{map[string]any{"path": "steps"}}}},
		{"append_line": map[string]any{"identity": []any{map[string]any{"path": "ticket"}}}},
	} {
		s := newSetup(t, tools, nil)
		var mu sync.Mutex
		got := map[any]int{}
		cs := s.stdio(t, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got[req.Params.ProgressToken]++
				mu.Unlock()
			},
		}, nil, "--run-id", "relay")
		for _, token := range []string{"first", "again"} {
			p := &mcp.CallToolParams{Name: "report", Arguments: map[string]any{"steps": 3}}
			p.SetProgressToken(token)
			if _, err := cs.CallTool(context.Background(), p); err != nil {
				t.Fatal(err)
			}
		}
		// The go-sdk client may answer a call before it has handled the
		// notifications that came before the answer: wait for them.
		want := map[any]int{"first": 3, "again": 0}
		if tools["report"] == nil {
			want["again"] = 3 // not guarded: it runs again
		}
		waitFor(t, "the progress notifications", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return got["first"] >= want["first"] && got["again"] >= want["again"]
		})
		mu.Lock()
		if got["first"] != want["first"] || got["again"] != want["again"] || len(got) > 2 {
			t.Errorf("progress by token: %v, want %v", got, want)
		}
		mu.Unlock()
	}
}
