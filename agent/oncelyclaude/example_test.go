package oncelyclaude_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/oncely/oncely/agent/oncelyclaude"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// The model calls send_reply in two answers, the second time with a new
// tool_use id and a rephrased text: one reply is sent, and both tool_result
// blocks tell the truth.
func ExampleResults() {
	exec := client.New(ledgermem.New(nil), nil)
	sent := 0
	tools, err := oncelyclaude.Register(exec, oncelyclaude.Tool{
		Tool: client.Tool{
			Name:     "send_reply",
			Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
			Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				sent++ // send the reply here, passing inv.DownstreamKey to the provider
				return client.Effect{Summary: "reply sent on ticket 42"}, nil
			},
		},
		Description: "Reply to a support ticket.",
		Properties: map[string]any{
			"ticketId": map[string]any{"type": "string"},
			"text":     map[string]any{"type": "string"},
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("required:", tools[0].OfTool.InputSchema.Required)

	for i, input := range []string{
		`{"ticketId": 42, "text": "Your refund is on its way."}`,
		`{"ticketId": "42", "text": "We have refunded you!"}`, // the model asks again, rephrased
	} {
		var msg anthropic.Message // as returned by client.Messages.New
		if err := json.Unmarshal(fmt.Appendf(nil, `{"id": "msg_%d", "type": "message", "role": "assistant",
			"stop_reason": "tool_use", "content": [{"type": "tool_use", "id": "toolu_%d", "name": "send_reply", "input": %s}]}`,
			i, i, input), &msg); err != nil {
			panic(err)
		}
		blocks, calls, err := oncelyclaude.Results(context.Background(), exec, "run-1", &msg)
		if err != nil {
			panic(err)
		}
		next := anthropic.NewUserMessage(blocks...) // append to the conversation
		fmt.Println(next.OfUser.Content[0].OfToolResult.ToolUseID, calls[0].Result.Text)
	}
	fmt.Println("replies sent:", sent)
	// Output:
	// required: [ticketId]
	// toolu_0 Done: reply sent on ticket 42
	// toolu_1 Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// replies sent: 1
}

// scriptedModel stands in for the Messages API in this example: it calls
// send_reply, then asks again with a new tool_use id, then answers.
type scriptedModel struct{ turn int }

func (m *scriptedModel) New(_ context.Context, p anthropic.MessageNewParams, _ ...option.RequestOption) (*anthropic.Message, error) {
	m.turn++
	answer := `{"type": "text", "text": "Replied."}`
	stop := "end_turn"
	if m.turn < 3 {
		answer = fmt.Sprintf(`{"type": "tool_use", "id": "toolu_%d", "name": "send_reply", "input": {"ticketId": 42}}`, m.turn)
		stop = "tool_use"
	}
	var msg anthropic.Message
	err := json.Unmarshal(fmt.Appendf(nil, `{"id": "msg_%d", "type": "message", "role": "assistant", "stop_reason": %q, "content": [%s]}`, m.turn, stop, answer), &msg)
	return &msg, err
}

// Run drives the conversation until the model stops calling tools; with the
// real API, pass &client.Messages of anthropic.NewClient().
func ExampleRun() {
	exec := client.New(ledgermem.New(nil), nil)
	tools, err := oncelyclaude.Register(exec, oncelyclaude.Tool{
		Tool: client.Tool{
			Name:     "send_reply",
			Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
			Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				return client.Effect{Summary: "reply sent on ticket 42"}, nil
			},
		},
		Properties: map[string]any{"ticketId": map[string]any{"type": "string"}},
	})
	if err != nil {
		panic(err)
	}
	params := anthropic.MessageNewParams{
		Model: anthropic.ModelClaudeSonnet4_5, MaxTokens: 1024, Tools: tools,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Reply on ticket 42."))},
	}
	conv, err := oncelyclaude.Run(context.Background(), &scriptedModel{}, exec, "run-1", params, &oncelyclaude.Config{
		OnTurn: func(_ context.Context, t oncelyclaude.Turn) error {
			for _, c := range t.Calls {
				fmt.Printf("turn %d: %s\n", t.N, c.Result.Text)
			}
			return nil
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(conv.Turns, "turns,", len(conv.Messages), "messages:", conv.Final.Content[0].Text)
	// Output:
	// turn 1: Done: reply sent on ticket 42
	// turn 2: Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// 3 turns, 6 messages: Replied.
}
