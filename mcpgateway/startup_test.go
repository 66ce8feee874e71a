package mcpgateway_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

// start runs oncely mcp for the setup with nothing on its standard input
// and returns its exit code and standard error.
func (s *setup) start(t *testing.T, extra ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, oncelyBinary(t), s.args(extra...)...)
	cmd.Env = env(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, stderr.String()
}

// A configured tool the upstream does not offer stops the
// gateway at start, naming the tool it may have meant; with missingTools
// "warn" it starts with a loud warning; a tool that disappears from the
// upstream's list later is an error in the log. Before, a typo (refnud)
// silently left refund unguarded: two real refunds.
func TestMissingTools(t *testing.T) {
	t.Parallel()
	tools := map[string]any{"refnud": map[string]any{"identity": []any{map[string]any{"path": "order"}}}}
	code, stderr := newSetup(t, tools, nil).start(t, "--run-id", "typo")
	if code != 2 || !strings.Contains(stderr, `the upstream offers no tool "refnud" (did you mean refund?)`) {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}

	warn := newSetup(t, tools, map[string]any{"missingTools": "warn"})
	_, log := warn.stdioLog(t, nil, nil, "--run-id", "typo")
	waitFor(t, "the warning", func() bool {
		return strings.Contains(log.String(), "WARNING: a configured tool is not offered by the upstream")
	})

	// The upstream stops offering a configured tool.
	s := newSetup(t, map[string]any{"refund": map[string]any{"identity": []any{map[string]any{"path": "order"}}}}, nil)
	cs, log := s.stdioLog(t, nil, nil, "--run-id", "retired")
	if res := callOK(t, cs, "retire", nil); res.IsError {
		t.Fatalf("retire: %q", allText(res))
	}
	waitFor(t, "the gateway to log the retired tool", func() bool {
		return strings.Contains(log.String(), "no longer fit the configuration") && strings.Contains(log.String(), `no tool \"refund\"`)
	})
}

// Identity and validated paths are checked against the upstream
// tool's input schema when the gateway starts: a path to an array, or to
// a member the schema does not have, stops it with the reason; [*] takes
// every element of an array. Before, such a configuration was accepted
// and every call refused with a text that blamed the model ("needs
// observations.0.contents to run safely").
func TestPathsCheckedAtStart(t *testing.T) {
	t.Parallel()
	cmd, envs := mcptest.Memory(t, tempFile(t, "memory.jsonl"))
	for _, tc := range []struct{ path, want string }{
		{"observations.0.contents", "observations.0.contents is an array in the upstream's input schema"},
		{"observation.0.entityName", `the arguments object has no member "observation" (it has observations)`},
		{"observations[*].entityName.first", `observations[*].entityName is not an object`},
		{"observations[*]", "observations[*] is an object in the upstream's input schema; name one of its members"},
	} {
		s := newSetupFor(t, map[string]any{
			"upstream": map[string]any{"command": cmd, "env": envs},
			"tools":    map[string]any{"add_observations": map[string]any{"identity": []any{map[string]any{"path": tc.path}}}},
		})
		code, stderr := s.start(t, "--run-id", "paths")
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr:\n%s\nwant %q", tc.path, code, stderr, tc.want)
		}
	}
}

// An identity over every element of an array. Two observations
// in one call are one action; the same call again is a repeat; another
// element is another action.
func TestEveryElement(t *testing.T) {
	t.Parallel()
	mem := tempFile(t, "memory.jsonl")
	cmd, envs := mcptest.Memory(t, mem)
	s := newSetupFor(t, map[string]any{
		"upstream": map[string]any{"command": cmd, "env": envs},
		"tools": map[string]any{"add_observations": map[string]any{"identity": []any{
			map[string]any{"path": "observations[*].entityName", "norm": "trimmed"},
			map[string]any{"path": "observations[*].contents", "norm": "trimmed"},
		}}},
	})
	cs := s.stdio(t, nil, nil, "--run-id", "every")
	callOK(t, cs, "create_entities", map[string]any{"entities": []any{
		map[string]any{"name": "ed", "entityType": "customer", "observations": []any{}},
		map[string]any{"name": "flo", "entityType": "customer", "observations": []any{}},
	}})
	two := map[string]any{"observations": []any{
		map[string]any{"entityName": "ed", "contents": []any{"asked for a refund"}},
		map[string]any{"entityName": "flo", "contents": []any{"asked for a refund", "is a VIP"}},
	}}
	if res := callOK(t, cs, "add_observations", two); outcome(res) != "executed" {
		t.Fatalf("first: %s %q", outcome(res), allText(res))
	}
	if res := callOK(t, cs, "add_observations", two); outcome(res) != "already done" {
		t.Fatalf("repeat: %s %q", outcome(res), allText(res))
	}
	other := map[string]any{"observations": []any{
		map[string]any{"entityName": "ed", "contents": []any{"asked for a refund"}},
		map[string]any{"entityName": "flo", "contents": []any{"moved to Lyon"}},
	}}
	if res := callOK(t, cs, "add_observations", other); outcome(res) != "executed" {
		t.Fatalf("another element: %s %q", outcome(res), allText(res))
	}
	empty := map[string]any{"observations": []any{}}
	if res := callOK(t, cs, "add_observations", empty); outcome(res) != "invalid input" || !strings.Contains(allText(res), `needs "observations[*].entityName" to run safely (empty)`) {
		t.Fatalf("no element: %s %q", outcome(res), allText(res))
	}
	if obs := observations(t, mem, "flo"); len(obs) != 3 {
		t.Fatalf("flo's observations: %q", obs)
	}
}

// A passthrough call is bounded by callTimeout (before, it had
// none), and oncely mcp --lease sets the claim's lease (before, it could
// not be set).
func TestPassthroughTimeoutAndLease(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{"refund": map[string]any{"identity": []any{map[string]any{"path": "order"}}}},
		map[string]any{"callTimeout": "300ms"})
	cs := s.stdio(t, nil, nil, "--run-id", "timeout")
	// slow is not configured: it passes through, and the upstream holds
	// it until released, which the test never does.
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"id": "never"}})
	if err == nil || !strings.Contains(err.Error(), "callTimeout") {
		t.Fatalf("a passthrough call past callTimeout: %v", err)
	}

	l := slowConfig(t, nil)
	lcs := l.stdio(t, nil, nil, "--run-id", "lease", "--lease", "7m")
	done := make(chan error, 1)
	go func() {
		_, err := lcs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"id": "l"}})
		done <- err
	}()
	waitFor(t, "the slow call to reach the upstream", func() bool { return countPrefix(journal(t, l.dir), "slow-start l") == 1 })
	store, err := ledgersqlite.Open(context.Background(), l.dir+"/ledger.db", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, err := store.List(context.Background(), ledger.Filter{State: ledger.StatePending})
	if err != nil || len(recs) != 1 {
		t.Fatalf("pending records: %v, %v", recs, err)
	}
	if left := time.Until(recs[0].LeaseUntil); left < 5*time.Minute {
		t.Errorf("the lease ends in %s; --lease 7m", left)
	}
	l.release(t, "l")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
