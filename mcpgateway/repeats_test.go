package mcpgateway_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// Two identical calls at once do one effect, and the one that
// did not run the tool is told so ("already done"), not "executed" as
// the other. Before, both were told executed, so a host counting outcomes
// counted two.
func TestMergedDuplicates(t *testing.T) {
	t.Parallel()
	s := slowConfig(t, nil)
	call := tsCall("slow", map[string]any{"id": "m"}, nil)
	wait := startTS(t, map[string]any{"steps": []any{map[string]any{"parallel": []any{call, call}}}},
		append([]string{oncelyBinary(t)}, s.args("--run-id", "merge")...)...)
	waitFor(t, "the first call to reach the upstream", func() bool { return countPrefix(journal(t, s.dir), "slow-start m") == 1 })
	s.release(t, "m")
	res := decodeTS(t, wait())
	got := []string{res[0].outcome(), res[1].outcome()}
	if !(got[0] == "executed" && got[1] == "already done" || got[0] == "already done" && got[1] == "executed") {
		t.Fatalf("outcomes %q, want one executed and one already done:\n%+v", got, res)
	}
	for _, r := range res {
		if r.IsError {
			t.Errorf("an error: %+v", r)
		}
		if r.outcome() == "already done" && !strings.Contains(r.text(), "Already done earlier in this run: slow: slow done m. Do not repeat it.") {
			t.Errorf("the merged call's text: %q", r.text())
		}
	}
	if j := journal(t, s.dir); countPrefix(j, "slow m") != 1 || countPrefix(j, "slow-start") != 1 {
		t.Fatalf("journal: %q", j)
	}
}

// Every result of a tool that declares an outputSchema conforms
// to it, as the TypeScript client checks: a repeat without replay carries
// the first call's structuredContent; a repeat whose first result was
// not kept (here: settled by an operator) is an error result saying it
// was done, which needs none. Before, such repeats carried no
// structuredContent and the client threw -32600.
func TestOutputSchemaRepeats(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{
		"create_ticket": map[string]any{"identity": []any{map[string]any{"path": "subject", "norm": "trimmed"}}},
	}, nil)
	gateway := append([]string{oncelyBinary(t)}, s.args("--run-id", "tickets")...)
	res := runTSCalls(t, map[string]any{"steps": []any{
		tsCall("create_ticket", map[string]any{"subject": "printer on fire"}, nil),
		tsCall("create_ticket", map[string]any{"subject": "printer on fire ", "body": "again"}, nil),
		map[string]any{"parallel": []any{
			tsCall("create_ticket", map[string]any{"subject": "coffee machine"}, nil),
			tsCall("create_ticket", map[string]any{"subject": "coffee machine"}, nil),
		}},
		tsCall("create_ticket", map[string]any{"subject": "lost badge", "fail": true}, nil),
	}}, gateway...)
	for i, r := range res {
		if r.Error != nil {
			t.Fatalf("call %d: the TypeScript client refused the result: %+v", i, r.Error)
		}
	}
	first, again := res[0], res[1]
	if first.outcome() != "executed" || first.StructuredContent["id"] != "T-1" {
		t.Fatalf("first: %+v", first)
	}
	if again.outcome() != "already done" || again.IsError || again.StructuredContent["id"] != "T-1" {
		t.Fatalf("repeat without replay: %+v", again)
	}
	for _, r := range res[2:4] {
		if r.IsError || r.StructuredContent["id"] != "T-2" {
			t.Fatalf("merged duplicates: %+v", res[2:4])
		}
	}
	lost := res[4]
	if lost.outcome() != "uncertain" || !lost.IsError {
		t.Fatalf("an error after acting: %+v", lost)
	}

	// An operator settles the uncertain ticket as done: its result was
	// never kept.
	key, _ := lost.Meta["oncely/key"].(string)
	store, err := ledgersqlite.Open(context.Background(), filepath.Join(s.dir, "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.Resolve(context.Background(), store, key, ledger.Resolution{Done: true, Summary: "ticket T-3 exists", By: "operator"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	_ = store.Close()
	res = runTSCalls(t, map[string]any{"steps": []any{tsCall("create_ticket", map[string]any{"subject": "lost badge"}, nil)}}, gateway...)
	if r := res[0]; r.Error != nil || r.outcome() != "already done" || !r.IsError || !strings.Contains(r.text(), "Already done earlier in this run: ticket T-3 exists") {
		t.Fatalf("a repeat whose result was not kept: %+v", r)
	}

}
