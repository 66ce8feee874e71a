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

// Fresh actions (claim and completion, one caller) while Purge deletes
// 20,000 expired records, in chunks of 1,000 keys, beside as many fresh
// actions with no purge running, paired in every iteration. The purge
// shares the writer with the claims, so purging-p99-ns and purging-max-ns
// are what a claim waits behind a chunk; purging/alone compares the mean
// latencies.
func BenchmarkPurgeBlocking(b *testing.B) {
	const expired = 20_000
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "purge.db")
	s := open(b, path, nil)
	defer s.Close()
	next := 1 << 30 // fresh keys, apart from the expired ones
	fresh := func(lat *[]time.Duration) {
		next++
		t0 := time.Now()
		if err := storeFresh(ctx, s, actionKey(next)); err != nil {
			b.Fatal(err)
		}
		*lat = append(*lat, time.Since(t0))
	}
	var purging, alone []time.Duration
	seq := 0
	for b.Loop() {
		b.StopTimer()
		fillExpired(b, path, seq, expired)
		seq += expired
		b.StartTimer()
		done := make(chan error, 1)
		go func() {
			n, err := s.Purge(ctx, time.Now())
			if err == nil && n != expired {
				b.Errorf("Purge deleted %d records, want %d", n, expired)
			}
			done <- err
		}()
		during := len(purging)
	claiming:
		for {
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
				break claiming
			default:
				fresh(&purging)
			}
		}
		for range len(purging) - during {
			fresh(&alone)
		}
	}
	mean := func(d []time.Duration) float64 {
		var sum time.Duration
		for _, x := range d {
			sum += x
		}
		return float64(sum) / float64(len(d))
	}
	b.ReportMetric(mean(purging), "purging-ns/op")
	b.ReportMetric(mean(alone), "alone-ns/op")
	b.ReportMetric(mean(purging)/mean(alone), "purging/alone")
	b.ReportMetric(float64(ledgerbench.Quantile(purging, 0.99)), "purging-p99-ns")
	b.ReportMetric(float64(ledgerbench.Quantile(alone, 0.99)), "alone-p99-ns")
	b.ReportMetric(float64(ledgerbench.Quantile(purging, 1)), "purging-max-ns")
	b.ReportMetric(float64(ledgerbench.Quantile(alone, 1)), "alone-max-ns")
}
