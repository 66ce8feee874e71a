package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/fault"
)

// After a client gives up on a delayed request, quiet returns only once
// the fake has committed it: a lookup after quiet sees the effect.
func TestConnTrackerWaitsForDelayedCommit(t *testing.T) {
	t.Parallel()
	tr := newConnTracker()
	set, err := startFakes(fakeConfig{seed: 1, conns: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer set.close()
	mail := set.servers["mail"]
	mail.faults.Add(fault.Rule{Route: "POST /v1/messages", Attempt: 1, Action: fault.Delay})

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "POST", mail.url+"/v1/messages",
		strings.NewReader(`{"from": "a@example.com", "to": "b@example.com", "text": "hi", "reference": "r1"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sent := make(chan error, 1)
	go func() {
		resp, err := tr.client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
		sent <- err
	}()
	// Give up once the fake holds the request.
	deadline := time.Now().Add(time.Minute)
	for len(mail.faults.Log()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the fake")
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("request: %v, want it cancelled", err)
	}
	qctx, qcancel := context.WithTimeout(context.Background(), time.Minute)
	defer qcancel()
	if err := tr.quiet(qctx); err != nil {
		t.Fatal(err)
	}
	if n := len(mail.handler.Journal()); n != 1 {
		t.Fatalf("journal has %d effects after quiet, want the delayed commit", n)
	}

	// A connection the tracker did not dial (another client's, kept
	// alive and closed whenever) does not hold quiet up.
	c1, c2 := net.Pipe()
	defer c1.Close()
	defer c2.Close()
	tr.serverState(c1, http.StateClosed)
	if err := tr.quiet(qctx); err != nil {
		t.Fatal(err)
	}
}
