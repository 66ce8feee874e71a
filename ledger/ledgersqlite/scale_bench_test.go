package ledgersqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// freshSeq numbers the fresh keys of BenchmarkScale across its runs.
var freshSeq atomic.Int64

// scaleFiles holds one ledger file per size, built once per test binary
// run (building a million records takes a while) and shared by the -count
// runs.
var scaleFiles struct {
	sync.Mutex
	dir   string
	paths map[int]string
}

// scaleFile returns a ledger file holding n done records, keyed
// actionKey(0..n-1).
func scaleFile(b *testing.B, n int) string {
	scaleFiles.Lock()
	defer scaleFiles.Unlock()
	if p, ok := scaleFiles.paths[n]; ok {
		return p
	}
	if scaleFiles.dir == "" {
		dir, err := os.MkdirTemp("", "ledgersqlite-scale")
		if err != nil {
			b.Fatal(err)
		}
		scaleFiles.dir, scaleFiles.paths = dir, map[int]string{}
	}
	path := filepath.Join(scaleFiles.dir, fmt.Sprintf("scale-%d.db", n))
	open(b, path, nil).Close() // the store's schema
	insertDone(b, path, 0, n, time.Now())
	scaleFiles.paths[n] = path
	return path
}

// insertDone adds n done records, settled at settled and kept for a day, to
// the ledger file at path, keyed actionKey(from..from+n-1), in one
// transaction of a connection of its own.
func insertDone(b *testing.B, path string, from, n int, settled time.Time) {
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
	for i := from; i < from+n; i++ {
		if _, err := ins.ExecContext(ctx, actionKey(i), fmt.Sprintf("run-%d", i/10), settled.UnixMilli(), settled.Add(24*time.Hour).UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

// Claim latency with 10^3 and 10^6 records in the file, paired: every
// iteration makes the same claim on both files, so that drift of the
// machine cancels out of the ratio. replay claims a done key (drawn from
// 1000 spread over the table); fresh claims and completes a new key. The
// two sizes should cost the same (large/small near 1).
func BenchmarkScale(b *testing.B) {
	b.Cleanup(func() {
		scaleFiles.Lock()
		defer scaleFiles.Unlock()
		if scaleFiles.dir != "" {
			os.RemoveAll(scaleFiles.dir)
			scaleFiles.dir, scaleFiles.paths = "", nil
		}
	})
	sizes := [2]int{1_000, 1_000_000}
	var stores [2]*ledgersqlite.Store
	for i, n := range sizes {
		stores[i] = open(b, scaleFile(b, n), nil)
		defer stores[i].Close()
	}
	ledgerbench.Scale(b, sizes, [2]ledger.Store{stores[0], stores[1]},
		func(n, i int) string { return actionKey((i % 1000) * (n / 1000)) },
		func(n int) string { return actionKey(n + int(freshSeq.Add(1))) })
}
