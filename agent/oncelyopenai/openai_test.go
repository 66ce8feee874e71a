package oncelyopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/providers/mail"
)

// modelServer is a scripted stand-in for the OpenAI API: a real HTTP
// server that answers each POST with the next scripted body (a non-JSON
// script line is an HTTP 500) and records the request bodies.
type modelServer struct {
	*httptest.Server
	mu      sync.Mutex
	answers []string
	got     []string
}

func newModelServer(t *testing.T, answers ...string) *modelServer {
	t.Helper()
	s := &modelServer{answers: answers}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.got)
		s.got = append(s.got, string(body))
		s.mu.Unlock()
		if n >= len(s.answers) || !json.Valid([]byte(s.answers[n])) {
			http.Error(w, `{"error": {"message": "scripted failure"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, s.answers[n])
	}))
	t.Cleanup(s.Close)
	return s
}

// client returns the SDK's client for the server, without retries.
func (s *modelServer) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(s.URL), option.WithAPIKey("test"), option.WithMaxRetries(0))
}

func (s *modelServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// chatToolCall is a Chat Completions answer calling send_reply.
func chatToolCall(id, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id": "chatcmpl-%s", "object": "chat.completion", "created": 1, "model": "m",
		"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
		"tool_calls": [{"id": %q, "type": "function", "function": {"name": "send_reply", "arguments": %s}}]}}]}`, id, id, a)
}

const chatDone = `{"id": "chatcmpl-done", "object": "chat.completion", "created": 1, "model": "m",
	"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "The customer has their reply."}}]}`

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

func (s *shop) executor(t *testing.T, exec *client.Executor) *client.Executor {
	t.Helper()
	if err := Register(exec, s.tool()); err != nil {
		t.Fatal(err)
	}
	return exec
}

func (s *shop) sent() int { return len(s.mail.Journal()) }

// bare runs send_reply without oncely, the way a loop without a ledger
// does: it has no key to give the email API (each call's reference is
// new, so the API's search finds no earlier message).
type bare struct{ s *shop }

var bareSends atomic.Int64

func (b bare) Execute(ctx context.Context, _ string, call client.Call) (client.Result, error) {
	var in struct {
		TicketID any    `json:"ticketId"`
		To       string `json:"to"`
		Text     string `json:"text"`
	}
	_ = json.Unmarshal(call.Input, &in)
	m, err := b.s.api.Send(ctx, fmt.Sprintf("bare-%d", bareSends.Add(1)), mail.Message{From: "support@shop.example", To: in.To, Subject: fmt.Sprint("Re: ticket ", in.TicketID), Text: in.Text})
	if err != nil {
		return client.Result{Outcome: client.Failed, Text: err.Error(), IsError: true}, nil
	}
	return client.Result{Outcome: client.Executed, Text: m.Summary()}, nil
}

func chatParams(t *testing.T, s *shop) openai.ChatCompletionNewParams {
	t.Helper()
	tools, err := ChatTools(s.tool())
	if err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionNewParams{
		Model:    "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Reply to ticket 42: the parcel arrived broken.")},
		Tools:    tools,
	}
}

func TestChatToolsRequireIdentity(t *testing.T) {
	t.Parallel()
	props := map[string]any{
		"orderId":  map[string]any{"type": "string"},
		"customer": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
	}
	tool := Tool{Tool: client.Tool{Name: "refund", Identity: []client.Field{{Path: "orderId"}, {Path: "customer.id"}}}, Description: "Refund.", Properties: props}
	chat, err := ChatTools(tool)
	if err != nil {
		t.Fatal(err)
	}
	fn := chat[0].GetFunction()
	if fn == nil || fn.Name != "refund" || fn.Description.Value != "Refund." {
		t.Fatalf("declaration: %+v", chat[0])
	}
	if want := []string{"orderId", "customer"}; !reflect.DeepEqual(fn.Parameters["required"], want) {
		t.Errorf("required: %v, want %v", fn.Parameters["required"], want)
	}
	if _, ok := props["customer"].(map[string]any)["required"]; ok {
		t.Error("the caller's properties were changed")
	}
	resp, err := ResponseTools(tool)
	if err != nil || resp[0].OfFunction == nil || !reflect.DeepEqual(resp[0].OfFunction.Parameters, map[string]any(fn.Parameters)) {
		t.Fatalf("responses declaration: %+v, %v", resp, err)
	}
	exec := client.New(ledgermem.New(nil), nil)
	undeclared := Tool{Tool: client.Tool{Name: "t", Identity: []client.Field{{Path: "missing"}}, Run: func(context.Context, client.Invocation) (client.Effect, error) {
		return client.Effect{}, nil
	}}}
	if err := Register(exec, undeclared); !errors.Is(err, ErrSchema) {
		t.Fatalf("err = %v, want ErrSchema", err)
	}
	if res, _ := exec.Execute(context.Background(), "r", client.Call{Tool: "t", Input: json.RawMessage(`{"missing": 1}`)}); res.Outcome != client.InvalidInput {
		t.Errorf("the tool was registered despite the error: %v", res.Outcome)
	}
}

// toolMessage returns the content of the tool message for callID in a
// recorded request.
func toolMessage(t *testing.T, request, callID string) string {
	t.Helper()
	var body struct {
		Messages []struct {
			Role       string `json:"role"`
			Content    any    `json:"content"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(request), &body); err != nil {
		t.Fatal(err)
	}
	for _, m := range body.Messages {
		if m.Role == "tool" && m.ToolCallID == callID {
			return fmt.Sprint(m.Content)
		}
	}
	t.Fatalf("no tool message for %s in %s", callID, request)
	return ""
}

// The model calls send_reply again with a new call id and drifted
// arguments: through oncely one email is sent and the repeat is told it
// was already done; without oncely two are sent.
func TestChatRepeatNewCallIDDriftedArguments(t *testing.T) {
	t.Parallel()
	script := []string{chatToolCall("call_1", argsFirst), chatToolCall("call_2", argsRepeat), chatDone}
	for _, guarded := range []bool{true, false} {
		s := newShop(t)
		model := newModelServer(t, script...)
		api := model.client()
		var exec Executor = bare{s}
		if guarded {
			exec = s.executor(t, client.New(ledgermem.New(nil), nil))
		}
		var outcomes []client.Outcome
		conv, err := RunChat(context.Background(), &api.Chat.Completions, exec, "run-chat-repeat", chatParams(t, s), &Config{
			OnTurn: func(_ context.Context, tn Turn, _ []openai.ChatCompletionMessageParamUnion) error {
				for _, c := range tn.Calls {
					outcomes = append(outcomes, c.Result.Outcome)
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if conv.Turns != 3 || conv.Final.Choices[0].Message.Content != "The customer has their reply." {
			t.Fatalf("turns %d, final %+v", conv.Turns, conv.Final)
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want the 2 the repeat shows", s.sent())
			}
			continue
		}
		if s.sent() != 1 {
			t.Fatalf("with oncely: %d emails, want 1", s.sent())
		}
		if want := []client.Outcome{client.Executed, client.AlreadyDone}; !reflect.DeepEqual(outcomes, want) {
			t.Fatalf("outcomes %v, want %v", outcomes, want)
		}
		reqs := model.requests()
		told := toolMessage(t, reqs[2], "call_2")
		if !strings.Contains(told, s.mail.Journal()[0].ID) || told == toolMessage(t, reqs[1], "call_1") {
			t.Errorf("the repeat was told %q; the first call %q", told, toolMessage(t, reqs[1], "call_1"))
		}
	}
}

// The app saves the transcript when an answer arrives, before its tool
// calls run, and stops after the email went out but before the tool
// message was saved. A new process resumes from the saved transcript with
// the same run id: through oncely the pending call is answered from the
// ledger (one email); without oncely it sends again.
func TestChatResumeFromSavedTranscript(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		s := newShop(t)
		dir := t.TempDir()
		saved := filepath.Join(dir, "transcript.json")
		ledgerPath := filepath.Join(dir, "ledger.db")
		newExec := func() (Executor, func()) {
			if !guarded {
				return bare{s}, func() {}
			}
			store, err := ledgersqlite.Open(context.Background(), ledgerPath, nil)
			if err != nil {
				t.Fatal(err)
			}
			return s.executor(t, client.New(store, nil)), func() { store.Close() }
		}

		// The first process: the answer is saved, the email is sent, and
		// the process stops before the tool message is saved.
		errStopped := errors.New("process stopped")
		model := newModelServer(t, chatToolCall("call_1", argsFirst))
		api := model.client()
		exec, closeLedger := newExec()
		_, err := RunChat(context.Background(), &api.Chat.Completions, exec, "run-resume", chatParams(t, s), &Config{
			OnAnswer: func(_ context.Context, _ int, msgs []openai.ChatCompletionMessageParamUnion) error {
				b, err := json.Marshal(msgs)
				if err != nil {
					return err
				}
				return os.WriteFile(saved, b, 0o600)
			},
			OnTurn: func(context.Context, Turn, []openai.ChatCompletionMessageParamUnion) error { return errStopped },
		})
		closeLedger()
		if !errors.Is(err, errStopped) || s.sent() != 1 {
			t.Fatalf("first process: %v, %d emails", err, s.sent())
		}

		// The second process resumes from the file.
		var msgs []openai.ChatCompletionMessageParamUnion
		b, err := os.ReadFile(saved)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &msgs); err != nil {
			t.Fatal(err)
		}
		params := chatParams(t, s)
		params.Messages = msgs
		model = newModelServer(t, chatDone)
		api = model.client()
		exec, closeLedger = newExec()
		defer closeLedger()
		var resumed []Call
		conv, err := RunChat(context.Background(), &api.Chat.Completions, exec, "run-resume", params, &Config{
			OnTurn: func(_ context.Context, tn Turn, _ []openai.ChatCompletionMessageParamUnion) error {
				if tn.N == 0 {
					resumed = tn.Calls
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(resumed) != 1 || resumed[0].ID != "call_1" || conv.Turns != 1 {
			t.Fatalf("resumed calls %+v, turns %d", resumed, conv.Turns)
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want the 2 the resumption shows", s.sent())
			}
			continue
		}
		if s.sent() != 1 {
			t.Fatalf("with oncely: %d emails, want 1", s.sent())
		}
		if resumed[0].Result.Outcome != client.AlreadyDone {
			t.Fatalf("resumed call: %v (%s)", resumed[0].Result.Outcome, resumed[0].Result.Text)
		}
		if told := toolMessage(t, model.requests()[0], "call_1"); told != resumed[0].Result.Text || !strings.Contains(told, s.mail.Journal()[0].ID) {
			t.Errorf("the model was told %q", told)
		}
	}
}

// responseCall is a Responses answer with one function_call item.
func responseCall(id, callID, args string) string {
	a, _ := json.Marshal(args)
	return fmt.Sprintf(`{"id": %q, "object": "response", "created_at": 1, "model": "m", "status": "completed",
		"output": [{"type": "function_call", "id": "fc_%s", "call_id": %q, "name": "send_reply", "arguments": %s, "status": "completed"}]}`, id, callID, callID, a)
}

// The Responses API: the model calls send_reply, then again with a new
// call_id and drifted arguments. Through oncely one email is sent and the
// second function_call_output says it was already done; without oncely
// two are sent.
func TestResponsesRepeatNewCallIDDriftedArguments(t *testing.T) {
	t.Parallel()
	for _, guarded := range []bool{true, false} {
		s := newShop(t)
		model := newModelServer(t, responseCall("resp_1", "call_a", argsFirst), responseCall("resp_2", "call_b", argsRepeat))
		api := model.client()
		var exec Executor = bare{s}
		if guarded {
			exec = s.executor(t, client.New(ledgermem.New(nil), nil))
		}
		tools, err := ResponseTools(s.tool())
		if err != nil {
			t.Fatal(err)
		}
		params := responses.ResponseNewParams{Model: "gpt-test", Tools: tools,
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Reply to ticket 42.")}}
		var all []Call
		var outputs []responses.ResponseInputItemUnionParam
		for range 2 {
			resp, err := api.Responses.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			items, calls, err := ResponseResults(context.Background(), exec, "run-responses", resp)
			if err != nil {
				t.Fatal(err)
			}
			all, outputs = append(all, calls...), append(outputs, items...)
			params.PreviousResponseID = openai.String(resp.ID)
			params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
		}
		if len(all) != 2 || all[1].ID != "call_b" {
			t.Fatalf("calls: %+v", all)
		}
		if !guarded {
			if s.sent() != 2 {
				t.Fatalf("without oncely: %d emails, want 2", s.sent())
			}
			continue
		}
		if s.sent() != 1 || all[1].Result.Outcome != client.AlreadyDone {
			t.Fatalf("with oncely: %d emails, repeat %v", s.sent(), all[1].Result.Outcome)
		}
		out, err := json.Marshal(outputs[1])
		if err != nil {
			t.Fatal(err)
		}
		var item struct {
			Type, CallID, Output string
		}
		if err := json.Unmarshal(out, &struct {
			Type   *string `json:"type"`
			CallID *string `json:"call_id"`
			Output *string `json:"output"`
		}{&item.Type, &item.CallID, &item.Output}); err != nil {
			t.Fatal(err)
		}
		if item.Type != "function_call_output" || item.CallID != "call_b" || item.Output != all[1].Result.Text || !strings.Contains(item.Output, s.mail.Journal()[0].ID) {
			t.Errorf("the repeat's output item: %s", out)
		}
	}
}

// Two identical tool calls in one model answer run concurrently: one
// email, and the second call is told "Already done", not "Done" twice.
// The mail API answers slowly so that the two calls overlap (merged in
// the executor); if they do not, the second finds the done record, and
// the answer is the same.
func TestChatTwoIdenticalCallsInOneAnswer(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	s.mail.Faults.Add(fault.Rule{Route: "POST /v1/messages", Action: fault.Delay, Delay: 300 * time.Millisecond})
	exec := s.executor(t, client.New(ledgermem.New(nil), nil))
	msg := openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ChatCompletionMessageToolCallUnion{
		{ID: "call_a", Type: "function", Function: openai.ChatCompletionMessageFunctionToolCallFunction{Name: "send_reply", Arguments: argsFirst}},
		{ID: "call_b", Type: "function", Function: openai.ChatCompletionMessageFunctionToolCallFunction{Name: "send_reply", Arguments: argsFirst}},
	}}
	_, calls, err := ChatResults(context.Background(), exec, "run-two-calls", msg)
	if err != nil {
		t.Fatal(err)
	}
	if s.sent() != 1 || len(calls) != 2 {
		t.Fatalf("%d emails for %d calls, want 1 for 2", s.sent(), len(calls))
	}
	var done, already int
	for _, c := range calls {
		switch {
		case c.Result.Outcome == client.Executed && strings.HasPrefix(c.Result.Text, "Done"):
			done++
		case c.Result.Outcome == client.AlreadyDone && strings.HasPrefix(c.Result.Text, "Already done"):
			already++
		}
	}
	if done != 1 || already != 1 {
		t.Fatalf("told %q and %q; want one Done and one Already done", calls[0].Result.Text, calls[1].Result.Text)
	}
}
