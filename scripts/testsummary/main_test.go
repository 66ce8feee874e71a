package main

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// TestProgressAsPackagesFinish: the line of a finished package is written
// before the next package's events are read, with its time; the report
// ends with the run's time and the counts.
func TestProgressAsPackagesFinish(t *testing.T) {
	t.Parallel()
	in, feed := io.Pipe()
	outR, out := io.Pipe()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { c := clock; clock = clock.Add(90 * time.Second); return c }
	code := make(chan int, 1)
	go func() {
		code <- summarize(in, out, io.Discard, "test.log", now)
		out.Close()
	}()
	lines := bufio.NewScanner(outR)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("report ended: %v", lines.Err())
		}
		return lines.Text()
	}
	write := func(events ...string) {
		t.Helper()
		for _, e := range events {
			if _, err := io.WriteString(feed, e+"\n"); err != nil {
				t.Fatal(err)
			}
		}
	}

	write(`{"Action":"start","Package":"github.com/oncely/oncely/client"}`,
		`{"Action":"run","Package":"github.com/oncely/oncely/client","Test":"TestA"}`,
		`{"Action":"pass","Package":"github.com/oncely/oncely/client","Test":"TestA","Elapsed":0.5}`,
		`{"Action":"output","Package":"github.com/oncely/oncely/client","Output":"ok  \tgithub.com/oncely/oncely/client\t12.345s\n"}`,
		`{"Action":"pass","Package":"github.com/oncely/oncely/client","Elapsed":12.345}`)
	// The next package has not begun: the line is there already.
	if got := next(); !strings.HasPrefix(got, "ok   client ") || !strings.HasSuffix(got, " 12.3s") {
		t.Errorf("progress line %q, want 'ok   client ... 12.3s'", got)
	}
	write(`{"Action":"run","Package":"github.com/oncely/oncely/ledger","Test":"TestB"}`,
		`{"Action":"output","Package":"github.com/oncely/oncely/ledger","Test":"TestB","Output":"    b_test.go:9: boom\n"}`,
		`{"Action":"fail","Package":"github.com/oncely/oncely/ledger","Test":"TestB","Elapsed":0.1}`,
		`{"Action":"fail","Package":"github.com/oncely/oncely/ledger","Elapsed":3}`)
	if got := next(); !strings.HasPrefix(got, "FAIL ledger ") || !strings.HasSuffix(got, " 3.0s") {
		t.Errorf("progress line %q, want 'FAIL ledger ... 3.0s'", got)
	}
	feed.Close()
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	report := strings.Join(rest, "\n")
	if !strings.Contains(report, "ledger TestB:") || !strings.Contains(report, "boom") {
		t.Errorf("the failing test is not reported:\n%s", report)
	}
	if n := len(rest); n < 2 || rest[n-2] != "2 packages in 1m30s" || rest[n-1] != "1 passed, 1 failed, 0 skipped" {
		t.Errorf("report does not end with the run's time and the counts:\n%s", report)
	}
	if c := <-code; c != 1 {
		t.Errorf("exit status %d, want 1", c)
	}
}
