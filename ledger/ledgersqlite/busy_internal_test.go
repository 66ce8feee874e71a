package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

// holdWriteLock switches the file at path to WAL and holds its write lock
// on a connection of its own until the test ends (or the connection's
// transaction is ended).
func holdWriteLock(t *testing.T, path string) *sql.Conn {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, q := range []string{"PRAGMA journal_mode = WAL", "BEGIN IMMEDIATE"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// An Open that meets SQLITE_BUSY while it migrates (here: the write lock
// held by another connection past the busy timeout; between processes
// opening a new file together, also a busy that SQLite's handler never
// waited for) runs the migration again instead of failing. Not parallel:
// it sets busyRetried.
func TestOpenRetriesBusyMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	holder := holdWriteLock(t, path)
	// The lock is released when the first retry is due: the first
	// migration has certainly failed with SQLITE_BUSY by then.
	retries := 0
	busyRetried = func() {
		if retries++; retries == 1 {
			if _, err := holder.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { busyRetried = nil }()
	s, err := Open(ctx, path, &Config{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after the lock was released: %v", err)
	}
	defer s.Close()
	if retries == 0 {
		t.Fatal("the migration never met the lock: the test tested nothing")
	}
	now := time.Now()
	p := ledger.ClaimParams{Key: "k", Tool: "t", RunID: "r", Owner: "o", LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim after the retried Open = %+v, %v", res, err)
	}
}

// retryBusy runs f again only while it fails with SQLITE_BUSY, and gives
// up with f's own error once its limit has passed.
func TestRetryBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "locked.db")
	holdWriteLock(t, path)
	db, err := sql.Open("sqlite", path+"?_busy_timeout=0")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, busy := db.ExecContext(ctx, "BEGIN IMMEDIATE")
	if !isBusy(busy) {
		t.Fatalf("BEGIN IMMEDIATE under another's lock: %v, want SQLITE_BUSY", busy)
	}
	other := errors.New("not busy")
	for _, tc := range []struct {
		name  string
		errs  []error // f's answers, in turn; the last one repeats
		limit time.Duration
		calls int
		want  error
	}{
		{"busy twice, then done", []error{busy, busy, nil}, time.Hour, 3, nil},
		{"another error ends it", []error{busy, other}, time.Hour, 2, other},
		{"not busy at first", []error{other}, time.Hour, 1, other},
	} {
		calls := 0
		err := retryBusy(ctx, tc.limit, func() error {
			calls++
			return tc.errs[min(calls, len(tc.errs))-1]
		})
		if err != tc.want || calls != tc.calls {
			t.Errorf("%s: %v after %d calls, want %v after %d", tc.name, err, calls, tc.want, tc.calls)
		}
	}
	// Busy for ever: the limit ends it, with the busy error.
	if err := retryBusy(ctx, time.Millisecond, func() error { return busy }); !isBusy(err) {
		t.Errorf("busy past the limit: %v, want the busy error", err)
	}
}

// releaseOnFirstRetry sets busyRetried to end holder's transaction at the
// first retry of retryBusy, and returns the count of retries. The caller
// must not be parallel.
func releaseOnFirstRetry(t *testing.T, holder *sql.Conn) *int {
	t.Helper()
	retries := new(int)
	busyRetried = func() {
		if *retries++; *retries == 1 {
			if _, err := holder.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(func() { busyRetried = nil })
	return retries
}

// A write that meets the write lock of another connection (another
// process) runs again from retryBusy, and succeeds once the lock is free:
// the lock is released only at retryBusy's first retry, so a write that
// was not retried would fail. (TestPragmas checks that SQLite's own busy
// handler, which would wait before, is off on the writer.) Not parallel:
// it sets busyRetried.
func TestWriteWaitsForLockInGo(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, &Config{BusyTimeout: 10 * time.Second})
	retries := releaseOnFirstRetry(t, holdWriteLock(t, s.path))
	if res, err := s.Claim(ctx, testClaim("k")); err != nil || !res.Claimed {
		t.Fatalf("Claim under another's lock = %+v, %v; want claimed once the lock is free", res, err)
	}
	if *retries == 0 {
		t.Fatal("the claim never met the lock: the test tested nothing")
	}
}

// The same for a batch, whose BEGIN IMMEDIATE meets the lock: a claim that
// arrives while a commit waits for its sync is committed in a transaction
// of its own. Not parallel: it sets busyRetried.
func TestBatchWaitsForLockInGo(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, &Config{BusyTimeout: 10 * time.Second})
	entered, release := heldSync(t, s)
	first := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, testClaim("first"))
		first <- err
	}()
	<-entered // committed; its sync is held
	retries := releaseOnFirstRetry(t, holdWriteLock(t, s.path))
	second := make(chan error, 1)
	go func() {
		res, err := s.Claim(ctx, testClaim("second"))
		if err == nil && !res.Claimed {
			err = errors.New("not claimed")
		}
		second <- err
	}()
	pollUntil(t, "the second claim's batch has begun", func() bool {
		_, running := WriterQueue(s)
		return running == 1
	})
	release <- nil
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-entered
	release <- nil
	if err := <-second; err != nil {
		t.Fatalf("Claim of a batch under another's lock: %v", err)
	}
	if *retries == 0 {
		t.Fatal("the batch never met the lock: the test tested nothing")
	}
}
