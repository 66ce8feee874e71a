package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/idemkit/idemkit/agent/claude"
	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/fakes"
	"github.com/idemkit/idemkit/fakes/keyheaderfake"
	"github.com/idemkit/idemkit/fakes/mailfake"
	"github.com/idemkit/idemkit/fakes/stripefake"
	"github.com/idemkit/idemkit/ledger/ledgersqlite"
	"github.com/idemkit/idemkit/providers/keyheader"
	"github.com/idemkit/idemkit/providers/mail"
	"github.com/idemkit/idemkit/providers/stripe"
)

func main() {
	prompt := strings.Join(os.Args[1:], " ")
	if prompt == "" {
		prompt = "Order ord_1001 arrived broken: refund its 15.00 EUR, reply to alice@example.com on ticket 42, and publish a short status post (slug broken-shipments) on the status channel."
	}
	ctx := context.Background()
	mailSrv, stripeSrv, postSrv := mailfake.NewServer(nil), stripefake.NewServer(nil), keyheaderfake.NewServer(nil)
	defer mailSrv.Close()
	defer stripeSrv.Close()
	defer postSrv.Close()
	shop, err := NewShop(ctx, mailSrv.URL, stripeSrv.URL, postSrv.URL)
	if err != nil {
		log.Fatal(err)
	}
	store, err := ledgersqlite.Open(ctx, filepath.Join(os.TempDir(), "idemkit-claude-example.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	exec := client.New(store, nil)
	tools, err := claude.Register(exec, shop.Tools()...)
	if err != nil {
		log.Fatal(err)
	}
	api := anthropic.NewClient() // ANTHROPIC_API_KEY
	conv, err := claude.Run(ctx, &api.Messages, exec, "claude-example-run", Params(tools, prompt), &claude.Config{
		OnTurn: func(_ context.Context, t claude.Turn) error {
			for _, c := range t.Calls {
				fmt.Printf("turn %d: %s %s -> %s\n", t.N, c.ToolUse.Name, c.ToolUse.Input, c.Result.Text)
			}
			return nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range conv.Final.Content {
		if b.Type == "text" {
			fmt.Println(b.Text)
		}
	}
	fmt.Printf("refunds: %d, replies: %d, posts: %d\n",
		len(fakes.Filter(stripeSrv.Journal(), fakes.KindRefund, "")), len(mailSrv.Journal()), len(postSrv.Journal()))
}

// NewShop connects the providers at the given base URLs and creates the
// paid order ord_1001 (15.00 EUR).
func NewShop(ctx context.Context, mailURL, stripeURL, postsURL string) (*Shop, error) {
	s := &Shop{
		Mail:   mail.New(mailURL, nil),
		Stripe: stripe.New(stripeURL, &stripe.Config{APIKey: "sk_test_example"}),
		Posts:  keyheader.New(postsURL, nil),
		From:   "support@shop.example",
	}
	pi, err := s.Stripe.PaymentIntents.Create(ctx, "ord_1001-payment", stripe.PaymentIntentParams{
		Amount: 1500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
	})
	if err != nil {
		return nil, fmt.Errorf("claude example: paying order ord_1001: %w", err)
	}
	s.Orders = map[string]string{"ord_1001": pi.ID}
	return s, nil
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
