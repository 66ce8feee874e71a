package ledgersqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/ledgerbench"
)

// fillExpired adds n done records whose retention ended an hour ago to the
// ledger file at path, keyed actionKey(from..from+n-1), in one transaction
// of a connection of its own.
func fillExpired(b *testing.B, path string, from, n int) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000&_synchronous=OFF")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at,
		fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
		VALUES (?1, 'send_reply', ?2, 'done', 'owner', ?3, ?4, 'fp', 1, ?3, 'sent', 'msg_1', '{"id":"msg_1"}', ?3)`)
	if err != nil {
		b.Fatal(err)
	}
	then := time.Now().Add(-25 * time.Hour)
	for i := from; i < from+n; i++ {
		if _, err := ins.ExecContext(ctx, actionKey(i), "run-"+strconv.Itoa(i/10), then.UnixMilli(), then.Add(24*time.Hour).UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// Fresh actions while Purge deletes 20,000 expired records, 32 a write,
// beside as many with no purge running; see ledgerbench.PurgeBlocking.
// The purge shares the writer with the claims.
func BenchmarkPurgeBlocking(b *testing.B) {
	const expired = 20_000
	path := filepath.Join(b.TempDir(), "purge.db")
	s := open(b, path, nil)
	defer s.Close()
	ledgerbench.PurgeBlocking(b, s, func(round int) int {
		fillExpired(b, path, round*expired, expired)
		return expired
	})
}
