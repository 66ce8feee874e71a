package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The example sends one email for the model's two calls and tells the
// repeat it was already done.
func TestRun(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	sent, err := Run(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if sent != 1 || !strings.Contains(out.String(), "call_2 send_reply") || !strings.Contains(out.String(), "-> already done") {
		t.Fatalf("%d emails; output:\n%s", sent, out.String())
	}
}
