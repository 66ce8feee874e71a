package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// testURL is the broker of ONCELY_AMQP_URL, or the one on 127.0.0.1:5672,
// which this machine and CI run (oncelyamqp's tests start one when none
// answers; their helper is not importable, so this test needs the server).
func testURL() string {
	if u := os.Getenv("ONCELY_AMQP_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// The order published twice is emailed once, the second delivery is
// already done with the same email, and the program's queue is gone
// afterwards.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := Queue()
	var out bytes.Buffer
	if err := run(ctx, &out, testURL(), queue); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	want := "executed\nalready done\nsame email both times: true\nemails sent: 1\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	conn, err := amqp.Dial(testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	// A passive declare of a missing queue fails with 404 NOT_FOUND.
	_, err = ch.QueueDeclarePassive(queue, false, true, false, false, nil)
	if e, ok := err.(*amqp.Error); !ok || e.Code != amqp.NotFound {
		t.Fatalf("queue %s after the run: %v, want NOT_FOUND", queue, err)
	}
}
