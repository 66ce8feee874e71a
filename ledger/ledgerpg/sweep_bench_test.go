package ledgerpg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// One sweep's listing with 10^3 stuck records among 10^3 and among 10^6
// records (the rest done), paired; see ledgerbench.SweepListing.
func BenchmarkSweepListing(b *testing.B) {
	ctx := context.Background()
	sizes := [2]int{ledgerbench.Stuck, 1_000_000}
	at := time.Now().Add(-time.Hour)
	var stores [2]ledger.Store
	for i, n := range sizes {
		pool := pgtest.Pool(b)
		schema := pgtest.Schema(b, pool)
		s := newStore(b, pool, &ledgerpg.Config{Schema: schema, ExecMode: pgx.QueryExecModeCacheStatement})
		table := pgx.Identifier{schema, ledgerpg.DefaultTable}.Sanitize()
		if _, err := pool.Exec(ctx, `INSERT INTO `+table+` (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, summary, ref, result, updated_at)
			SELECT encode(sha256(convert_to('sweep-' || i, 'UTF8')), 'hex'), 'send_reply', 'run-' || (i / 10), 'done', 'owner',
				$2::timestamptz, $2::timestamptz + interval '1 day', 'fp', 1, $2, 'sent', 'msg_1', '{"id":"msg_1"}'::bytea, $2
			FROM generate_series(1, $1::int) AS i`, n-ledgerbench.Stuck, at.Add(-time.Hour)); err != nil {
			b.Fatal(err)
		}
		ledgerbench.AddStuck(b, s, at)
		if _, err := pool.Exec(ctx, `ANALYZE `+table); err != nil {
			b.Fatal(err)
		}
		stores[i] = s
	}
	ledgerbench.SweepListing(b, sizes, stores)
}
