package ledgerpg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func params(key, owner string, now time.Time) ledger.ClaimParams {
	return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: owner,
		LeaseUntil: now.Add(30 * time.Second), Fingerprint: "fp-1", ExpiresAt: now.Add(time.Hour)}
}

// 64 claims at once on one key from 8 connections: exactly one wins, and
// every caller is answered in one round trip, the losers with the
// winner's record.
func TestOneWinnerFromEightConnections(t *testing.T) {
	t.Parallel()
	const conns, claims, rounds = 8, 64, 10
	w, pool := newWire(t, conns)
	s := newStore(t, pool, nil)
	base := w.warm(t, pool, conns)
	if n := w.conns.Load(); n != conns {
		t.Fatalf("%d connections, want %d", n, conns)
	}
	ctx := context.Background()
	for round := range rounds {
		key := fmt.Sprintf("race-%d", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			results = make([]ledger.ClaimResult, claims)
			errs    = make([]error, claims)
		)
		for i := range claims {
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.Claim(ctx, params(key, fmt.Sprintf("owner-%d", i), time.Now()))
			})
		}
		close(start)
		wg.Wait()
		winner := ""
		for i, res := range results {
			switch {
			case errs[i] != nil:
				t.Fatalf("%s: claim %d: %v", key, i, errs[i])
			case res.Claimed && winner != "":
				t.Fatalf("%s: two winners, %s and owner-%d", key, winner, i)
			case res.Claimed:
				winner = fmt.Sprintf("owner-%d", i)
			}
		}
		if winner == "" {
			t.Fatalf("%s: no winner", key)
		}
		for i, res := range results {
			if !res.Claimed && (res.Previous == nil || res.Previous.Owner != winner || res.Previous.State != ledger.StatePending) {
				t.Errorf("%s: loser %d saw %+v, want the pending record of %s", key, i, res.Previous, winner)
			}
		}
	}
	if n := w.roundTrips.Load() - base; n != claims*rounds {
		t.Errorf("%d claims took %d round trips, want one each", claims*rounds, n)
	}
	if n := w.conns.Load(); n != conns {
		t.Errorf("%d connections after the claims, want %d", n, conns)
	}
}

// newExecutor returns an executor on s with a send_reply tool that counts
// its effects.
func newExecutor(tb testing.TB, s ledger.Store, cfg *client.Config) (*client.Executor, func(ticket string) client.Call, *int) {
	tb.Helper()
	exec := client.New(s, cfg)
	sent := new(int)
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			*sent++
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		tb.Fatal(err)
	}
	return exec, func(ticket string) client.Call {
		return client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `","text":"Your refund is on its way."}`)}
	}, sent
}

// Round trips on the wire: a fresh action through the executor takes two
// (claim, record), a replay one, and every store call one, also in a
// transaction.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	w, pool := newWire(t, 1)
	s := newStore(t, pool, nil)
	base := w.warm(t, pool, 1)
	ctx := context.Background()
	count := func(what string, want int64, fn func() error) {
		t.Helper()
		before := w.roundTrips.Load()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := w.roundTrips.Load() - before; n != want {
			t.Errorf("%s: %d round trips, want %d", what, n, want)
		}
	}
	exec, call, _ := newExecutor(t, s, nil)
	execute := func(ticket string, want client.Outcome) func() error {
		return func() error {
			res, err := exec.Execute(ctx, "run-1", call(ticket))
			if err == nil && res.Outcome != want {
				err = fmt.Errorf("outcome %s (%s), want %s", res.Outcome, res.Text, want)
			}
			return err
		}
	}
	count("Execute of a new call", 2, execute("7", client.Executed))
	count("Execute of a repeat", 1, execute("7", client.AlreadyDone))

	p := params("k-rt", "owner-a", time.Now())
	claim := func(s ledger.Store, p ledger.ClaimParams, claimed bool) func() error {
		return func() error {
			res, err := s.Claim(ctx, p)
			if err == nil && res.Claimed != claimed {
				err = fmt.Errorf("claim = %+v, want claimed %v", res, claimed)
			}
			return err
		}
	}
	count("Claim of a new key", 1, claim(s, p, true))
	count("Claim refused", 1, claim(s, params(p.Key, "owner-b", time.Now()), false))
	count("Extend", 1, func() error { return s.Extend(ctx, p.Key, p.Owner, time.Now().Add(time.Minute)) })
	count("Fail", 1, func() error { return s.Fail(ctx, p.Key, p.Owner, ledger.Failure{Definite: true}) })
	count("Claim taking over a failed record", 1, claim(s, params(p.Key, "owner-b", time.Now()), true))
	count("Complete", 1, func() error { return s.Complete(ctx, p.Key, "owner-b", ledger.Completion{Summary: "ok"}) })
	count("Get", 1, func() error { _, err := s.Get(ctx, p.Key); return err })

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	st := s.InTx(tx)
	q := params("k-rt-tx", "owner-tx", time.Now())
	count("Claim in a transaction", 1, claim(st, q, true))
	count("Extend in a transaction", 1, func() error { return st.Extend(ctx, q.Key, q.Owner, time.Now().Add(time.Minute)) })
	count("Complete in a transaction", 1, func() error { return st.Complete(ctx, q.Key, q.Owner, ledger.Completion{Summary: "ok"}) })
	t.Logf("%d round trips in all after warming up", w.roundTrips.Load()-base)
}

// Text PostgreSQL cannot store (invalid UTF-8, a NUL byte) in a key or a
// filter is the caller's bad input: ledger.ErrInvalid with a plain
// message, never ErrUnavailable with the server's raw error.
func TestInvalidTextIsInvalid(t *testing.T) {
	s := newStore(t, pgtest.Pool(t), nil)
	ctx := context.Background()
	for _, bad := range []string{"k\x00", "k\xff"} {
		_, err := s.Get(ctx, bad)
		if !errors.Is(err, ledger.ErrInvalid) || errors.Is(err, ledger.ErrUnavailable) || strings.Contains(err.Error(), "SQLSTATE") {
			t.Errorf("Get(%q): %v", bad, err)
		}
		_, err = s.List(ctx, ledger.Filter{RunID: bad, Limit: 1})
		if !errors.Is(err, ledger.ErrInvalid) || strings.Contains(err.Error(), "SQLSTATE") {
			t.Errorf("List(run %q): %v", bad, err)
		}
	}
}
