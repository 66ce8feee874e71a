package ledgerredis_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// Only the settle of a record a Store watches is published: the settles
// of others, before and after, send nothing on the ledger's channel,
// which a subscriber of its own reads in the order the server published.
// A record watched before its claim is not marked (it was not pending);
// a claim that takes a watched record over keeps the mark.
func TestSettlePublishesOnlyWatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)
	s := ledgerredis.New(redistest.NewClient(t, url), &ledgerredis.Config{Prefix: prefix})
	t.Cleanup(func() { _ = s.Close() })
	sub := redistest.NewClient(t, url).Subscribe(ctx, prefix+":settled")
	t.Cleanup(func() { _ = sub.Close() })
	if _, err := sub.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		m, err := sub.ReceiveMessage(rctx)
		if err != nil {
			t.Fatalf("no message: %v", err)
		}
		return m.Payload
	}
	now := time.Now()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	claim := func(key, owner string) {
		t.Helper()
		if res, err := s.Claim(ctx, params(key, owner, now)); err != nil || !res.Claimed {
			t.Fatalf("claim %s by %s = %+v, %v", key, owner, res, err)
		}
	}
	for _, k := range []string{"k-watched", "k-1", "k-2", "k-3"} {
		claim(k, "owner-a")
	}
	ch, stop, err := s.Watch(ctx, "k-watched")
	must(err)
	defer stop()
	_, stop2, err := s.Watch(ctx, "k-watched-unclaimed")
	must(err)
	defer stop2()
	claim("k-watched-unclaimed", "owner-a")

	must(s.Complete(ctx, "k-1", "owner-a", ledger.Completion{Summary: "ok"}))
	must(s.Complete(ctx, "k-watched-unclaimed", "owner-a", ledger.Completion{Summary: "ok"}))
	must(s.Fail(ctx, "k-watched", "owner-a", ledger.Failure{Definite: true, Reason: "declined"}))
	if got := next(); got != "k-watched" {
		t.Fatalf("first message for %q, want k-watched", got)
	}
	signalled(t, ch)
	must(s.Fail(ctx, "k-2", "owner-a", ledger.Failure{Definite: true, Reason: "declined"}))
	claim("k-watched", "owner-b") // takes the failed record over
	must(s.Fail(ctx, "k-3", "owner-a", ledger.Failure{Reason: "timeout"}))
	must(s.Complete(ctx, "k-watched", "owner-b", ledger.Completion{Summary: "ok"}))
	if got := next(); got != "k-watched" {
		t.Fatalf("second message for %q, want k-watched (after the takeover)", got)
	}
	signalled(t, ch)
}

// signalled fails t unless ch is signalled within a generous deadline.
func signalled(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("watch not signalled")
	}
}
