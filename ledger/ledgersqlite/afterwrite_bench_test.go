package ledgersqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// BenchmarkReplayAfterWrite times a replay (a Claim of one of 1,000 done
// keys) in three situations, in every iteration: right after a fresh
// action (Claim and Complete of a new key), right after that replay (back
// to back), and after 5 ms asleep: the parts after, back and slept. Beside them, the same with raw
// database/sql: one SELECT of the record on a read-only handle right
// after a write by another connection, and back to back (rawafter,
// rawback). The ratios
// after/back tell how much of a replay's cost after a write is the store's
// (store) and how much SQLite's and the machine's (raw: a reader whose
// database changed since its last read starts with an empty page cache).
func BenchmarkReplayAfterWrite(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "afterwrite.db")
	s := open(b, path, nil)
	defer s.Close()
	params := func(key string) ledger.ClaimParams {
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	fresh := func(key string) {
		p := params(key)
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatalf("Claim(%s) = %+v, %v", key, res, err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
			b.Fatal(err)
		}
	}
	replay := func(key string) time.Duration {
		t0 := time.Now()
		res, err := s.Claim(ctx, params(key))
		d := time.Since(t0)
		if err != nil || res.Claimed {
			b.Fatalf("replay Claim(%s) = %+v, %v", key, res, err)
		}
		return d
	}
	for i := range 1000 {
		fresh("done-" + strconv.Itoa(i))
	}
	reader, err := sql.Open("sqlite", "file:"+path+"?_query_only=1")
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()
	writer, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	writer.SetMaxOpenConns(1)
	read := func(key string) time.Duration {
		var st string
		t0 := time.Now()
		err := reader.QueryRow(`SELECT state FROM records WHERE key = ?`, key).Scan(&st)
		d := time.Since(t0)
		if err != nil || st != "done" {
			b.Fatalf("SELECT %s: %q, %v", key, st, err)
		}
		return d
	}
	var after, back, slept, rawAfter, rawBack time.Duration
	n := 0
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for b.Loop() {
		n++
		key := "done-" + strconv.Itoa(n%1000)
		fresh("fresh-" + run + "-" + strconv.Itoa(n))
		after += replay(key)
		back += replay(key)
		time.Sleep(5 * time.Millisecond)
		slept += replay(key)
		if _, err := writer.Exec(`UPDATE records SET updated_at = updated_at + 1 WHERE key = ?`, "done-0"); err != nil {
			b.Fatal(err)
		}
		rawAfter += read(key)
		rawBack += read(key)
	}
	f := float64(n)
	b.ReportMetric(float64(after)/f, "after-ns/op")
	b.ReportMetric(float64(back)/f, "back-ns/op")
	b.ReportMetric(float64(slept)/f, "slept-ns/op")
	b.ReportMetric(float64(rawAfter)/f, "rawafter-ns/op")
	b.ReportMetric(float64(rawBack)/f, "rawback-ns/op")
	b.ReportMetric(float64(after)/float64(back), "after/back")
	b.ReportMetric(float64(slept)/float64(back), "slept/back")
	b.ReportMetric(float64(rawAfter)/float64(rawBack), "rawafter/rawback")
}
