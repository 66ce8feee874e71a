// Command rabbitmq runs a RabbitMQ consumer that emails an order
// confirmation through Resend, once per order, although the order's
// message is published twice. Resend is oncely's fake (fakes/resendfake)
// and the ledger is the memory ledger; only the broker is real.
//
// The program uses the broker of ONCELY_AMQP_URL (by default
// amqp://guest:guest@127.0.0.1:5672/), on a queue of its own that it
// deletes when it ends. It prints the number of emails sent and exits 0
// only when that is 1.
//
//	go run .
//	ONCELY_AMQP_URL='amqp://user:password@broker.example:5672/' go run .
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/providers/resend"
	"github.com/oncely/oncely/queue/oncelyamqp"
	"github.com/oncely/oncely/reconcile"
)

// DefaultURL is the broker used when ONCELY_AMQP_URL is not set.
const DefaultURL = "amqp://guest:guest@127.0.0.1:5672/"

func main() {
	url := os.Getenv("ONCELY_AMQP_URL")
	if url == "" {
		url = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, url, Queue()); err != nil {
		log.Fatal(err)
	}
}

// Queue returns a queue name of its own for a run; yours has a fixed name.
func Queue() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "oncely-example-orders-" + hex.EncodeToString(b)
}

// run publishes the same order twice to queue (which it declares, then
// deletes) on the broker of amqpURL, consumes both messages, and fails
// unless exactly one email was sent.
func run(ctx context.Context, w io.Writer, amqpURL, queue string) (err error) {
	srv := resendfake.NewServer(&resendfake.Config{Seed: 1}) // or "https://api.resend.com"
	defer srv.Close()
	mailer := resend.New(srv.URL, &resend.Config{APIKey: "re_123"})

	conn, err := amqp.Dial(amqpURL) // your broker's URL
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	// This run's queue, gone with its connection at the latest; yours is
	// durable, with a dead-letter exchange (x-dead-letter-exchange) for
	// the messages that keep failing.
	q, err := ch.QueueDeclare(queue, false, true, true, false, nil)
	if err != nil {
		return err
	}
	defer func() {
		if _, derr := ch.QueueDelete(q.Name, false, false, false); derr != nil && err == nil {
			err = fmt.Errorf("delete queue: %w", derr)
		}
	}()

	exec := client.New(ledgermem.New(nil), nil) // your ledger
	h, err := oncelyamqp.New(exec, ch, q.Name, "email_order_confirmation", oncelyamqp.Options{
		Identity:   []oncelyfunc.Key{{Expr: "json_parse(body).order_id", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
	}, func(ctx context.Context, d amqp.Delivery) (string, error) {
		var order struct {
			OrderID string `json:"order_id"`
			Email   string `json:"email"`
		}
		if err := json.Unmarshal(d.Body, &order); err != nil {
			return "", client.Permanent(err)
		}
		sent, err := mailer.Send(ctx, oncelyfunc.DownstreamKey(ctx), resend.Email{
			From: "Acme <orders@acme.test>", To: []string{order.Email},
			Subject: "Order " + order.OrderID + " confirmed", Text: "Thank you for your order.",
		})
		if err != nil {
			return "", err
		}
		return sent.ID, nil
	})
	if err != nil {
		return err
	}

	for range 2 {
		if err := ch.PublishWithContext(ctx, "", q.Name, false, false, amqp.Publishing{
			ContentType: "application/json", Body: []byte(`{"order_id": "42", "email": "ada@example.com"}`),
		}); err != nil {
			return err
		}
	}
	deliveries, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	var ids []string
	for range 2 {
		var d amqp.Delivery
		select {
		case d = <-deliveries:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the messages: %w", ctx.Err())
		}
		id, res, err := h.Process(ctx, d) // acked: done now, or done before
		if err != nil {
			return err
		}
		ids = append(ids, id)
		fmt.Fprintln(w, res.Outcome)
	}
	fmt.Fprintln(w, "same email both times:", ids[0] == ids[1])
	n := len(srv.Journal())
	fmt.Fprintln(w, "emails sent:", n)
	if n != 1 {
		return fmt.Errorf("%d emails sent for one order, want 1", n)
	}
	return nil
}
