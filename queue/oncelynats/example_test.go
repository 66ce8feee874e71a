package oncelynats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/providers/resend"
	"github.com/oncely/oncely/queue/oncelynats"
	"github.com/oncely/oncely/reconcile"
)

// A JetStream consumer that emails an order confirmation through Resend,
// once per order, although the order's message is published twice.
func Example() {
	srv := resendfake.NewServer(&resendfake.Config{Seed: 1}) // or "https://api.resend.com"
	defer srv.Close()
	mailer := resend.New(srv.URL, &resend.Config{APIKey: "re_123"})

	ctx := context.Background()
	nc, err := nats.Connect(oncelynats.ServerURLForExamples()) // your NATS URL
	if err != nil {
		panic(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		panic(err)
	}
	run := strings.TrimPrefix(nats.NewInbox(), "_INBOX.") // this run's names
	subject := "example.orders." + run
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS_" + run, Subjects: []string{subject}})
	if err != nil {
		panic(err)
	}
	defer js.DeleteStream(ctx, "ORDERS_"+run)
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "mailer", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: 5,
	})
	if err != nil {
		panic(err)
	}

	exec := client.New(ledgermem.New(nil), nil) // your ledger
	h, err := oncelynats.New(exec, cons, js, "email_order_confirmation", oncelynats.Options{
		Identity:   []oncelyfunc.Key{{Expr: "json_parse(data).order_id", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
	}, func(ctx context.Context, msg jetstream.Msg) (string, error) {
		var order struct {
			OrderID string `json:"order_id"`
			Email   string `json:"email"`
		}
		if err := json.Unmarshal(msg.Data(), &order); err != nil {
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
		if _, err := js.Publish(ctx, subject, []byte(`{"order_id": "42", "email": "ada@example.com"}`)); err != nil {
			panic(err)
		}
	}
	batch, err := cons.Fetch(2)
	if err != nil {
		panic(err)
	}
	var ids []string
	for msg := range batch.Messages() {
		id, res, err := h.Process(ctx, msg) // acked: done now, or done before
		if err != nil {
			panic(err)
		}
		ids = append(ids, id)
		fmt.Println(res.Outcome)
	}
	fmt.Println("same email both times:", len(ids) == 2 && ids[0] == ids[1])
	fmt.Println("emails sent:", len(srv.Journal()))
	// Output:
	// executed
	// already done
	// same email both times: true
	// emails sent: 1
}
