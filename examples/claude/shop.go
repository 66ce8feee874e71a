package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncely/oncely/agent/oncelyclaude"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/providers/keyheader"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// Shop holds the providers the tools act on.
type Shop struct {
	// Mail sends replies to customers.
	Mail *mail.Client
	// Stripe refunds payments.
	Stripe *stripe.Client
	// Posts publishes posts; a post is created as an order whose sku is
	// "post/<slug>" (the IETF-key API's only resource).
	Posts *keyheader.Client
	// Orders maps the shop's order ids to their Stripe PaymentIntents.
	Orders map[string]string
	// From is the sender of replies.
	From string
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

// ErrUnknownOrder is in the chain of a refund for an order the shop does
// not know.
var ErrUnknownOrder = errors.New("shop: unknown order")

// Tools returns the shop's three tools with their declarations.
func (s *Shop) Tools() []oncelyclaude.Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	return []oncelyclaude.Tool{{
		Tool: client.Tool{
			Name:       "send_reply",
			Identity:   []client.Field{{Path: "ticketId", Norm: client.String}},
			Validated:  []client.Field{{Path: "to", Norm: client.Email}},
			Run:        s.sendReply,
			Reconciler: reconcile.New(s.Mail, nil),
		},
		Description: "Email the customer a reply on a support ticket. One reply per ticket.",
		Properties: map[string]any{
			"ticketId": str("the support ticket"),
			"to":       str("the customer's email address"),
			"text":     str("the reply"),
		},
		Required: []string{"to", "text"},
	}, {
		Tool: client.Tool{
			Name: "refund_order",
			Identity: []client.Field{
				{Path: "orderId", Norm: client.Trimmed},
				{Path: "amount", Norm: client.Integer},
			},
			Run:        s.refundOrder,
			Reconciler: reconcile.New(s.Stripe.Refunds, nil),
		},
		Description: "Refund an amount of an order's payment.",
		Properties: map[string]any{
			"orderId": str("the order, like ord_1001"),
			"amount":  map[string]any{"type": "integer", "description": "the amount in cents"},
			"note":    str("why, for the support log"),
		},
	}, {
		Tool: client.Tool{
			Name:       "publish_post",
			Identity:   []client.Field{{Path: "slug", Norm: client.CaseFolded}},
			Validated:  []client.Field{{Path: "channel", Norm: client.Trimmed}, {Path: "body"}},
			Run:        s.publishPost,
			Reconciler: reconcile.New(s.Posts, nil),
		},
		Description: "Publish a post on a channel (status page, blog). A slug is published once.",
		Properties: map[string]any{
			"slug":    str("the post's slug"),
			"channel": str("where to publish it"),
			"body":    str("the post"),
		},
		Required: []string{"channel", "body"},
	}}
}

func (s *Shop) sendReply(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	var in struct {
		TicketID string `json:"ticketId"` // client.String: 42 arrives as "42"
		To       string `json:"to"`
		Text     string `json:"text"`
	}
	if err := inv.Bind(&in); err != nil {
		return client.Effect{}, err // permanent: nothing was done
	}
	if in.To == "" || in.Text == "" {
		return client.Effect{}, client.Permanent(errors.New("send_reply needs to and text"))
	}
	m, err := s.Mail.Send(ctx, inv.DownstreamKey, mail.Message{
		From: s.From, To: in.To, Subject: "Re: ticket " + in.TicketID, Text: in.Text,
	})
	if err != nil {
		return client.Effect{}, err // a *providers.ProviderError knows its class
	}
	return client.Effect{Summary: m.Summary(), Ref: m.ID}, nil
}

func (s *Shop) refundOrder(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	// The note is free text the model may rephrase: it is not read, since
	// Stripe compares the parameters of a repeated Idempotency-Key.
	var in struct {
		OrderID string `json:"orderId"` // client.Trimmed
		Amount  int64  `json:"amount"`  // client.Integer: "1500" and 1500.0 arrive as 1500
	}
	if err := inv.Bind(&in); err != nil {
		return client.Effect{}, err
	}
	pi, ok := s.Orders[in.OrderID]
	if !ok {
		return client.Effect{}, client.Permanent(fmt.Errorf("%w %s", ErrUnknownOrder, in.OrderID))
	}
	if in.Amount <= 0 {
		return client.Effect{}, client.Permanent(fmt.Errorf("amount: %d is not a positive number of cents", in.Amount))
	}
	re, err := s.Stripe.Refunds.Create(ctx, inv.DownstreamKey, stripe.RefundParams{PaymentIntent: pi, Amount: in.Amount})
	if err != nil {
		return client.Effect{}, err
	}
	return client.Effect{Summary: fmt.Sprintf("%s for order %s", re.Summary(), in.OrderID), Ref: re.ID}, nil
}

func (s *Shop) publishPost(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	var in struct {
		Slug    string `json:"slug"` // client.CaseFolded
		Channel string `json:"channel"`
		Body    string `json:"body"`
	}
	if err := inv.Bind(&in); err != nil {
		return client.Effect{}, err
	}
	if in.Body == "" || in.Channel == "" {
		return client.Effect{}, client.Permanent(errors.New("publish_post needs channel and body"))
	}
	var post struct {
		ID string `json:"id"`
	}
	req := map[string]any{
		"sku": "post/" + in.Slug, "quantity": 1, "customer": in.Channel,
		"metadata": map[string]string{"body": in.Body},
	}
	if _, err := s.Posts.Post(ctx, inv.DownstreamKey, "/v1/orders", req, &post); err != nil {
		return client.Effect{}, err
	}
	return client.Effect{Summary: fmt.Sprintf("post %s published on %s (%s)", in.Slug, in.Channel, post.ID), Ref: post.ID}, nil
}
