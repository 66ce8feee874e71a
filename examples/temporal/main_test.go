package main

import (
	"bytes"
	"strings"
	"testing"
)

// The example sends two receipts: both executions of order A-1 are told
// the first one's id, and the workflow whose send lost its answer
// completes with the id of the message the reconciler found.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || lines[3] != "receipts sent: 2" {
		t.Fatalf("output:\n%s\nwant three runs and two receipts", out.String())
	}
	id := func(line string) string { return line[strings.LastIndex(line, " ")+1:] }
	if first, second := id(lines[0]), id(lines[1]); !strings.HasPrefix(first, "msg_") || first != second {
		t.Fatalf("the runs of A-1 were told %q and %q, want the same message", first, second)
	}
	if third := id(lines[2]); !strings.HasPrefix(third, "msg_") || third == id(lines[0]) {
		t.Fatalf("the run of B-2 was told %q, want its own message id", third)
	}
}
