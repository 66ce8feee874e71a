package ledgersqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

// BenchmarkReplayAfterWrite times a replay (a Claim of one of 1,000 done
// keys) in three situations, in every iteration: right after a fresh
// action (Claim and Complete of a new key), right after that replay (back
// to back), and after 5 ms asleep: the parts after, back and slept.
// Beside them, the same with raw database/sql: one SELECT of the record on
// a read-only handle right after a write by another connection, and back
// to back (rawafter, rawback), and the same on a read-only handle that maps
// the file into memory (PRAGMA mmap_size 1 GiB: rawmmapafter, rawmmapback),
// as the store's readers did before.
//
// Why a read after a write costs more: SQLite discards a connection's page
// cache when another connection committed since its last read (a read on
// the writing connection keeps it), so the read starts with the B-tree's
// pages read again (a few pread calls); a connection with a mapping also
// unmaps the whole file and maps it again (SQLite unmaps on every change of
// the database in WAL mode), and then page-faults: rawmmapafter/rawafter is
// that part. What remains in after/back beside rawafter/rawback is the
// machine's: a thread that blocked in a sync (the fresh action's) or slept
// resumes slower, with the same system calls and page faults as back to
// back (slept/back: no write at all).
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
	readers := [2]*sql.DB{}
	for i, dsn := range []string{"_query_only=1", "_query_only=1&_pragma=mmap_size(1073741824)"} {
		db, err := sql.Open("sqlite", "file:"+path+"?"+dsn)
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		readers[i] = db
	}
	writer, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		b.Fatal(err)
	}
	defer writer.Close()
	writer.SetMaxOpenConns(1)
	read := func(reader *sql.DB, key string) time.Duration {
		var st string
		t0 := time.Now()
		err := reader.QueryRow(`SELECT state FROM records WHERE key = ?`, key).Scan(&st)
		d := time.Since(t0)
		if err != nil || st != "done" {
			b.Fatalf("SELECT %s: %q, %v", key, st, err)
		}
		return d
	}
	var after, back, slept time.Duration
	var rawAfter, rawBack [2]time.Duration
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
		for i, reader := range readers {
			if _, err := writer.Exec(`UPDATE records SET updated_at = updated_at + 1 WHERE key = ?`, "done-0"); err != nil {
				b.Fatal(err)
			}
			rawAfter[i] += read(reader, key)
			rawBack[i] += read(reader, key)
		}
	}
	f := float64(n)
	b.ReportMetric(float64(after)/f, "after-ns/op")
	b.ReportMetric(float64(back)/f, "back-ns/op")
	b.ReportMetric(float64(slept)/f, "slept-ns/op")
	b.ReportMetric(float64(rawAfter[0])/f, "rawafter-ns/op")
	b.ReportMetric(float64(rawBack[0])/f, "rawback-ns/op")
	b.ReportMetric(float64(rawAfter[1])/f, "rawmmapafter-ns/op")
	b.ReportMetric(float64(rawBack[1])/f, "rawmmapback-ns/op")
	b.ReportMetric(float64(after)/float64(back), "after/back")
	b.ReportMetric(float64(slept)/float64(back), "slept/back")
	b.ReportMetric(float64(rawAfter[0])/float64(rawBack[0]), "rawafter/rawback")
	b.ReportMetric(float64(after)/float64(rawAfter[0]), "after/rawafter")
	b.ReportMetric(float64(rawAfter[1])/float64(rawAfter[0]), "rawmmapafter/rawafter")
}
