package ledgersqlite_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
)

// actionKey returns a key shaped like the executor's (hex sha256), so that
// every benchmark inserts into the same spread of B-tree pages.
func actionKey(i int) string {
	sum := sha256.Sum256([]byte("fresh-" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:])
}

// rawStatements are the statements of the raw floor, prepared directly
// through database/sql on one connection to a file the store created (same
// schema and PRAGMAs: WAL, synchronous as given, FULL or NORMAL, busy
// timeout).
type rawStatements struct {
	insert, update, get *sql.Stmt
}

func openRaw(b *testing.B, path, synchronous string) rawStatements {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000&_synchronous="+synchronous)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	prepare := func(q string) *sql.Stmt {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	const insert = `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at, fingerprint, attempt, attempt_at, updated_at)
		VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7, 1, ?8, ?8)`
	return rawStatements{
		insert: prepare(insert),
		update: prepare(`UPDATE records SET state = 'done', summary = ?3, ref = ?4, result = ?5, truncated = ?6, lease_until = ?7, updated_at = ?7
		WHERE key = ?1 AND owner = ?2 AND state = 'pending' AND expires_at > ?7`),
		get: prepare(`SELECT key, tool, run_id, state, owner, lease_until, expires_at, fingerprint, attempt, attempt_at,
		summary, ref, result, truncated, reason, updated_at FROM records WHERE key = ?1`),
	}
}

// fresh makes one fresh action by hand: the claim's INSERT and the
// completion's conditional UPDATE, each its own transaction.
func (r rawStatements) fresh(ctx context.Context, key, fingerprint string) error {
	now := time.Now()
	if _, err := r.insert.ExecContext(ctx, key, "send_reply", "run-1", "owner", now.Add(time.Minute).UnixMilli(), now.Add(time.Hour).UnixMilli(), fingerprint, now.UnixMilli()); err != nil {
		return err
	}
	_, err := r.update.ExecContext(ctx, key, "owner", "sent", "msg_1", []byte(`{"id":"msg_1"}`), false, time.Now().UnixMilli())
	return err
}

// newExecutor returns an executor on s with a send_reply tool that only
// reports an effect (and counts its runs in the returned counter), and a
// builder of its calls.
func newExecutor(tb testing.TB, s ledger.Store) (*client.Executor, func(ticket string) client.Call, *atomic.Int64) {
	exec := client.New(s, nil)
	runs := new(atomic.Int64)
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			runs.Add(1)
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		tb.Fatal(err)
	}
	return exec, func(ticket string) client.Call {
		return client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `","text":"Your refund is on its way."}`)}
	}, runs
}

// The raw floor: the statements a claim and a completion need (fresh),
// and the one SELECT of the record a replay needs at least (replay),
// issued directly through database/sql on a file with the same schema and
// PRAGMAs (WAL, synchronous=FULL, busy timeout), prepared, on one
// connection.
func BenchmarkRawFloor(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "raw.db")
	open(b, path, nil).Close() // creates the schema, switches to WAL
	raw := openRaw(b, path, "FULL")
	insert, update, get := raw.insert, raw.update, raw.get
	claimArgs := func(key string) []any {
		now := time.Now()
		return []any{key, "send_reply", "run-1", "owner", now.Add(time.Minute).UnixMilli(), now.Add(time.Hour).UnixMilli(), "fp", now.UnixMilli()}
	}
	result := []byte(`{"id":"msg_1"}`)
	if _, err := insert.ExecContext(ctx, claimArgs("replay")...); err != nil {
		b.Fatal(err)
	}

	i := 0 // shared by the runs of -count
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			i++
			key := actionKey(i)
			if _, err := insert.ExecContext(ctx, claimArgs(key)...); err != nil {
				b.Fatal(err)
			}
			res, err := update.ExecContext(ctx, key, "owner", "sent", "msg_1", result, false, time.Now().UnixMilli())
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				b.Fatalf("update changed %d rows", n)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			var (
				r                   ledger.Record
				lease, exp, at, upd int64
			)
			if err := get.QueryRowContext(ctx, "replay").Scan(&r.Key, &r.Tool, &r.RunID, &r.State, &r.Owner, &lease, &exp, &r.Fingerprint,
				&r.Attempt, &at, &r.Summary, &r.Ref, &r.Result, &r.Truncated, &r.Reason, &upd); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The store doing the same: Claim + Complete on a new key, and a Claim on a
// done key.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "store.db"), nil)
	defer s.Close()
	params := func(key string) ledger.ClaimParams {
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	if _, err := s.Claim(ctx, params("replay")); err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, "replay", "owner", done); err != nil {
		b.Fatal(err)
	}

	i := 0 // shared by the runs of -count
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			i++
			p := params(actionKey(i))
			res, err := s.Claim(ctx, p)
			if err != nil || !res.Claimed {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
			if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			res, err := s.Claim(ctx, params("replay"))
			if err != nil || res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
		}
	})
}

// The executor doing the same through the store: key derivation, claim,
// the tool (which does nothing), and the record; and a replay of a done
// call. Compare with BenchmarkRawFloor in the same run.
func BenchmarkExecute(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "exec.db"), nil)
	defer s.Close()
	exec, call, _ := newExecutor(b, s)
	if r, err := exec.Execute(ctx, "run-1", call("replay")); err != nil || r.Outcome != client.Executed {
		b.Fatal(r, err)
	}
	i := 0
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			i++
			if r, err := exec.Execute(ctx, "run-1", call(strconv.Itoa(i))); err != nil || r.Outcome != client.Executed {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if r, err := exec.Execute(ctx, "run-1", call("replay")); err != nil || r.Outcome != client.AlreadyDone {
				b.Fatal(r, err)
			}
		}
	})
}

// Fresh actions are bound by disk syncs, whose cost drifts between
// benchmarks run one after another. This one measures the raw floor, the
// store and the executor in turn within every iteration, on one file, and
// reports their ratios.
func BenchmarkFreshPaired(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "paired.db")
	s := open(b, path, nil)
	defer s.Close()
	rawSQL := openRaw(b, path, "FULL")
	exec, call, _ := newExecutor(b, s)
	result := []byte(`{"id":"msg_1"}`)
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: result}
	var raw, store, execute time.Duration
	for i := range b.N {
		t0 := time.Now()
		key := actionKey(3*i + 1)
		if err := rawSQL.fresh(ctx, key, ""); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		p := ledger.ClaimParams{Key: actionKey(3*i + 2), Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: t1.Add(time.Minute), ExpiresAt: t1.Add(time.Hour)}
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatal(res, err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if r, err := exec.Execute(ctx, "run-1", call(strconv.Itoa(i))); err != nil || r.Outcome != client.Executed {
			b.Fatal(r, err)
		}
		t3 := time.Now()
		raw, store, execute = raw+t1.Sub(t0), store+t2.Sub(t1), execute+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw)/n, "raw-ns/op")
	b.ReportMetric(float64(store)/n, "store-ns/op")
	b.ReportMetric(float64(execute)/n, "execute-ns/op")
	b.ReportMetric(float64(store)/float64(raw), "store/raw")
	b.ReportMetric(float64(execute)/float64(raw), "execute/raw")
}
