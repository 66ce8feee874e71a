package main

import (
	"io"
	"os"
	"testing"
)

// TestQuickStart runs the program as the README's Quick start shows it and
// checks what it prints.
func TestQuickStart(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		out <- b
	}()
	main()
	os.Stdout = stdout
	w.Close()
	want := "Done: reply sent on ticket 42\n" +
		"Already done earlier in this run: reply sent on ticket 42. Do not repeat it.\n" +
		"replies sent: 1\n"
	if got := string(<-out); got != want {
		t.Errorf("the Quick start printed\n%s\nwant\n%s", got, want)
	}
}
