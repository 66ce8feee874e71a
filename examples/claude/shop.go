// Command claude is a complete Claude tool loop whose three side-effecting
// tools run through idemkit: send_reply sends an email (an API with no
// idempotency), refund_order refunds a Stripe payment, and publish_post
// publishes a post on an API that honours the IETF Idempotency-Key header.
// However the model repeats a call — with a new tool_use id, a rephrased
// note, after a dropped connection — each action happens once, and the
// model is told so.
//
// It runs against the bundled fake providers, started in-process, and the
// real Messages API (ANTHROPIC_API_KEY):
//
//	go run ./examples/claude "Order ord_1001 arrived broken; refund it and tell the customer on ticket 42."
//
// The tests drive the same loop offline, against a scripted stand-in for the
// Messages API.
package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/idemkit/idemkit/agent/claude"
	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/providers/keyheader"
	"github.com/idemkit/idemkit/providers/mail"
	"github.com/idemkit/idemkit/providers/stripe"
	"github.com/idemkit/idemkit/reconcile"
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

// ErrUnknownOrder is in the chain of a refund for an order the shop does
// not know.
var ErrUnknownOrder = errors.New("shop: unknown order")

// Tools returns the shop's three tools with their declarations.
func (s *Shop) Tools() []claude.Tool {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	return []claude.Tool{{
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

// fields reads a call's input with the normalizers of its identity and
// validated fields, so the tool acts on exactly the values its key was
// derived from.
func fields(inv client.Invocation, want map[string]client.Normalizer) (map[string]any, error) {
	obj, err := client.ParseInput(inv.Input, 0)
	if err != nil {
		return nil, client.Permanent(err)
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
		if n := want[k]; n != nil {
			if out[k], err = n.Normalize(v); err != nil {
				return nil, client.Permanent(fmt.Errorf("%s: %w", k, err))
			}
		}
	}
	return out, nil
}

func (s *Shop) sendReply(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	in, err := fields(inv, map[string]client.Normalizer{"ticketId": client.String, "to": client.Email})
	if err != nil {
		return client.Effect{}, err
	}
	to, _ := in["to"].(string)
	text, _ := in["text"].(string)
	if to == "" || text == "" {
		return client.Effect{}, client.Permanent(errors.New("send_reply needs to and text"))
	}
	m, err := s.Mail.Send(ctx, inv.DownstreamKey, mail.Message{
		From: s.From, To: to, Subject: fmt.Sprintf("Re: ticket %v", in["ticketId"]), Text: text,
	})
	if err != nil {
		return client.Effect{}, err // a *providers.ProviderError knows its class
	}
	return client.Effect{Summary: m.Summary(), Ref: m.ID}, nil
}

func (s *Shop) refundOrder(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	in, err := fields(inv, map[string]client.Normalizer{"orderId": client.Trimmed, "amount": client.Integer})
	if err != nil {
		return client.Effect{}, err
	}
	order := in["orderId"].(string)
	pi, ok := s.Orders[order]
	if !ok {
		return client.Effect{}, client.Permanent(fmt.Errorf("%w %s", ErrUnknownOrder, order))
	}
	cents, err := strconv.ParseInt(fmt.Sprint(in["amount"]), 10, 64)
	if err != nil || cents <= 0 {
		return client.Effect{}, client.Permanent(fmt.Errorf("amount: %v is not a positive number of cents", in["amount"]))
	}
	// The note is free text the model may rephrase: it is not sent, since
	// Stripe compares the parameters of a repeated Idempotency-Key.
	re, err := s.Stripe.Refunds.Create(ctx, inv.DownstreamKey, stripe.RefundParams{PaymentIntent: pi, Amount: cents})
	if err != nil {
		return client.Effect{}, err
	}
	return client.Effect{Summary: fmt.Sprintf("%s for order %s", re.Summary(), order), Ref: re.ID}, nil
}

func (s *Shop) publishPost(ctx context.Context, inv client.Invocation) (client.Effect, error) {
	in, err := fields(inv, map[string]client.Normalizer{"slug": client.CaseFolded, "channel": client.Trimmed})
	if err != nil {
		return client.Effect{}, err
	}
	body, _ := in["body"].(string)
	channel, _ := in["channel"].(string)
	if body == "" || channel == "" {
		return client.Effect{}, client.Permanent(errors.New("publish_post needs channel and body"))
	}
	var post struct {
		ID string `json:"id"`
	}
	req := map[string]any{
		"sku": "post/" + in["slug"].(string), "quantity": 1, "customer": channel,
		"metadata": map[string]string{"body": body},
	}
	if _, err := s.Posts.Post(ctx, inv.DownstreamKey, "/v1/orders", req, &post); err != nil {
		return client.Effect{}, err
	}
	return client.Effect{Summary: fmt.Sprintf("post %s published on %s (%s)", in["slug"], channel, post.ID), Ref: post.ID}, nil
}
