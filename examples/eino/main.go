// Command eino is an Eino ReAct agent whose send_reply tool, an email API
// with no idempotency, runs through oncely (agent/oncelyeino). The model asks
// for the reply; the agent's next model call fails, and the application
// retries the agent, whose model asks again with a new tool call id and
// rephrased arguments. The reply is sent once and the model is told so.
//
// It runs offline: the chat model is an in-process script and the email
// API is the bundled fake:
//
//	go run ./examples/eino
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"

	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	"github.com/oncely/oncely/agent/oncelyeino"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/mail"
)

func main() {
	if _, err := Run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func call(id, args string) *schema.Message {
	return schema.AssistantMessage("", []schema.ToolCall{{ID: id, Type: "function", Function: schema.FunctionCall{Name: "send_reply", Arguments: args}}})
}

// scripted is the chat model: a call, a failure, the same call again (a
// new id, the ticket as a number, the reply rephrased), the answer.
type scripted struct {
	mu sync.Mutex
	n  int
}

var errUnavailable = errors.New("model unavailable")

func (m *scripted) Generate(context.Context, []*schema.Message, ...model.Option) (*schema.Message, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	switch m.n {
	case 1:
		return call("call_1", `{"ticketId": "42", "to": "ann@example.com", "text": "Sorry, a new one is on its way."}`), nil
	case 3:
		return call("call_2", `{"ticketId": 42, "to": "ann@example.com", "text": "Apologies! A replacement ships today."}`), nil
	case 4:
		return schema.AssistantMessage("Done: the customer has their reply.", nil), nil
	}
	return nil, errUnavailable
}

func (m *scripted) Stream(ctx context.Context, in []*schema.Message, opts ...model.Option) (*schema.StreamReader[*schema.Message], error) {
	msg, err := m.Generate(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return schema.StreamReaderFromArray([]*schema.Message{msg}), nil
}

func (m *scripted) WithTools([]*schema.ToolInfo) (model.ToolCallingChatModel, error) { return m, nil }

// printCall prints a tool call and what the model was told.
func printCall(out io.Writer) func(context.Context, oncelyeino.Call) {
	return func(_ context.Context, c oncelyeino.Call) {
		fmt.Fprintf(out, "%s %s(%s)\n  -> %s: %s\n", c.ID, c.Name, c.Arguments, c.Result.Outcome, c.Result.Text)
	}
}

// Run runs the agent and its retry, printing each tool call and what the
// model was told, and returns the number of emails the email API sent.
func Run(ctx context.Context, out io.Writer) (int, error) {
	mailAPI := mailfake.NewServer(nil)
	defer mailAPI.Close()
	mailer := mail.New(mailAPI.URL, nil)

	sendReply := oncelyeino.Tool{
		Tool: client.Tool{
			Name:     "send_reply",
			Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
			Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				var in struct {
					TicketID string `json:"ticketId"`
					To       string `json:"to"`
					Text     string `json:"text"`
				}
				if err := inv.Bind(&in); err != nil {
					return client.Effect{}, err
				}
				m, err := mailer.Send(ctx, inv.DownstreamKey, mail.Message{
					From: "support@shop.example", To: in.To, Subject: "Re: ticket " + in.TicketID, Text: in.Text,
				})
				if err != nil {
					return client.Effect{}, err
				}
				return client.Effect{Summary: m.Summary(), Ref: m.ID}, nil
			},
		},
		Description: "Email the customer a reply on a support ticket.",
		Properties: map[string]any{
			"ticketId": map[string]any{"type": "string"},
			"to":       map[string]any{"type": "string"},
			"text":     map[string]any{"type": "string"},
		},
	}
	exec := client.New(ledgermem.New(nil), nil)
	tools, err := oncelyeino.Register(exec, &oncelyeino.Config{OnCall: printCall(out)}, sendReply)
	if err != nil {
		return 0, err
	}

	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: &scripted{},
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
	})
	if err != nil {
		return 0, err
	}
	ctx = oncelyeino.WithRunID(ctx, "ticket-42")
	input := []*schema.Message{schema.UserMessage("Ticket 42: the parcel arrived broken. Reply to the customer.")}
	answer, err := agent.Generate(ctx, input)
	for attempt := 2; errors.Is(err, errUnavailable) && attempt <= 3; attempt++ {
		fmt.Fprintf(out, "agent failed (%v); retrying, attempt %d\n", err, attempt)
		answer, err = agent.Generate(ctx, input)
	}
	if err != nil {
		return 0, err
	}
	sent := len(mailAPI.Journal())
	fmt.Fprintf(out, "model: %s\nemails sent: %d\n", answer.Content, sent)
	return sent, nil
}
