package oncelyeino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/mail"
)

// scriptedModel is an in-process Eino chat model that answers from a
// script (a nil message is an error) and records what it was sent.
type scriptedModel struct {
	mu     sync.Mutex
	script []*schema.Message
	inputs [][]*schema.Message
}

var errModel = errors.New("scripted model failure")

func (m *scriptedModel) Generate(_ context.Context, in []*schema.Message, _ ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inputs = append(m.inputs, in)
	n := len(m.inputs) - 1
	if n >= len(m.script) || m.script[n] == nil {
		return nil, errModel
	}
	return m.script[n], nil
}

func (m *scriptedModel) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m *scriptedModel) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) {
	return m, nil
}

func (m *scriptedModel) sent() [][]*schema.Message {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([][]*schema.Message(nil), m.inputs...)
}

func toolCall(id, args string) *schema.Message {
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function", Function: schema.FunctionCall{Name: "send_reply", Arguments: args}}})
}

// The model's first call and its repeat: a new call id, the ticket as a
// number instead of a string, the reply rephrased.
const (
	argsFirst  = `{"ticketId": "42", "to": "ann@example.com", "text": "Sorry, a new one is on its way."}`
	argsRepeat = `{"ticketId": 42, "to": "ann@example.com", "text": "Apologies! A replacement ships today."}`
)

// shop is the mail API (a fake with no idempotency) and the send_reply
// tool on it, identified by its ticket.
type shop struct {
	mail *mailfake.Server
	api  *mail.Client
}

func newShop(t *testing.T) *shop {
	t.Helper()
	srv := mailfake.NewServer(nil)
	t.Cleanup(srv.Close)
	return &shop{mail: srv, api: mail.New(srv.URL, nil)}
}

type replyInput struct {
	TicketID string `json:"ticketId"`
	To       string `json:"to"`
	Text     string `json:"text"`
}

func (s *shop) tool() Tool {
	str := map[string]any{"type": "string"}
	return Tool{
		Tool: client.Tool{
			Name:     "send_reply",
			Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
			Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				var in replyInput
				if err := inv.Bind(&in); err != nil {
					return client.Effect{}, err
				}
				m, err := s.api.Send(ctx, inv.DownstreamKey, mail.Message{From: "support@shop.example", To: in.To, Subject: "Re: ticket " + in.TicketID, Text: in.Text})
				if err != nil {
					return client.Effect{}, err
				}
				return client.Effect{Summary: m.Summary(), Ref: m.ID}, nil
			},
		},
		Description: "Email the customer a reply on a support ticket.",
		Properties:  map[string]any{"ticketId": str, "to": str, "text": str},
		Required:    []string{"to", "text"},
	}
}

func (s *shop) sent() int { return len(s.mail.Journal()) }

// tools returns send_reply through oncely, or bare: the same tool
// without oncely, which has no key to give the email API (each call's
// reference is new, so the API's search finds no earlier message).
func (s *shop) tools(t *testing.T, guarded bool, calls *[]Call) []tool.BaseTool {
	t.Helper()
	if !guarded {
		return []tool.BaseTool{bareTool{s}}
	}
	var mu sync.Mutex
	tools, err := Register(client.New(ledgermem.New(nil), nil), &Config{OnCall: func(_ context.Context, c Call) {
		mu.Lock()
		defer mu.Unlock()
		*calls = append(*calls, c)
	}}, s.tool())
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

type bareTool struct{ s *shop }

var bareSends atomic.Int64

func (b bareTool) Info(context.Context) (*schema.ToolInfo, error) {
	return &schema.ToolInfo{Name: "send_reply", Desc: "Email the customer a reply on a support ticket."}, nil
}

func (b bareTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	var in struct {
		TicketID any    `json:"ticketId"`
		To       string `json:"to"`
		Text     string `json:"text"`
	}
	if err := jsonUnmarshal(args, &in); err != nil {
		return "", err
	}
	m, err := b.s.api.Send(ctx, fmt.Sprintf("bare-%d", bareSends.Add(1)), mail.Message{From: "support@shop.example", To: in.To, Subject: fmt.Sprint("Re: ticket ", in.TicketID), Text: in.Text})
	if err != nil {
		return "", err
	}
	return m.Summary(), nil
}

// toolMessage returns the content of the tool message for callID among
// msgs.
func toolMessage(t *testing.T, msgs []*schema.Message, callID string) string {
	t.Helper()
	for _, m := range msgs {
		if m.Role == schema.Tool && m.ToolCallID == callID {
			return m.Content
		}
	}
	t.Fatalf("no tool message for %s", callID)
	return ""
}

func TestRegisterRequiresIdentity(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	tools, err := Register(client.New(ledgermem.New(nil), nil), nil, s.tool())
	if err != nil {
		t.Fatal(err)
	}
	info, err := tools[0].Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	js, err := info.ToJSONSchema()
	if err != nil || info.Name != "send_reply" || !strings.Contains(strings.Join(js.Required, ","), "ticketId") {
		t.Fatalf("info %+v, schema %+v, %v", info, js, err)
	}
	exec := client.New(ledgermem.New(nil), nil)
	bad := s.tool()
	bad.Identity = []client.Field{{Path: "missing"}}
	if _, err := Register(exec, nil, bad); !errors.Is(err, ErrSchema) {
		t.Fatalf("err = %v, want ErrSchema", err)
	}
	if res, _ := exec.Execute(context.Background(), "r", client.Call{Tool: "send_reply", Input: []byte(`{"missing": 1}`)}); res.Outcome != client.InvalidInput {
		t.Errorf("the tool was registered despite the error: %v", res.Outcome)
	}
	// A call without a run id does nothing.
	if _, err := tools[0].(tool.InvokableTool).InvokableRun(context.Background(), argsFirst); !errors.Is(err, ErrNoRunID) || s.sent() != 0 {
		t.Fatalf("without a run id: %v, %d emails", err, s.sent())
	}
}

// The ReAct agent's retry: the model asks for send_reply, the tool runs,
// the next model call fails and the application retries the agent with
// the same input and run id; the model calls send_reply again with a new
// call id and drifted arguments. Through oncely one email is sent and
// the model is told the repeat was already done; without oncely two.
func TestReactAgentRetry(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		s := newShop(t)
		m := &scriptedModel{script: []*schema.Message{
			toolCall("call_1", argsFirst), nil, // the agent fails after the tool ran
			toolCall("call_2", argsRepeat), schema.AssistantMessage("The customer has their reply.", nil),
		}}
		var calls []Call
		ctx := WithRunID(context.Background(), "conversation-42")
		agent, err := react.NewAgent(ctx, &react.AgentConfig{ToolCallingModel: m, ToolsConfig: compose.ToolsNodeConfig{Tools: s.tools(t, guarded, &calls)}})
		if err != nil {
			t.Fatal(err)
		}
		input := []*schema.Message{schema.UserMessage("Reply to ticket 42: the parcel arrived broken.")}
		if _, err := agent.Generate(ctx, input); !errors.Is(err, errModel) {
			t.Fatalf("first attempt: %v", err)
		}
		out, err := agent.Generate(ctx, input) // the application's retry
		if err != nil {
			t.Fatal(err)
		}
		if out.Content != "The customer has their reply." {
			t.Fatalf("answer: %+v", out)
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want the 2 the retry shows", s.sent())
			}
			continue
		}
		if s.sent() != 1 {
			t.Fatalf("with oncely: %d emails, want 1", s.sent())
		}
		if len(calls) != 2 || calls[0].ID != "call_1" || calls[1].ID != "call_2" || calls[0].Result.Outcome != client.Executed || calls[1].Result.Outcome != client.AlreadyDone {
			t.Fatalf("calls: %+v", calls)
		}
		told := toolMessage(t, m.sent()[3], "call_2")
		if told != calls[1].Result.Text || !strings.Contains(told, s.mail.Journal()[0].ID) {
			t.Errorf("the model was told %q", told)
		}
	}
}

// checkpoints is an in-memory compose.CheckPointStore.
type checkpoints struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (c *checkpoints) Get(_ context.Context, id string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[id]
	return b, ok, nil
}

func (c *checkpoints) Set(_ context.Context, id string, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[id] = b
	return nil
}

// A graph (model, tools, a step after them) checkpointed before its tools
// node, for a human to approve the call. The approved run sends the email
// and fails in the step after; the application runs the graph again from
// the same checkpoint, so the tools node runs the same call again. Through
// oncely one email is sent and the re-run is told it was already done;
// without oncely two.
func TestGraphRerunFromCheckpoint(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		s := newShop(t)
		ctx := WithRunID(context.Background(), "checkpoint-7")
		m := &scriptedModel{script: []*schema.Message{toolCall("call_1", argsFirst)}}
		var calls []Call
		tn, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: s.tools(t, guarded, &calls)})
		if err != nil {
			t.Fatal(err)
		}
		var afterRuns int
		var told []*schema.Message
		g := compose.NewGraph[[]*schema.Message, []*schema.Message]()
		steps := []error{
			g.AddChatModelNode("model", m),
			g.AddToolsNode("tools", tn),
			g.AddLambdaNode("after", compose.InvokableLambda(func(_ context.Context, in []*schema.Message) ([]*schema.Message, error) {
				afterRuns++
				if afterRuns == 1 {
					return nil, errors.New("the step after the tools failed")
				}
				told = in
				return in, nil
			})),
			g.AddEdge(compose.START, "model"), g.AddEdge("model", "tools"), g.AddEdge("tools", "after"), g.AddEdge("after", compose.END),
		}
		if err := errors.Join(steps...); err != nil {
			t.Fatal(err)
		}
		r, err := g.Compile(ctx, compose.WithCheckPointStore(&checkpoints{m: map[string][]byte{}}), compose.WithInterruptBeforeNodes([]string{"tools"}))
		if err != nil {
			t.Fatal(err)
		}
		input := []*schema.Message{schema.UserMessage("Reply to ticket 42: the parcel arrived broken.")}
		cp := compose.WithCheckPointID("checkpoint-7")
		if _, err := r.Invoke(ctx, input, cp); err == nil {
			t.Fatal("no interrupt before the tools node")
		} else if _, ok := compose.ExtractInterruptInfo(err); !ok {
			t.Fatalf("first run: %v", err)
		}
		if s.sent() != 0 {
			t.Fatalf("%d emails before approval", s.sent())
		}
		if _, err := r.Invoke(ctx, input, cp); err == nil || afterRuns != 1 {
			t.Fatalf("approved run: %v, step after ran %d times", err, afterRuns)
		}
		if _, err := r.Invoke(ctx, input, cp); err != nil { // the re-run from the checkpoint
			t.Fatal(err)
		}
		if len(m.sent()) != 1 {
			t.Fatalf("the model ran %d times: the re-run did not resume from the checkpoint", len(m.sent()))
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want the 2 the re-run shows", s.sent())
			}
			continue
		}
		if s.sent() != 1 {
			t.Fatalf("with oncely: %d emails, want 1", s.sent())
		}
		if len(calls) != 2 || calls[1].ID != "call_1" || calls[1].Result.Outcome != client.AlreadyDone {
			t.Fatalf("calls: %+v", calls)
		}
		if got := toolMessage(t, told, "call_1"); got != calls[1].Result.Text || !strings.Contains(got, s.mail.Journal()[0].ID) {
			t.Errorf("the graph carried %q", got)
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// Two identical tool calls in one model answer, run by Eino's ToolsNode
// (in parallel): one email, and the second call is told "Already done",
// not "Done" twice. The mail API answers slowly so that the two calls
// overlap (merged in the executor); if they do not, the second finds the
// done record, and the answer is the same.
func TestTwoIdenticalCallsInOneAnswer(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	s.mail.Faults.Add(fault.Rule{Route: "POST /v1/messages", Action: fault.Delay, Delay: 300 * time.Millisecond})
	var calls []Call
	ctx := WithRunID(context.Background(), "run-two-calls")
	node, err := compose.NewToolNode(ctx, &compose.ToolsNodeConfig{Tools: s.tools(t, true, &calls)})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id string) schema.ToolCall {
		return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: "send_reply", Arguments: argsFirst}}
	}
	out, err := node.Invoke(ctx, schema.AssistantMessage("", []schema.ToolCall{call("call_a"), call("call_b")}))
	if err != nil {
		t.Fatal(err)
	}
	if s.sent() != 1 || len(out) != 2 {
		t.Fatalf("%d emails, %d tool messages; want 1 and 2", s.sent(), len(out))
	}
	var done, already int
	for _, m := range out {
		switch {
		case strings.HasPrefix(m.Content, "Done"):
			done++
		case strings.HasPrefix(m.Content, "Already done"):
			already++
		}
	}
	if done != 1 || already != 1 {
		t.Fatalf("told %q and %q; want one Done and one Already done", out[0].Content, out[1].Content)
	}
	ids := map[string]bool{}
	for _, c := range calls {
		ids[c.ID] = true
	}
	if !ids["call_a"] || !ids["call_b"] {
		t.Errorf("the executor was given the call ids %v, want call_a and call_b", ids)
	}
}
