package oncelyclaude

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

func noop(context.Context, client.Invocation) (client.Effect, error) {
	return client.Effect{Summary: "ok"}, nil
}

func TestToolParamsRequiresIdentity(t *testing.T) {
	t.Parallel()
	props := map[string]any{
		"orderId":  map[string]any{"type": "string"},
		"customer": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
		"note":     map[string]any{"type": "string"},
	}
	params, err := ToolParams(Tool{
		Tool:        client.Tool{Name: "refund", Run: noop, Identity: []client.Field{{Path: "orderId"}, {Path: "customer.id"}}},
		Description: "Refund.", Properties: props, Required: []string{"note", "orderId"},
	})
	if err != nil {
		t.Fatal(err)
	}
	schema := params[0].OfTool.InputSchema
	if want := []string{"note", "orderId", "customer"}; !reflect.DeepEqual(schema.Required, want) {
		t.Errorf("required: %v, want %v", schema.Required, want)
	}
	nested := schema.Properties.(map[string]any)["customer"].(map[string]any)["required"]
	if !reflect.DeepEqual(nested, []string{"id"}) {
		t.Errorf("nested required: %v", nested)
	}
	if _, ok := props["customer"].(map[string]any)["required"]; ok {
		t.Error("the caller's properties were changed")
	}
	if params[0].OfTool.Description.Value != "Refund." {
		t.Errorf("description: %+v", params[0].OfTool.Description)
	}
	if _, err := json.Marshal(params); err != nil {
		t.Fatal(err)
	}
}

func TestToolParamsUndeclaredIdentity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		path  string
		props map[string]any
	}{
		{"missing", "orderId", map[string]any{"note": map[string]any{"type": "string"}}},
		{"nested missing", "customer.id", map[string]any{"customer": map[string]any{"type": "object"}}},
		{"nested undeclared", "customer.id", map[string]any{"customer": map[string]any{"type": "object", "properties": map[string]any{}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exec := client.New(ledgermem.New(nil), nil)
			_, err := Register(exec, Tool{Tool: client.Tool{Name: "t", Run: noop, Identity: []client.Field{{Path: tc.path}}}, Properties: tc.props})
			if !errors.Is(err, ErrSchema) {
				t.Fatalf("err = %v, want ErrSchema", err)
			}
			res, _ := exec.Execute(context.Background(), "r", client.Call{Tool: "t", Input: json.RawMessage(`{"orderId": 1}`)})
			if res.Outcome != client.InvalidInput {
				t.Errorf("the tool was registered despite the error: %v", res.Outcome)
			}
		})
	}
}

// failingStore refuses every claim: the ledger is unreachable.
type failingStore struct{ ledger.Store }

func (failingStore) Claim(context.Context, ledger.ClaimParams) (ledger.ClaimResult, error) {
	return ledger.ClaimResult{}, fmt.Errorf("%w: down", ledger.ErrUnavailable)
}

func toolUse(t *testing.T, blocks ...string) *anthropic.Message {
	t.Helper()
	var msg anthropic.Message
	raw := `{"id": "msg", "type": "message", "role": "assistant", "stop_reason": "tool_use", "content": [`
	for i, b := range blocks {
		if i > 0 {
			raw += ","
		}
		raw += b
	}
	if err := json.Unmarshal([]byte(raw+"]}"), &msg); err != nil {
		t.Fatal(err)
	}
	return &msg
}

// An unreachable ledger: the call does not run, its tool_result says so
// truthfully (is_error), and the error is returned beside the blocks.
func TestResultsLedgerDown(t *testing.T) {
	t.Parallel()
	ran := false
	exec := client.New(failingStore{}, nil)
	if err := exec.Register(client.Tool{Name: "t", Identity: []client.Field{{Path: "id"}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			ran = true
			return client.Effect{}, nil
		}}); err != nil {
		t.Fatal(err)
	}
	blocks, calls, err := Results(context.Background(), exec, "r", toolUse(t,
		`{"type": "text", "text": "calling"}`,
		`{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"id": 1}}`,
		`{"type": "tool_use", "id": "toolu_2", "name": "unknown", "input": {}}`))
	if err == nil || !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("err = %v, want the ledger's", err)
	}
	if ran {
		t.Fatal("the tool ran without a claim")
	}
	if len(blocks) != 2 || len(calls) != 2 {
		t.Fatalf("blocks: %d, calls: %d", len(blocks), len(calls))
	}
	for i, b := range blocks {
		tr := b.OfToolResult
		if tr == nil || tr.ToolUseID != calls[i].ToolUse.ID || !tr.IsError.Value || calls[i].Result.Text == "" {
			t.Errorf("block %d: %+v", i, tr)
		}
	}
}

// scripted answers Messages.New from a list, recording the requests.
type scripted struct {
	answers []string
	got     []anthropic.MessageNewParams
}

func (s *scripted) New(_ context.Context, p anthropic.MessageNewParams, _ ...option.RequestOption) (*anthropic.Message, error) {
	s.got = append(s.got, p)
	if len(s.got) > len(s.answers) {
		return nil, errors.New("beyond the script")
	}
	var m anthropic.Message
	err := json.Unmarshal([]byte(s.answers[len(s.got)-1]), &m)
	return &m, err
}

const callT = `{"id": "m", "type": "message", "role": "assistant", "stop_reason": "tool_use",
	"content": [{"type": "tool_use", "id": "toolu_x", "name": "t", "input": {"id": 1}}]}`

func TestRunMaxTurnsAndHook(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(client.Tool{Name: "t", Identity: []client.Field{{Path: "id"}}, Run: noop}); err != nil {
		t.Fatal(err)
	}
	s := &scripted{answers: []string{callT, callT, callT}}
	conv, err := Run(context.Background(), s, exec, "r", anthropic.MessageNewParams{}, &Config{MaxTurns: 2})
	if !errors.Is(err, ErrMaxTurns) || conv.Turns != 2 || len(s.got) != 2 {
		t.Fatalf("err = %v, turns %d, requests %d", err, conv.Turns, len(s.got))
	}
	if len(conv.Messages) != 4 || len(s.got[1].Messages) != 2 {
		t.Errorf("messages: %d, second request carried %d", len(conv.Messages), len(s.got[1].Messages))
	}

	stop := errors.New("stop")
	s = &scripted{answers: []string{callT, callT}}
	var seen []Turn
	conv, err = Run(context.Background(), s, exec, "r", anthropic.MessageNewParams{}, &Config{OnTurn: func(_ context.Context, tn Turn) error {
		seen = append(seen, tn)
		return stop
	}})
	if !errors.Is(err, stop) || len(seen) != 1 || conv.Turns != 1 {
		t.Fatalf("err = %v, hook calls %d", err, len(seen))
	}
	if seen[0].Calls[0].Result.Outcome != client.AlreadyDone {
		t.Errorf("the second run's call: %v", seen[0].Calls[0].Result.Outcome)
	}
}

// The calls of one answer run concurrently: each tool run waits until the
// other has started.
func TestResultsConcurrent(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	started := make(chan string, 2)
	release := make(chan struct{})
	if err := exec.Register(client.Tool{Name: "t", Identity: []client.Field{{Path: "id"}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			started <- inv.CallID
			select {
			case <-release:
				return client.Effect{Summary: inv.CallID}, nil
			case <-ctx.Done():
				return client.Effect{}, client.Definite(ctx.Err())
			}
		}}); err != nil {
		t.Fatal(err)
	}
	go func() {
		<-started
		<-started // both runs are in flight at once
		close(release)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // fails a sequential run, never a slow one
	defer cancel()
	_, calls, err := Results(ctx, exec, "r", toolUse(t,
		`{"type": "tool_use", "id": "toolu_1", "name": "t", "input": {"id": 1}}`,
		`{"type": "tool_use", "id": "toolu_2", "name": "t", "input": {"id": 2}}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range calls {
		if c.Result.Outcome != client.Executed || c.Result.Summary != c.ToolUse.ID {
			t.Errorf("call %d: %v %q", i, c.Result.Outcome, c.Result.Text)
		}
	}
}
