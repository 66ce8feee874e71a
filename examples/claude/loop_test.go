package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/idemkit/idemkit/agent/claude"
	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/fakes"
	"github.com/idemkit/idemkit/fakes/fault"
	"github.com/idemkit/idemkit/fakes/keyheaderfake"
	"github.com/idemkit/idemkit/fakes/mailfake"
	"github.com/idemkit/idemkit/fakes/stripefake"
	"github.com/idemkit/idemkit/ledger/ledgersqlite"
)

// world is the example's setup for one test: the fakes, the shop, an
// executor on a SQLite ledger file, and the tools' declarations.
type world struct {
	mail   *mailfake.Server
	stripe *stripefake.Server
	posts  *keyheaderfake.Server
	exec   *client.Executor
	tools  []anthropic.ToolUnionParam
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{mail: mailfake.NewServer(nil), stripe: stripefake.NewServer(nil), posts: keyheaderfake.NewServer(nil)}
	t.Cleanup(w.mail.Close)
	t.Cleanup(w.stripe.Close)
	t.Cleanup(w.posts.Close)
	shop, err := NewShop(ctx, w.mail.URL, w.stripe.URL, w.posts.URL)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledgersqlite.Open(ctx, filepath.Join(t.TempDir(), "ledger.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	w.exec = client.New(store, nil)
	if w.tools, err = claude.Register(w.exec, shop.Tools()...); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) refunds() []fakes.Effect {
	return fakes.Filter(w.stripe.Journal(), fakes.KindRefund, "")
}

// run drives the loop against the stand-in with the SDK's retries set.
func (w *world) run(t *testing.T, api *standIn, retries int, msgs []anthropic.MessageParam) (claude.Conversation, []claude.Turn, error) {
	t.Helper()
	c := anthropic.NewClient(option.WithBaseURL(api.srv.URL), option.WithAPIKey("sk-ant-test"), option.WithMaxRetries(retries))
	params := Params(w.tools, "Order ord_1001 arrived broken: refund it.")
	if msgs != nil {
		params.Messages = msgs
	}
	var turns []claude.Turn
	conv, err := claude.Run(context.Background(), &c.Messages, w.exec, "run-1", params, &claude.Config{
		OnTurn: func(_ context.Context, tn claude.Turn) error {
			if tn.Err != nil {
				t.Errorf("turn %d: executor error: %v", tn.N, tn.Err)
			}
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
	w.stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.CommitThenDrop})
	api := newStandIn(t,
		callTool("toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500, "note": "Sorry, the parcel was broken."}`),
		callTool("toolu_02", "refund_order", `{"orderId": " ord_1001", "amount": "1500", "note": "Refunding the broken order as promised."}`),
		say("The order is refunded."),
	)
	conv, turns, err := w.run(t, api, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(w.refunds()); got != 1 {
		t.Fatalf("refunds in the journal: %d, want 1", got)
	}
	if log := w.stripe.Faults.Log(); len(log) != 1 || log[0].Rule.Action != fault.CommitThenDrop {
		t.Fatalf("faults applied: %v, want one CommitThenDrop", log)
	}
	if conv.Turns != 3 || len(turns) != 3 {
		t.Fatalf("turns: %d, want 3", conv.Turns)
	}
	first, second := turns[0].Calls[0].Result, turns[1].Calls[0].Result
	if first.IsError || first.Outcome != client.Executed || !strings.HasPrefix(first.Text, "Done: ") {
		t.Errorf("first call: %v %q, want executed (found by the reconcile after the drop)", first.Outcome, first.Text)
	}
	if second.Outcome != client.AlreadyDone || second.IsError {
		t.Errorf("second call: %v %q, want already done", second.Outcome, second.Text)
	}
	// The model was told: the requests carried both tool_results.
	reqs := api.requests()
	got := reqs[2].results()
	if len(got) != 1 || got[0].ToolUseID != "toolu_02" || !strings.HasPrefix(got[0].Text, "Already done earlier in this run: ") || got[0].IsError {
		t.Errorf("second tool_result sent to the model: %+v", got)
	}
	if got := reqs[1].results(); len(got) != 1 || got[0].ToolUseID != "toolu_01" || got[0].Text != first.Text {
		t.Errorf("first tool_result sent to the model: %+v", got)
	}
}

// One answer calls the three tools at once; the model then repeats all
// three with new ids and rephrased free text: one email, one refund, one
// post.
func TestThreeToolsRepeated(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	three := func(ids [3]string, note, text string) step {
		return step{answer: func(apiRequest) ([]map[string]any, string) {
			return []map[string]any{
				{"type": "tool_use", "id": ids[0], "name": "send_reply", "input": map[string]any{"ticketId": 42, "to": "alice@example.com", "text": text}},
				{"type": "tool_use", "id": ids[1], "name": "refund_order", "input": map[string]any{"orderId": "ord_1001", "amount": 1500, "note": note}},
				{"type": "tool_use", "id": ids[2], "name": "publish_post", "input": map[string]any{"slug": "broken-shipments", "channel": "status", "body": "Some parcels arrived broken."}},
			}, "tool_use"
		}}
	}
	api := newStandIn(t,
		three([3]string{"toolu_1", "toolu_2", "toolu_3"}, "broken", "Your refund is on its way."),
		three([3]string{"toolu_4", "toolu_5", "toolu_6"}, "broken parcel", "We have refunded you!"),
		say("All done."),
	)
	_, turns, err := w.run(t, api, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, m, p := len(w.refunds()), len(w.mail.Journal()), len(w.posts.Journal()); r != 1 || m != 1 || p != 1 {
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
	got := api.requests()[2].results()
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
	refund := callTool("toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500}`)
	api := newStandIn(t,
		step{status: 529}, step{status: 429}, refund, // turn 1: two retries
		step{status: 500}, step{status: 408}, say("Refunded."), // turn 2, carrying the result
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
	reqs := api.requests()
	if len(reqs) != 6 {
		t.Fatalf("requests: %d, want 6", len(reqs))
	}
	for i := 4; i < 6; i++ {
		if reqs[i].Raw != reqs[3].Raw {
			t.Errorf("resend %d differs from the first send of turn 2", i)
		}
	}
	if got := reqs[5].results(); len(got) != 1 || got[0].ToolUseID != "toolu_01" || !strings.HasPrefix(got[0].Text, "Done: ") {
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
		callTool("toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500, "note": "broken"}`),
		step{drop: true}, step{status: 500}, // turn 2 fails, retry included
		callTool("toolu_02", "refund_order", `{"orderId": "ord_1001", "amount": 1500.0, "note": "the parcel was broken"}`),
		say("Refunded."),
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
	reqs := api.requests()
	if got := reqs[3].results(); len(got) != 1 || got[0].ToolUseID != "toolu_01" || !strings.HasPrefix(got[0].Text, "Done: ") {
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
