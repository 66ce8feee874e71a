package fakes_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/oncely/oncely/fakes"
)

func TestJournalConcurrentAppend(t *testing.T) {
	t.Parallel()
	var j fakes.Journal
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			j.Append(fakes.Effect{Kind: fakes.KindMessage, ID: fmt.Sprint(i)})
		})
	}
	wg.Wait()
	snap := j.Snapshot()
	if len(snap) != 64 || j.Len() != 64 {
		t.Fatalf("journal has %d effects (Len %d), want 64", len(snap), j.Len())
	}
	ids := map[string]bool{}
	for i, e := range snap {
		if e.Seq != i+1 {
			t.Fatalf("effect %d has Seq %d", i, e.Seq)
		}
		ids[e.ID] = true
	}
	if len(ids) != 64 {
		t.Fatalf("%d distinct effects, want 64", len(ids))
	}
}

func TestJournalSnapshotIsACopy(t *testing.T) {
	t.Parallel()
	var j fakes.Journal
	params := map[string]string{"amount": "100"}
	j.Append(fakes.Effect{Kind: fakes.KindRefund, Params: params})
	params["amount"] = "caller changed it"
	snap := j.Snapshot()
	snap[0].Params["amount"] = "reader changed it"
	if got := j.Snapshot()[0].Params["amount"]; got != "100" {
		t.Fatalf("stored amount = %q, want 100", got)
	}
	j.Reset()
	if j.Len() != 0 {
		t.Fatal("Reset kept effects")
	}
	if e := j.Append(fakes.Effect{}); e.Seq != 1 {
		t.Fatalf("first Seq after Reset = %d", e.Seq)
	}
}

func TestFilter(t *testing.T) {
	t.Parallel()
	effects := []fakes.Effect{
		{Kind: fakes.KindRefund, Key: "a"},
		{Kind: fakes.KindRefund, Key: "b"},
		{Kind: fakes.KindMessage, Key: "a"},
	}
	for _, tc := range []struct {
		kind, key string
		want      int
	}{{"", "", 3}, {fakes.KindRefund, "", 2}, {"", "a", 2}, {fakes.KindRefund, "a", 1}, {fakes.KindOrder, "", 0}} {
		if got := len(fakes.Filter(effects, tc.kind, tc.key)); got != tc.want {
			t.Errorf("Filter(%q, %q) = %d effects, want %d", tc.kind, tc.key, got, tc.want)
		}
	}
}

func ExampleJournal() {
	var j fakes.Journal
	j.Append(fakes.Effect{Kind: fakes.KindMessage, ID: "msg_1", Key: "order-42"})
	j.Append(fakes.Effect{Kind: fakes.KindMessage, ID: "msg_2", Key: "order-42"})
	dups := fakes.Filter(j.Snapshot(), fakes.KindMessage, "order-42")
	fmt.Println(len(dups), "messages for order-42")
	// Output: 2 messages for order-42
}
