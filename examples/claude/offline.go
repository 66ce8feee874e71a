package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/oncely/oncely/fakes/fault"
)

// OfflineScript is the model's side of the offline conversation. It
// answers DefaultPrompt by calling the three tools; its next answer comes
// after one 529 Overloaded, which the SDK retries; then it calls the
// refund and the reply again, with new tool_use ids, rephrased text and
// drifted input (" ord_1001", "1500", "42", a capitalised address); it
// ends by summing up.
func OfflineScript() []Step {
	return []Step{
		CallTools("I'll refund the order, answer Alice and post a status update.",
			ToolUse{"toolu_01", "refund_order", `{"orderId": "ord_1001", "amount": 1500, "note": "Parcel arrived broken."}`},
			ToolUse{"toolu_02", "send_reply", `{"ticketId": 42, "to": "alice@example.com", "text": "Sorry about the broken parcel: your 15.00 EUR are refunded."}`},
			ToolUse{"toolu_03", "publish_post", `{"slug": "broken-shipments", "channel": "status", "body": "Some parcels arrived broken; their orders are being refunded."}`},
		),
		{Status: 529},
		CallTools("Let me make sure the refund and the reply went out.",
			ToolUse{"toolu_04", "refund_order", `{"orderId": " ord_1001", "amount": "1500", "note": "Refunding the broken order as promised."}`},
			ToolUse{"toolu_05", "send_reply", `{"ticketId": "42", "to": "Alice@Example.com", "text": "Your refund of 15.00 EUR is on its way."}`},
		),
		Say("Order ord_1001 is refunded (15.00 EUR), Alice has one reply on ticket 42, and the status post is up."),
	}
}

// Offline runs DefaultPrompt against api (a ScriptedAPI serving
// OfflineScript) with the SDK's client, while the fake Stripe commits the
// first refund and drops its connection. It writes the transcript to out,
// then what the stand-in answered, which faults the fake Stripe applied,
// and the executor's counts.
func (w *World) Offline(ctx context.Context, out io.Writer, api *ScriptedAPI) error {
	w.Stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.CommitThenDrop})
	fmt.Fprintln(out, "offline: the model is a script served on 127.0.0.1; set ANTHROPIC_API_KEY to talk to Claude")
	c := anthropic.NewClient(option.WithoutEnvironmentDefaults(), option.WithBaseURL(api.URL), option.WithAPIKey("sk-ant-offline"))
	err := w.Converse(ctx, out, &c.Messages, DefaultPrompt)
	var answered []string
	for _, r := range api.Requests() {
		answered = append(answered, strconv.Itoa(r.Status))
	}
	fmt.Fprintf(out, "scripted messages api answered: %s (the SDK retries a 529)\n", strings.Join(answered, ", "))
	for _, a := range w.Stripe.Faults.Log() {
		fmt.Fprintf(out, "fake stripe: fault %s on its request %d (%s)\n", a.Rule.Action, a.Request, a.Target)
	}
	st := w.Exec.Stats()
	fmt.Fprintf(out, "executor: %d tool runs, %d repeats answered from the ledger\n", st.Executed, st.Replayed)
	return err
}
