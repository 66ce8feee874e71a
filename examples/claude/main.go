// Command claude is a complete Claude tool loop whose three side-effecting
// tools run through oncely: send_reply sends an email (an API with no
// idempotency), refund_order refunds a Stripe payment, and publish_post
// publishes a post on an API that honours the IETF Idempotency-Key header.
// However the model repeats a call — with a new tool_use id, a rephrased
// note, after a dropped connection — each action happens once, and the
// model is told so.
//
// It runs against the bundled fake providers, started in-process, and
// prints the transcript: each tool call, what the model was told, and the
// effects counted from the fakes' journals. With ANTHROPIC_API_KEY set it
// talks to the real Messages API:
//
//	go run ./examples/claude "Order ord_1001 arrived broken; refund it and tell the customer on ticket 42."
//
// Without it (or with -offline) the model is a script served by a local
// stand-in for the Messages API (see OfflineScript):
//
//	go run ./examples/claude
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/oncely/oncely/agent/oncelyclaude"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/keyheaderfake"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// DefaultPrompt is the user's message when none is given.
const DefaultPrompt = "Order ord_1001 arrived broken: refund its 15.00 EUR, reply to alice@example.com on ticket 42, " +
	"and publish a short status post (slug broken-shipments) on the status channel."

func main() {
	offline := flag.Bool("offline", false, "talk to the scripted Messages API even when ANTHROPIC_API_KEY is set")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *offline || os.Getenv("ANTHROPIC_API_KEY") == "", strings.Join(flag.Args(), " ")); err != nil {
		log.Fatal(err)
	}
}

// run runs the example, offline or on the real Messages API, with a new
// ledger: the fakes live as long as the process, so must their records.
func run(ctx context.Context, out io.Writer, offline bool, prompt string) error {
	if offline && prompt != "" {
		return fmt.Errorf("the scripted model answers its own prompt only; set ANTHROPIC_API_KEY to ask %q", prompt)
	}
	if prompt == "" {
		prompt = DefaultPrompt
	}
	dir, err := os.MkdirTemp("", "oncely-claude-example")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	w, err := NewWorld(ctx, filepath.Join(dir, "ledger.db"))
	if err != nil {
		return err
	}
	defer w.Close()
	if offline {
		api := NewScriptedAPI(OfflineScript()...)
		defer api.Close()
		err = w.Offline(ctx, out, api)
	} else {
		api := anthropic.NewClient() // ANTHROPIC_API_KEY
		err = w.Converse(ctx, out, &api.Messages, prompt)
	}
	fmt.Fprintf(out, "effects in the fakes' journals: %s\n", w.Effects())
	return err
}

// World is the example's setup: the fake providers, started in-process,
// the shop on them, and an executor on a SQLite ledger with the shop's
// tools registered.
type World struct {
	// Mail, Stripe and Posts are the fake providers.
	Mail   *mailfake.Server
	Stripe *stripefake.Server
	Posts  *keyheaderfake.Server
	// Exec executes the tool calls.
	Exec *client.Executor
	// Tools are the tools' declarations for the model.
	Tools []anthropic.ToolUnionParam
	store *ledgersqlite.Store
}

// NewWorld starts the fakes, creates the shop's paid order and opens the
// ledger at ledgerPath. Close it.
func NewWorld(ctx context.Context, ledgerPath string) (*World, error) {
	w := &World{Mail: mailfake.NewServer(nil), Stripe: stripefake.NewServer(nil), Posts: keyheaderfake.NewServer(nil)}
	shop, err := NewShop(ctx, w.Mail.URL, w.Stripe.URL, w.Posts.URL)
	if err == nil {
		w.store, err = ledgersqlite.Open(ctx, ledgerPath, nil)
	}
	if err == nil {
		w.Exec = client.New(w.store, nil)
		w.Tools, err = oncelyclaude.Register(w.Exec, shop.Tools()...)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Close closes the ledger and stops the fakes.
func (w *World) Close() {
	if w.store != nil {
		_ = w.store.Close()
	}
	w.Mail.Close()
	w.Stripe.Close()
	w.Posts.Close()
}

// Effects counts the effects in the fakes' journals.
type Effects struct {
	Refunds, Replies, Posts int
}

// String lists the counts.
func (e Effects) String() string {
	return fmt.Sprintf("refunds: %d, replies: %d, posts: %d", e.Refunds, e.Replies, e.Posts)
}

// Effects counts what the providers did, from their journals.
func (w *World) Effects() Effects {
	return Effects{
		Refunds: len(fakes.Filter(w.Stripe.Journal(), fakes.KindRefund, "")),
		Replies: len(w.Mail.Journal()),
		Posts:   len(w.Posts.Journal()),
	}
}

// Converse runs the conversation that prompt starts, on api under one run
// id, and writes its transcript to out.
func (w *World) Converse(ctx context.Context, out io.Writer, api oncelyclaude.Messages, prompt string) error {
	fmt.Fprintf(out, "user: %s\n", prompt)
	_, err := oncelyclaude.Run(ctx, api, w.Exec, "claude-example-run", Params(w.Tools, prompt), &oncelyclaude.Config{
		OnTurn: func(_ context.Context, t oncelyclaude.Turn) error {
			printTurn(out, t)
			return nil
		},
	})
	return err
}

// printTurn writes one turn of a transcript: the model's text, then each
// tool call with its input and the tool_result text the model was told.
func printTurn(out io.Writer, t oncelyclaude.Turn) {
	for _, b := range t.Message.Content {
		if b.Type == "text" {
			fmt.Fprintf(out, "claude (turn %d): %s\n", t.N, b.Text)
		}
	}
	for _, c := range t.Calls {
		fmt.Fprintf(out, "  %s %s\n", c.ToolUse.Name, compact(c.ToolUse.Input))
		told := "told"
		if c.Result.IsError {
			told += " (is_error)"
		}
		fmt.Fprintf(out, "    %s: %s\n", told, c.Result.Text)
	}
	if t.Err != nil {
		fmt.Fprintf(out, "  oncely could not guard some calls: %v\n", t.Err)
	}
}

// compact returns a JSON value on one line.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// Params is the first request of the conversation.
func Params(tools []anthropic.ToolUnionParam, prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.ModelClaudeSonnet4_5,
		MaxTokens: 1024,
		System: []anthropic.TextBlockParam{{Text: "You are a support agent for a web shop. Use the tools; " +
			"a tool result that says an action was already done means it is done."}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools:    tools,
	}
}
