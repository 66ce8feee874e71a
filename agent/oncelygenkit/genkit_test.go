package oncelygenkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/mail"
)

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

// shop is the mail API (a fake with no idempotency) and send_reply on it.
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

func (s *shop) sent() int { return len(s.mail.Journal()) }

// sendReply is the tool function as a Genkit user writes it. Through
// oncely it hands the invocation's downstream key to the provider;
// without, it has no key but a fresh one per call.
func (s *shop) sendReply(tc *ai.ToolContext, in ReplyInput) (Sent, error) {
	key := fmt.Sprintf("bare-%d", s.sent()+1)
	if inv, ok := InvocationFrom(tc); ok {
		key = inv.DownstreamKey
	}
	m, err := s.api.Send(tc, key, mail.Message{From: "support@shop.example", To: in.To, Subject: "Re: ticket " + in.TicketID, Text: in.Text})
	if err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: m.ID}, nil
}

var replyTool = client.Tool{Name: "send_reply", Identity: []client.Field{{Path: "ticketId", Norm: client.Trimmed}}}

// scripted is an in-process Genkit model answering from a script (a nil
// message is an error); it records the requests it was sent.
type scripted struct {
	mu     sync.Mutex
	script []*ai.Message
	got    []*ai.ModelRequest
}

var errModel = errors.New("scripted model failure")

func (m *scripted) define(g *genkit.Genkit) ai.Model {
	return genkit.DefineModel(g, "test/scripted", &ai.ModelOptions{Supports: &ai.ModelSupports{Tools: true, Multiturn: true}},
		func(_ context.Context, req *ai.ModelRequest, _ ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.got = append(m.got, req)
			n := len(m.got) - 1
			if n >= len(m.script) || m.script[n] == nil {
				return nil, errModel
			}
			return &ai.ModelResponse{Message: m.script[n], FinishReason: ai.FinishReasonStop, Request: req}, nil
		})
}

func (m *scripted) requests() []*ai.ModelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*ai.ModelRequest(nil), m.got...)
}

func callReply(ref, ticket, text string) *ai.Message {
	return ai.NewModelMessage(ai.NewToolRequestPart(&ai.ToolRequest{Name: "send_reply", Ref: ref,
		Input: map[string]any{"ticketId": ticket, "to": "ann@example.com", "text": text}}))
}

func done() *ai.Message { return ai.NewModelTextMessage("The customer has their reply.") }

// told returns the output the model was sent for the tool request ref.
func told(t *testing.T, req *ai.ModelRequest, ref string) Output[Sent] {
	t.Helper()
	for _, msg := range req.Messages {
		for _, p := range msg.Content {
			if p.IsToolResponse() && p.ToolResponse.Ref == ref {
				b, err := json.Marshal(p.ToolResponse.Output)
				if err != nil {
					t.Fatal(err)
				}
				var o Output[Sent]
				if err := json.Unmarshal(b, &o); err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				return o
			}
		}
	}
	t.Fatalf("no tool response for %s", ref)
	return Output[Sent]{}
}

// setup defines send_reply through oncely (guarded) or bare, and the
// scripted model.
func setup(t *testing.T, guarded bool, m *scripted) (*genkit.Genkit, *shop, ai.Tool, ai.Model) {
	t.Helper()
	g := genkit.Init(context.Background())
	s := newShop(t)
	var tool ai.Tool
	if guarded {
		def, err := DefineTool(g, client.New(ledgermem.New(nil), nil), replyTool, "Email the customer a reply on a support ticket.", s.sendReply, nil)
		if err != nil {
			t.Fatal(err)
		}
		tool = def
	} else {
		tool = genkit.DefineTool(g, "send_reply", "Email the customer a reply on a support ticket.", s.sendReply)
	}
	return g, s, tool, m.define(g)
}

// The model calls send_reply again in one generation, with drifted
// arguments (the ticket padded, the reply rephrased). Through oncely one
// email is sent and the model is told the repeat was already done, with
// the first call's result; without oncely two are sent.
func TestModelCallsAgain(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		m := &scripted{script: []*ai.Message{
			callReply("call_1", "42", "Sorry, a new one is on its way."),
			callReply("call_2", " 42 ", "Apologies! A replacement ships today."),
			done(),
		}}
		g, s, tool, model := setup(t, guarded, m)
		ctx := WithRunID(context.Background(), "conversation-42")
		resp, err := genkit.Generate(ctx, g, ai.WithModel(model), ai.WithTools(tool), ai.WithPrompt("Reply to ticket 42: the parcel arrived broken."))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Text() != "The customer has their reply." {
			t.Fatalf("answer %q", resp.Text())
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want 2", s.sent())
			}
			continue
		}
		if s.sent() != 1 {
			t.Fatalf("with oncely: %d emails, want 1", s.sent())
		}
		reqs := m.requests()
		first, repeat := told(t, reqs[2], "call_1"), told(t, reqs[2], "call_2")
		id := s.mail.Journal()[0].ID
		if first.Outcome != "executed" || first.Result == nil || first.Result.MessageID != id {
			t.Errorf("first call told %+v", first)
		}
		// The message is text for the model, not the result's JSON (which
		// it gets as Result).
		if first.Message != "Done: send_reply done" || strings.Contains(repeat.Message, "{") {
			t.Errorf("the model was told %q and %q, want a summary without JSON", first.Message, repeat.Message)
		}
		if repeat.Outcome != "already done" || repeat.Result == nil || repeat.Result.MessageID != id || repeat.Message == first.Message {
			t.Errorf("the repeat was told %+v", repeat)
		}
	}
}

// A flow that replies to a ticket fails after the tool ran (the model's
// next turn fails); the application retries the flow with the same run id
// and the model calls send_reply again. Through oncely one email is sent
// and the retry is told it was already done; without oncely two.
func TestFlowRetried(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		m := &scripted{script: []*ai.Message{
			callReply("call_1", "42", "Sorry, a new one is on its way."), nil,
			callReply("call_9", "42", "Sorry again: a replacement is on its way."), done(),
		}}
		g, s, tool, model := setup(t, guarded, m)
		flow := genkit.DefineFlow(g, "reply", func(ctx context.Context, ticket string) (string, error) {
			resp, err := genkit.Generate(WithRunID(ctx, "ticket-"+ticket), g, ai.WithModel(model), ai.WithTools(tool),
				ai.WithPrompt("Reply to ticket %s: the parcel arrived broken.", ticket))
			if err != nil {
				return "", err
			}
			return resp.Text(), nil
		})
		if _, err := flow.Run(context.Background(), "42"); err == nil || !strings.Contains(err.Error(), errModel.Error()) {
			t.Fatalf("first run: %v", err)
		}
		out, err := flow.Run(context.Background(), "42") // the retry
		if err != nil || out != "The customer has their reply." {
			t.Fatalf("retry: %q, %v", out, err)
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want 2", s.sent())
			}
			continue
		}
		if s.sent() != 1 {
			t.Fatalf("with oncely: %d emails, want 1", s.sent())
		}
		repeat := told(t, m.requests()[3], "call_9")
		if repeat.Outcome != "already done" || repeat.Result == nil || repeat.Result.MessageID != s.mail.Journal()[0].ID {
			t.Errorf("the retry was told %+v", repeat)
		}
	}
}

func TestWrapRefusesAndRequiresRunID(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	exec := client.New(ledgermem.New(nil), nil)
	withRun := replyTool
	withRun.Run = func(context.Context, client.Invocation) (client.Effect, error) { return client.Effect{}, nil }
	if _, err := Wrap(exec, withRun, s.sendReply, nil); !errors.Is(err, ErrTool) {
		t.Fatalf("a tool with its own Run: %v", err)
	}
	fn, err := Wrap(exec, replyTool, s.sendReply, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fn(&ai.ToolContext{Context: context.Background()}, ReplyInput{TicketID: "42", To: "ann@example.com", Text: "hi"}); !errors.Is(err, ErrNoRunID) || s.sent() != 0 {
		t.Fatalf("without a run id: %v, %d emails", err, s.sent())
	}
}

// With the CallIDs middleware, the executor is given the model's tool
// request ref as the call id (client.Invocation.CallID), as the other
// agent integrations give theirs.
func TestCallIDs(t *testing.T) {
	t.Parallel()
	m := &scripted{script: []*ai.Message{callReply("call_1", "42", "Sorry, a new one is on its way."), done()}}
	g := genkit.Init(context.Background())
	s := newShop(t)
	var seen []string
	def, err := DefineTool(g, client.New(ledgermem.New(nil), nil), replyTool, "Email the customer a reply on a support ticket.",
		func(tc *ai.ToolContext, in ReplyInput) (Sent, error) {
			inv, _ := InvocationFrom(tc)
			seen = append(seen, inv.CallID)
			return s.sendReply(tc, in)
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	model := m.define(g)
	ctx := WithRunID(context.Background(), "conversation-ids")
	if _, err := genkit.Generate(ctx, g, ai.WithModel(model), ai.WithTools(def), ai.WithMiddleware(CallIDs),
		ai.WithPrompt("Reply to ticket 42.")); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != "call_1" {
		t.Fatalf("the executor was given the call ids %q, want [call_1]", seen)
	}
}
