package main

import (
	"bytes"
	"strings"
	"testing"
)

// The example sends one receipt, and both executions are told its id.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[2] != "receipts sent: 1" {
		t.Fatalf("output:\n%s\nwant two runs and one receipt", out.String())
	}
	first, second := lines[0][strings.LastIndex(lines[0], " ")+1:], lines[1][strings.LastIndex(lines[1], " ")+1:]
	if first == "" || first != second {
		t.Fatalf("the runs were told %q and %q, want the same message", first, second)
	}
}
