package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testURL is the server of ONCELY_NATS_URL, or the one on 127.0.0.1:4222,
// which this machine and CI run (oncelynats's tests start one when none
// answers; their helper is not importable, so this test needs the server).
func testURL() string {
	if u := os.Getenv("ONCELY_NATS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// The order published twice is emailed once, the second delivery is
// already done with the same email, and the program's stream is gone
// afterwards.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	suffix := Run()
	var out bytes.Buffer
	if err := run(ctx, &out, testURL(), suffix); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	want := "executed\nalready done\nsame email both times: true\nemails sent: 1\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	nc, err := nats.Connect(testURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, "ORDERS_"+suffix); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("stream ORDERS_%s after the run: %v, want not found", suffix, err)
	}
}
