package oncelyamqp_test

import (
	"context"
	"encoding/json"
	"fmt"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/providers/resend"
	"github.com/oncely/oncely/queue/oncelyamqp"
	"github.com/oncely/oncely/reconcile"
)

// A RabbitMQ consumer that emails an order confirmation through Resend,
// once per order, although the order's message is published twice.
func Example() {
	srv := resendfake.NewServer(&resendfake.Config{Seed: 1}) // or "https://api.resend.com"
	defer srv.Close()
	mailer := resend.New(srv.URL, &resend.Config{APIKey: "re_123"})

	ctx := context.Background()
	conn, err := amqp.Dial(oncelyamqp.ServerURLForExamples()) // your broker's URL
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		panic(err)
	}
	// A server-named queue for this run; yours has a name, and a
	// dead-letter exchange (x-dead-letter-exchange) for the messages that
	// keep failing.
	q, err := ch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		panic(err)
	}

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
		panic(err)
	}

	for range 2 {
		if err := ch.PublishWithContext(ctx, "", q.Name, false, false, amqp.Publishing{
			ContentType: "application/json", Body: []byte(`{"order_id": "42", "email": "ada@example.com"}`),
		}); err != nil {
			panic(err)
		}
	}
	deliveries, err := ch.Consume(q.Name, "", false, false, false, false, nil)
	if err != nil {
		panic(err)
	}
	var ids []string
	for range 2 {
		id, res, err := h.Process(ctx, <-deliveries) // acked: done now, or done before
		if err != nil {
			panic(err)
		}
		ids = append(ids, id)
		fmt.Println(res.Outcome)
	}
	fmt.Println("same email both times:", ids[0] == ids[1])
	fmt.Println("emails sent:", len(srv.Journal()))
	// Output:
	// executed
	// already done
	// same email both times: true
	// emails sent: 1
}
