package main

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/oncely/oncely/fakes/fault"
)

// The offline mode, as `go run ./examples/claude` runs it without a key:
// the transcript shows each call and what the model was told, which is
// what reached the Messages API, and each effect happened once.
func TestOffline(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	api := newStandIn(t, OfflineScript()...)
	var out strings.Builder
	err := w.Offline(context.Background(), &out, api)
	t.Log("transcript:\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := w.Effects(), (Effects{Refunds: 1, Replies: 1, Posts: 1}); got != want {
		t.Fatalf("effects in the journals: %v, want %v", got, want)
	}
	if log := w.Stripe.Faults.Log(); len(log) != 1 || log[0].Rule.Action != fault.CommitThenDrop {
		t.Fatalf("faults applied by the fake Stripe: %v, want one CommitThenDrop", log)
	}
	if st := w.Exec.Stats(); st.Executed != 3 || st.Replayed != 2 {
		t.Errorf("executor: %d tool runs, %d replays; want 3 and 2", st.Executed, st.Replayed)
	}
	reqs := api.Requests()
	var statuses []int
	for _, r := range reqs {
		statuses = append(statuses, r.Status)
	}
	if !slices.Equal(statuses, []int{200, 529, 200, 200}) {
		t.Fatalf("the stand-in answered %v, want 200, 529, 200, 200", statuses)
	}

	// What the transcript says the model was told, turn by turn, is what
	// the next request carried.
	var told []string
	for line := range strings.Lines(out.String()) {
		if text, ok := strings.CutPrefix(line, "    told: "); ok {
			told = append(told, strings.TrimSuffix(text, "\n"))
		}
	}
	var sent []ToolResult
	for _, i := range []int{2, 3} { // request 2 was answered 529 and sent again as 3
		sent = append(sent, reqs[i].ToolResults()...)
	}
	wantIDs := []string{"toolu_01", "toolu_02", "toolu_03", "toolu_04", "toolu_05"}
	if len(told) != len(wantIDs) || len(sent) != len(wantIDs) {
		t.Fatalf("told %d results in the transcript, %d on the wire; want %d", len(told), len(sent), len(wantIDs))
	}
	for i, id := range wantIDs {
		want := "Done: "
		if i >= 3 {
			want = "Already done earlier in this run: "
		}
		if !strings.HasPrefix(told[i], want) {
			t.Errorf("%s: told %q, want %q...", id, told[i], want)
		}
		if sent[i].ToolUseID != id || sent[i].Text != told[i] || sent[i].IsError {
			t.Errorf("%s: sent %+v, transcript says %q", id, sent[i], told[i])
		}
	}
	if reqs[1].Raw != reqs[2].Raw {
		t.Error("the SDK's retry after the 529 is not the same request")
	}
}

// run is main without the flags: offline, it prints the transcript and
// the effects; a prompt of one's own needs the real model.
func TestRunOffline(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	err := run(context.Background(), &out, true, "")
	t.Log("output:\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	if want := "effects in the fakes' journals: refunds: 1, replies: 1, posts: 1\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("output does not end with %q", want)
	}
	if err := run(context.Background(), io.Discard, true, "refund everything"); err == nil {
		t.Error("offline with a prompt of one's own: no error")
	}
}
