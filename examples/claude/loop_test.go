package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/oncely/oncely/agent/oncelyclaude"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
)

func newWorld(t *testing.T) *World {
	t.Helper()
	w, err := NewWorld(context.Background(), filepath.Join(t.TempDir(), "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

// newStandIn starts a ScriptedAPI for the test, which fails if a request
// went beyond the script.
func newStandIn(t *testing.T, steps ...Step) *ScriptedAPI {
	t.Helper()
	api := NewScriptedAPI(steps...)
	t.Cleanup(func() {
		api.Close()
		if n := len(api.Requests()); n > len(steps) {
			t.Errorf("stand-in: %d requests, the script has %d", n, len(steps))
		}
	})
	return api
}

func (w *World) refunds() []fakes.Effect {
	return fakes.Filter(w.Stripe.Journal(), fakes.KindRefund, "")
}

// run drives the loop against the stand-in with the SDK's retries set,
// and logs the transcript.
func (w *World) run(t *testing.T, api *ScriptedAPI, retries int, msgs []anthropic.MessageParam) (oncelyclaude.Conversation, []oncelyclaude.Turn, error) {
	t.Helper()
	c := anthropic.NewClient(option.WithBaseURL(api.URL), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(retries))
	params := Params(w.Tools, "Order ord_1001 arrived broken: refund it.")
	if msgs != nil {
		params.Messages = msgs
	}
	var turns []oncelyclaude.Turn
	conv, err := oncelyclaude.Run(context.Background(), &c.Messages, w.Exec, "run-1", params, &oncelyclaude.Config{
		OnTurn: func(_ context.Context, tn oncelyclaude.Turn) error {
			if tn.Err != nil {
				t.Errorf("turn %d: executor error: %v", tn.N, tn.Err)
			}
			var b strings.Builder
			printTurn(&b, tn)
			t.Log("\n" + strings.TrimSuffix(b.String(), "\n"))
			turns = append(turns, tn)
			return nil
		},
	})
	return conv, turns, err
}

// The model refunds, the fake Stripe commits and drops the connection,
// and the model asks again with a rephrased note and a new tool_use id:
// one refund, and the second tool_result says it was already done.
func TestRefundDroppedThenRephrased(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.Stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.CommitThenDrop})
	api := newStandIn(t,
		CallTools("Let me do that.", ToolUse{"toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500, "note": "Sorry, the parcel was broken."}`}),
		CallTools("Let me do that.", ToolUse{"toolu_02", "refund_order", `{"orderId": " ord_1001", "amount": "1500", "note": "Refunding the broken order as promised."}`}),
		Say("The order is refunded."),
	)
	conv, turns, err := w.run(t, api, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(w.refunds()); got != 1 {
		t.Fatalf("refunds in the journal: %d, want 1", got)
	}
	if log := w.Stripe.Faults.Log(); len(log) != 1 || log[0].Rule.Action != fault.CommitThenDrop {
		t.Fatalf("faults applied: %v, want one CommitThenDrop", log)
	}
	if conv.Turns != 3 || len(turns) != 3 {
		t.Fatalf("turns: %d, want 3", conv.Turns)
	}
	first, second := turns[0].Calls[0].Result, turns[1].Calls[0].Result
	if first.IsError || first.Outcome != client.Executed || !strings.HasPrefix(first.Text, "Done: ") {
		t.Errorf("first call: %v %q, want executed despite the drop", first.Outcome, first.Text)
	}
	if second.Outcome != client.AlreadyDone || second.IsError {
		t.Errorf("second call: %v %q, want already done", second.Outcome, second.Text)
	}
	// The model was told: the requests carried both tool_results.
	reqs := api.Requests()
	got := reqs[2].ToolResults()
	if len(got) != 1 || got[0].ToolUseID != "toolu_02" || !strings.HasPrefix(got[0].Text, "Already done earlier in this run: ") || got[0].IsError {
		t.Errorf("second tool_result sent to the model: %+v", got)
	}
	if got := reqs[1].ToolResults(); len(got) != 1 || got[0].ToolUseID != "toolu_01" || got[0].Text != first.Text {
		t.Errorf("first tool_result sent to the model: %+v", got)
	}
}

// One answer calls the three tools at once; the model then repeats all
// three with new ids and rephrased free text: one email, one refund, one
// post.
func TestThreeToolsRepeated(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	three := func(ids [3]string, note, text string) Step {
		return CallTools("On it.",
			ToolUse{ids[0], "send_reply", fmt.Sprintf(`{"ticketId": 42, "to": "alice@example.com", "text": %q}`, text)},
			ToolUse{ids[1], "refund_order", fmt.Sprintf(`{"orderId": "ord_1001", "amount": 1500, "note": %q}`, note)},
			ToolUse{ids[2], "publish_post", `{"slug": "broken-shipments", "channel": "status", "body": "Some parcels arrived broken."}`},
		)
	}
	api := newStandIn(t,
		three([3]string{"toolu_1", "toolu_2", "toolu_3"}, "broken", "Your refund is on its way."),
		three([3]string{"toolu_4", "toolu_5", "toolu_6"}, "broken parcel", "We have refunded you!"),
		Say("All done."),
	)
	_, turns, err := w.run(t, api, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, m, p := len(w.refunds()), len(w.Mail.Journal()), len(w.Posts.Journal()); r != 1 || m != 1 || p != 1 {
		t.Fatalf("effects: %d refunds, %d emails, %d posts; want one each", r, m, p)
	}
	for i, c := range turns[0].Calls {
		if c.Result.Outcome != client.Executed {
			t.Errorf("first turn, %s: %v %q", c.ToolUse.Name, c.Result.Outcome, c.Result.Text)
		}
		if again := turns[1].Calls[i]; again.Result.Outcome != client.AlreadyDone {
			t.Errorf("second turn, %s: %v %q", again.ToolUse.Name, again.Result.Outcome, again.Result.Text)
		}
	}
	got := api.Requests()[2].ToolResults()
	if len(got) != 3 || got[0].ToolUseID != "toolu_4" || got[1].ToolUseID != "toolu_5" || got[2].ToolUseID != "toolu_6" {
		t.Fatalf("tool_results of the second turn, in order: %+v", got)
	}
}

// The SDK retries 408, 429, 5xx and 529 answers of the Messages API. Its
// retries resend the same request: the tool ran once, and every resend
// carried the same tool_result.
func TestSDKRetriesNeitherHideNorDuplicate(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	refund := CallTools("Let me do that.", ToolUse{"toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500}`})
	api := newStandIn(t,
		Step{Status: 529}, Step{Status: 429}, refund, // turn 1: two retries
		Step{Status: 500}, Step{Status: 408}, Say("Refunded."), // turn 2, carrying the result
	)
	_, turns, err := w.run(t, api, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(w.refunds()); got != 1 {
		t.Fatalf("refunds: %d, want 1", got)
	}
	if len(turns) != 2 || len(turns[0].Calls) != 1 || turns[0].Calls[0].Result.Outcome != client.Executed {
		t.Fatalf("turns: %+v", turns)
	}
	reqs := api.Requests()
	if len(reqs) != 6 {
		t.Fatalf("requests: %d, want 6", len(reqs))
	}
	for i := 4; i < 6; i++ {
		if reqs[i].Raw != reqs[3].Raw {
			t.Errorf("resend %d differs from the first send of turn 2", i)
		}
	}
	if got := reqs[5].ToolResults(); len(got) != 1 || got[0].ToolUseID != "toolu_01" || !strings.HasPrefix(got[0].Text, "Done: ") {
		t.Errorf("tool_result delivered: %+v", got)
	}
}

// When the SDK gives up, Run returns the API error with the conversation,
// whose last message holds the tool results not yet delivered. A resumed
// run delivers them; the model repeating the refund gets it replayed.
func TestSDKRetriesExhaustedThenResumed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	api := newStandIn(t,
		CallTools("Let me do that.", ToolUse{"toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500, "note": "broken"}`}),
		Step{Drop: true}, Step{Status: 500}, // turn 2 fails, retry included
		CallTools("Let me do that.", ToolUse{"toolu_02", "refund_order", `{"orderId": "ord_1001", "amount": 1500.0, "note": "the parcel was broken"}`}),
		Say("Refunded."),
	)
	conv, _, err := w.run(t, api, 1, nil)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 500 {
		t.Fatalf("Run: %v, want the turn 2 failure", err)
	}
	last := conv.Messages[len(conv.Messages)-1]
	if last.OfUser == nil || len(last.OfUser.Content) != 1 || last.OfUser.Content[0].OfToolResult == nil {
		t.Fatalf("the undelivered tool_result is not kept: %+v", last)
	}
	conv, turns, err := w.run(t, api, 1, conv.Messages)
	if err != nil {
		t.Fatal(err)
	}
	reqs := api.Requests()
	if got := reqs[3].ToolResults(); len(got) != 1 || got[0].ToolUseID != "toolu_01" || !strings.HasPrefix(got[0].Text, "Done: ") {
		t.Errorf("the resumed run did not deliver the first result: %+v", got)
	}
	if got := turns[0].Calls[0].Result; got.Outcome != client.AlreadyDone {
		t.Errorf("repeat after resume: %v %q", got.Outcome, got.Text)
	}
	if got := len(w.refunds()); got != 1 {
		t.Fatalf("refunds: %d, want 1", got)
	}
	if conv.Final == nil || conv.Final.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("final answer: %+v", conv.Final)
	}
}
