// Command openai is a Chat Completions tool loop (agent/oncelyopenai on the
// official Go SDK, openai-go/v3) whose send_reply tool, an email API with
// no idempotency, runs through oncely. The model asks for the reply, then
// asks again with a new tool call id and rephrased arguments, as models
// do; the reply is sent once and the model is told so.
//
// It runs offline: the model is a script served by a stand-in for the
// Chat Completions API on 127.0.0.1 (a real HTTP server the SDK reaches
// through option.WithBaseURL), and the email API is the bundled fake:
//
//	go run ./examples/openai
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/oncely/oncely/agent/oncelyopenai"
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

// script is the model: a call, the same call again (a new id, the ticket
// as a number, the reply rephrased), then the final answer.
var script = []string{
	toolCall("call_1", `{"ticketId": "42", "to": "ann@example.com", "text": "Sorry, a new one is on its way."}`),
	toolCall("call_2", `{"ticketId": 42, "to": "ann@example.com", "text": "Apologies! A replacement ships today."}`),
	`{"id": "c3", "object": "chat.completion", "created": 1, "model": "scripted", "choices": [{"index": 0, "finish_reason": "stop",
	  "message": {"role": "assistant", "content": "Done: the customer has their reply."}}]}`,
}

func toolCall(id, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id": %q, "object": "chat.completion", "created": 1, "model": "scripted", "choices": [{"index": 0,
	  "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
	  "tool_calls": [{"id": %q, "type": "function", "function": {"name": "send_reply", "arguments": %s}}]}}]}`, id, id, a)
}

// scriptedAPI serves the script, one answer per request.
func scriptedAPI() *httptest.Server {
	var mu sync.Mutex
	n := 0
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if n >= len(script) {
			http.Error(w, `{"error": {"message": "the script is over"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, script[n])
		n++
	}))
}

// printCalls prints each tool call of a turn and what the model was told.
func printCalls(out io.Writer) func(context.Context, oncelyopenai.Turn, []openai.ChatCompletionMessageParamUnion) error {
	return func(_ context.Context, t oncelyopenai.Turn, _ []openai.ChatCompletionMessageParamUnion) error {
		for _, c := range t.Calls {
			fmt.Fprintf(out, "%s %s(%s)\n  -> %s: %s\n", c.ID, c.Name, c.Arguments, c.Result.Outcome, c.Result.Text)
		}
		return nil
	}
}

// Run runs the conversation, printing each tool call and what the model
// was told, and returns the number of emails the email API sent.
func Run(ctx context.Context, out io.Writer) (int, error) {
	mailAPI := mailfake.NewServer(nil)
	defer mailAPI.Close()
	model := scriptedAPI()
	defer model.Close()
	mailer := mail.New(mailAPI.URL, nil)

	sendReply := oncelyopenai.Tool{
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
	if err := oncelyopenai.Register(exec, sendReply); err != nil {
		return 0, err
	}
	tools, err := oncelyopenai.ChatTools(sendReply)
	if err != nil {
		return 0, err
	}

	api := openai.NewClient(option.WithBaseURL(model.URL), option.WithAPIKey("offline"))
	params := openai.ChatCompletionNewParams{
		Model:    "scripted",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Ticket 42: the parcel arrived broken. Reply to the customer.")},
		Tools:    tools,
	}
	conv, err := oncelyopenai.RunChat(ctx, &api.Chat.Completions, exec, "ticket-42", params, &oncelyopenai.Config{OnTurn: printCalls(out)})
	if err != nil {
		return 0, err
	}
	sent := len(mailAPI.Journal())
	fmt.Fprintf(out, "model: %s\nemails sent: %d\n", conv.Final.Choices[0].Message.Content, sent)
	return sent, nil
}
