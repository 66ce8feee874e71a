package main

import (
	"bytes"
	"context"
	"testing"
)

// The step's retry after a dropped send sends nothing: one receipt, and
// the workflow gets its message id (found by the reconciler), and the
// ledger's done record names it.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, ""); err != nil {
		t.Fatal(err)
	}
	want := "sends attempted: 1\nreceipts sent: 1\nthe workflow got the message sent: true\nledger: send_receipt done, the message sent: true\n"
	if out.String() != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
