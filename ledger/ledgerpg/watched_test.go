package ledgerpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// listener is a raw connection that LISTENs on a table's channel.
type listener struct {
	t    *testing.T
	conn *pgx.Conn
}

func listenTo(t *testing.T, cfg *ledgerpg.Config) *listener {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	table := cfg.Table
	if table == "" {
		table = ledgerpg.DefaultTable
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ledgerpg.Channel(cfg.Schema, table)}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return &listener{t, conn}
}

// next returns the payload of the next notification, failing the test if
// none comes within 30 s.
func (l *listener) next() string {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := l.conn.WaitForNotification(ctx)
	if err != nil {
		l.t.Fatalf("no notification: %v", err)
	}
	return n.Payload
}

// A settle notifies only a record that a Watch marked while it was
// pending, and a claim that takes a marked record over keeps the mark.
// Each settle of an unmarked record commits before a settle of the marked
// one, and notifications arrive in commit order: the listener's
// notifications are the marked record's alone, as many as its settles.
func TestSettleNotifiesOnlyWatched(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool)}
	s := newStore(t, pool, cfg)
	t.Cleanup(func() { _ = s.Close() })
	l := listenTo(t, cfg)
	now := time.Now()
	claim := func(key, owner string) {
		t.Helper()
		if res, err := s.Claim(ctx, params(key, owner, now)); err != nil || !res.Claimed {
			t.Fatalf("claim %s by %s = %+v, %v", key, owner, res, err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"k-watched", "k-1", "k-2", "k-3", "k-watched-unclaimed"} {
		if k != "k-watched-unclaimed" {
			claim(k, "owner-a")
		}
	}
	ch, stop, err := s.Watch(ctx, "k-watched")
	must(err)
	defer stop()
	// Watched before its claim: not pending, so not marked.
	_, stop2, err := s.Watch(ctx, "k-watched-unclaimed")
	must(err)
	defer stop2()
	claim("k-watched-unclaimed", "owner-a")

	must(s.Complete(ctx, "k-1", "owner-a", ledger.Completion{Summary: "ok"}))
	must(s.Complete(ctx, "k-watched-unclaimed", "owner-a", ledger.Completion{Summary: "ok"}))
	must(s.Fail(ctx, "k-watched", "owner-a", ledger.Failure{Definite: true, Reason: "declined"}))
	if got := l.next(); got != "k-watched" {
		t.Fatalf("first notification for %q, want k-watched", got)
	}
	signalled(t, ch)
	must(s.Fail(ctx, "k-2", "owner-a", ledger.Failure{Definite: true, Reason: "declined"}))
	claim("k-watched", "owner-b") // takes the failed record over
	must(s.Fail(ctx, "k-3", "owner-a", ledger.Failure{Reason: "timeout"}))
	must(s.Complete(ctx, "k-watched", "owner-b", ledger.Completion{Summary: "ok"}))
	if got := l.next(); got != "k-watched" {
		t.Fatalf("second notification for %q, want k-watched (after the takeover)", got)
	}
	signalled(t, ch)
}

// signalled fails the test unless ch receives within 30 s.
func signalled(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatal("the watch got no signal within 30 s")
	}
}

// Watch of a settled record marks nothing, and of a pending one marks it
// once however many watch it: the column, read directly.
func TestWatchMarksPendingOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool)}
	s := newStore(t, pool, cfg)
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	for _, k := range []string{"k-pending", "k-done"} {
		if res, err := s.Claim(ctx, params(k, "owner-a", now)); err != nil || !res.Claimed {
			t.Fatal(res, err)
		}
	}
	if err := s.Complete(ctx, "k-done", "owner-a", ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k-pending", "k-pending", "k-done"} {
		if _, stop, err := s.Watch(ctx, k); err != nil {
			t.Fatal(err)
		} else {
			defer stop()
		}
	}
	rows, _ := pool.Query(ctx, "SELECT key, watched FROM "+pgx.Identifier{cfg.Schema, ledgerpg.DefaultTable}.Sanitize()+" ORDER BY key")
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var k string
		var w bool
		err := r.Scan(&k, &w)
		if w {
			k += " watched"
		}
		return k, err
	})
	if err != nil || len(got) != 2 || got[0] != "k-done" || got[1] != "k-pending watched" {
		t.Errorf("records = %q, %v; want [k-done, k-pending watched]", got, err)
	}
}

// A table at version 5, used by a pool whose sessions have run its
// functions, is migrated: the same sessions claim, watch and settle, and
// the watch is signalled.
func TestMigrateFrom5Watch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	cfg := &ledgerpg.Config{Schema: pgtest.Schema(t, pool)}
	if err := ledgerpg.MigrateTo(ctx, pool, cfg, 5); err != nil {
		t.Fatal(err)
	}
	s, err := ledgerpg.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	now := time.Now()
	for _, k := range []string{"k-old", "k-new"} {
		if res, err := s.Claim(ctx, params(k, "owner-a", now)); err != nil || !res.Claimed {
			t.Fatal(res, err)
		}
	}
	if err := s.Complete(ctx, "k-old", "owner-a", ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(ctx, params("k-old", "owner-b", now)); err != nil || res.Claimed {
		t.Errorf("claim of the done record after the migration = %+v, %v; want refused", res, err)
	}
	ch, stop, err := s.Watch(ctx, "k-new")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := s.Complete(ctx, "k-new", "owner-a", ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	signalled(t, ch)
}
