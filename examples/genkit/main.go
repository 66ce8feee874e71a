// Command genkit is a Genkit flow whose send_reply tool, an email API with
// no idempotency, runs through oncely (agent/oncelygenkit). The flow fails after
// the tool ran (the model's next turn fails) and the application retries
// it; the model asks for the reply again, rephrased. The reply is sent
// once and the model is told so, with the first call's result.
//
// It runs offline: the model is an in-process script defined with
// genkit.DefineModel and the email API is the bundled fake. Genkit has a
// workspace of its own (agent/oncelygenkit/go.work), so run it from there:
//
//	cd agent/oncelygenkit && go run github.com/oncely/oncely/examples/genkit
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/oncely/oncely/agent/oncelygenkit"
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

// ReplyInput is send_reply's input.
type ReplyInput struct {
	TicketID string `json:"ticketId"`
	To       string `json:"to"`
	Text     string `json:"text"`
}

// Sent is send_reply's output.
type Sent struct {
	MessageID string `json:"messageId"`
}

var errUnavailable = errors.New("model unavailable")

func callReply(ref, text string) *ai.Message {
	return ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: "send_reply", Ref: ref,
		Input: map[string]any{"ticketId": "42", "to": "ann@example.com", "text": text}}))
}

// defineModel defines the scripted model: a call, a failure, the same
// call rephrased, the answer.
func defineModel(g *genkit.Genkit) ai.Model {
	var mu sync.Mutex
	n := 0
	return genkit.DefineModel(g, "offline/scripted", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			n++
			var msg *ai.Message
			switch n {
			case 1:
				msg = callReply("call_1", "Sorry, a new one is on its way.")
			case 3:
				msg = callReply("call_2", "Apologies! A replacement ships today.")
			case 4:
				msg = ai.NewModelTextMessage("Done: the customer has their reply.")
			default:
				return nil, errUnavailable
			}
			return &ai.ModelResponse{Message: msg, FinishReason: ai.FinishReasonStop, Request: req}, nil
		})
}

// replyIdentity names send_reply for oncely: one reply per ticket.
var replyIdentity = client.Tool{Name: "send_reply", Identity: []client.Field{{Path: "ticketId", Norm: client.Trimmed}}}

// printCall prints what a call of a wrapped tool told the model.
func printCall(out io.Writer) func(context.Context, string, client.Result, error) {
	return func(_ context.Context, name string, res client.Result, _ error) {
		fmt.Fprintf(out, "%s -> %s: %s\n", name, res.Outcome, res.Text)
	}
}

// Run runs the flow and its retry, printing what the tool told the model,
// and returns the number of emails the email API sent.
func Run(ctx context.Context, out io.Writer) (int, error) {
	mailAPI := mailfake.NewServer(nil)
	defer mailAPI.Close()
	mailer := mail.New(mailAPI.URL, nil)
	g := genkit.Init(ctx)
	model := defineModel(g)

	// The tool function as a Genkit user writes it; InvocationFrom gives
	// the key to hand to the provider.
	sendReply := func(tc *ai.ToolContext, in ReplyInput) (Sent, error) {
		inv, _ := oncelygenkit.InvocationFrom(tc)
		m, err := mailer.Send(tc, inv.DownstreamKey, mail.Message{
			From: "support@shop.example", To: in.To, Subject: "Re: ticket " + in.TicketID, Text: in.Text,
		})
		if err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: m.ID}, nil
	}
	exec := client.New(ledgermem.New(nil), nil)
	replyTool, err := oncelygenkit.DefineTool(g, exec, replyIdentity, "Email the customer a reply on a support ticket.", sendReply, &oncelygenkit.Config{OnCall: printCall(out)})
	if err != nil {
		return 0, err
	}

	flow := genkit.DefineFlow(g, "reply", func(ctx context.Context, ticket string) (string, error) {
		resp, err := genkit.Generate(oncelygenkit.WithRunID(ctx, "ticket-"+ticket), g, ai.WithModel(model), ai.WithTools(replyTool),
			ai.WithPrompt("Ticket %s: the parcel arrived broken. Reply to the customer.", ticket))
		if err != nil {
			return "", err
		}
		return resp.Text(), nil
	})
	answer, err := flow.Run(ctx, "42")
	for attempt := 2; err != nil && attempt <= 3; attempt++ {
		fmt.Fprintf(out, "flow failed (%v); retrying, attempt %d\n", err, attempt)
		answer, err = flow.Run(ctx, "42")
	}
	if err != nil {
		return 0, err
	}
	sent := len(mailAPI.Journal())
	fmt.Fprintf(out, "model: %s\nemails sent: %d\n", answer, sent)
	return sent, nil
}
