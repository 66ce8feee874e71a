package ledgersqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgersqlite"
)

// Records survive Close and Open; a second Open of the same file finds the
// schema in place.
func TestReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a b?c#d%e.db") // characters a file: URI must escape
	s := open(t, path, nil)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the file is not where it was asked for: %v", err)
	}
	p := claimParams("k", "owner")
	if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok", Result: []byte{1, 2}}); err != nil {
		t.Fatal(err)
	}
	other := open(t, path, nil) // concurrently open
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*ledgersqlite.Store{other, open(t, path, nil)} {
		r, err := st.Get(ctx, p.Key)
		if err != nil || r.State != ledger.StateDone || r.Summary != "ok" || string(r.Result) != "\x01\x02" {
			t.Errorf("Get after reopening = %+v, %v", r, err)
		}
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, path := range []string{"", ":memory:", "file:x.db"} {
		if _, err := ledgersqlite.Open(ctx, path, nil); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("Open(%q) error = %v, want ledger.ErrInvalid", path, err)
		}
	}
	if _, err := ledgersqlite.Open(ctx, filepath.Join(t.TempDir(), "missing", "dir", "x.db"), nil); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Open in a missing directory: error = %v, want ledger.ErrUnavailable", err)
	}

	// A file from a newer schema is refused.
	path := filepath.Join(t.TempDir(), "newer.db")
	open(t, path, nil).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := ledgersqlite.Open(ctx, path, nil); !errors.Is(err, ledgersqlite.ErrSchemaVersion) {
		t.Errorf("Open of a newer schema: error = %v, want ErrSchemaVersion", err)
	}
}

// While another connection holds the write lock past the busy timeout,
// writes fail with ledger.ErrUnavailable, SQLite's error still in the chain,
// and reads still work.
func TestBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "busy.db")
	s := open(t, path, &ledgersqlite.Config{BusyTimeout: 50 * time.Millisecond})
	defer s.Close()
	done := claimParams("done", "owner")
	if _, err := s.Claim(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(ctx, done.Key, done.Owner, ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	pending := claimParams("pending", "owner")
	if _, err := s.Claim(ctx, pending); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	busy := func(what string, err error) {
		t.Helper()
		var se *sqlite.Error
		if !errors.Is(err, ledger.ErrUnavailable) || !errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY {
			t.Errorf("%s under a held write lock: error = %v, want ledger.ErrUnavailable wrapping SQLITE_BUSY", what, err)
		}
	}
	_, err = s.Claim(ctx, claimParams("fresh", "owner"))
	busy("Claim", err)
	busy("Complete", s.Complete(ctx, pending.Key, pending.Owner, ledger.Completion{}))
	busy("Fail", s.Fail(ctx, pending.Key, pending.Owner, ledger.Failure{}))
	busy("Extend", s.Extend(ctx, pending.Key, pending.Owner, time.Now().Add(time.Hour)))
	_, err = s.Purge(ctx, time.Now().Add(48*time.Hour))
	busy("Purge", err)

	// A replay needs no write lock.
	res, err := s.Claim(ctx, claimParams(done.Key, "other"))
	if err != nil || res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone {
		t.Errorf("replay under a held write lock = %+v, %v; want the done record", res, err)
	}

	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Claim(ctx, claimParams("fresh", "owner")); err != nil || !res.Claimed {
		t.Errorf("Claim after the lock was released = %+v, %v", res, err)
	}
}
