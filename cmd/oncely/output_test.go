package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Colour codes never shift the columns: widths are measured on the text.
func TestTableAlignsColouredCells(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		tb := newTable("KEY", "STATE", "TOOL")
		tb.rowCells(cell{text: "k1"}, cell{text: "uncertain", colour: yellow}, cell{text: "send_reply"})
		tb.rowCells(cell{text: "key-22"}, cell{text: "done", colour: green}, cell{text: "refund"})
		var b bytes.Buffer
		tb.write(&b, colours{on: on})
		out := b.String()
		if strings.Contains(out, "\x1b[") != on {
			t.Errorf("colour %v: escape codes present: %v\n%q", on, !on, out)
		}
		plain := strings.NewReplacer("\x1b[0m", "", "\x1b[1m", "", "\x1b[32m", "", "\x1b[33m", "").Replace(out)
		want := "KEY     STATE      TOOL\nk1      uncertain  send_reply\nkey-22  done       refund\n"
		if plain != want {
			t.Errorf("colour %v: table\n%s\nwant\n%s", on, plain, want)
		}
	}
}

func TestColourOnlyOnATerminalWithoutNoColor(t *testing.T) {
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "xterm-256color")
	if coloursFor(&bytes.Buffer{}).on || colourAllowed(false) {
		t.Error("colour on for output that is not a terminal")
	}
	if !colourAllowed(true) {
		t.Error("colour off on a terminal")
	}
	t.Setenv("NO_COLOR", "1")
	if colourAllowed(true) {
		t.Error("colour on with NO_COLOR set")
	}
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "dumb")
	if colourAllowed(true) {
		t.Error("colour on a dumb terminal")
	}
}

func TestRelative(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"}, {-30 * time.Second, "30s ago"}, {-5 * time.Minute, "5m ago"}, {2*time.Hour + 3*time.Minute, "in 2h03m"},
		{-72 * time.Hour, "3d ago"},
	} {
		if got := relative(now.Add(tc.d), now); got != tc.want {
			t.Errorf("relative(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
}
