// Command nats runs a NATS JetStream consumer that emails an order
// confirmation through Resend, once per order, although the order's
// message is published twice. Resend is oncely's fake (fakes/resendfake)
// and the ledger is the memory ledger; only the NATS server is real.
//
// The program uses the server of ONCELY_NATS_URL (by default
// nats://127.0.0.1:4222, with JetStream), on a stream and subject of its
// own; it deletes the stream when it ends. It prints the number of emails
// sent and exits 0 only when that is 1.
//
//	go run .
//	ONCELY_NATS_URL='nats://nats.example:4222' go run .
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

// DefaultURL is the NATS server used when ONCELY_NATS_URL is not set.
const DefaultURL = "nats://127.0.0.1:4222"

func main() {
	url := os.Getenv("ONCELY_NATS_URL")
	if url == "" {
		url = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, url, Run()); err != nil {
		log.Fatal(err)
	}
}

// Run returns a suffix of its own for a run's stream and subject names;
// yours are fixed.
func Run() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// run publishes the same order twice to stream ORDERS_<run> (which it
// creates, then deletes) on the server of natsURL, consumes both
// messages, and fails unless exactly one email was sent.
func run(ctx context.Context, w io.Writer, natsURL, run string) (err error) {
	srv := resendfake.NewServer(&resendfake.Config{Seed: 1}) // or "https://api.resend.com"
	defer srv.Close()
	mailer := resend.New(srv.URL, &resend.Config{APIKey: "re_123"})

	nc, err := nats.Connect(natsURL) // your NATS URL
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	subject := "example.orders." + run
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS_" + run, Subjects: []string{subject}})
	if err != nil {
		return err
	}
	defer func() {
		if derr := js.DeleteStream(context.WithoutCancel(ctx), "ORDERS_"+run); derr != nil && err == nil {
			err = fmt.Errorf("delete stream: %w", derr)
		}
	}()
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "mailer", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second, MaxDeliver: 5,
	})
	if err != nil {
		return err
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
		return err
	}

	for range 2 {
		if _, err := js.Publish(ctx, subject, []byte(`{"order_id": "42", "email": "ada@example.com"}`)); err != nil {
			return err
		}
	}
	batch, err := cons.Fetch(2)
	if err != nil {
		return err
	}
	var ids []string
	for msg := range batch.Messages() {
		id, res, err := h.Process(ctx, msg) // acked: done now, or done before
		if err != nil {
			return err
		}
		ids = append(ids, id)
		fmt.Fprintln(w, res.Outcome)
	}
	if err := batch.Error(); err != nil {
		return err
	}
	fmt.Fprintln(w, "same email both times:", len(ids) == 2 && ids[0] == ids[1])
	n := len(srv.Journal())
	fmt.Fprintln(w, "emails sent:", n)
	if len(ids) != 2 || n != 1 {
		return fmt.Errorf("%d emails sent for %d deliveries of one order, want 1 for 2", n, len(ids))
	}
	return nil
}
