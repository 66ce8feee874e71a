package ledgersqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
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

// Paths that cannot hold a ledger are configuration errors that name the
// path, not ledger.ErrUnavailable (which invites a retry), and Open changes
// nothing there.
func TestOpenConfigErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	notDB := filepath.Join(t.TempDir(), "notes.txt")
	content := []byte(strings.Repeat("these are notes, not an SQLite database\n", 200))
	if err := os.WriteFile(notDB, content, 0o644); err != nil {
		t.Fatal(err)
	}
	readOnly := t.TempDir()
	existing := filepath.Join(t.TempDir(), "ledger.db")
	open(t, existing, nil).Close()
	makeReadOnly(t, readOnly)
	makeReadOnly(t, filepath.Dir(existing))
	missing := filepath.Join(t.TempDir(), "missing")

	for _, c := range []struct {
		name, path string
	}{
		{"missing directory", filepath.Join(missing, "dir", "ledger.db")},
		{"a directory", t.TempDir()},
		{"not a database", notDB},
		{"read-only directory", filepath.Join(readOnly, "ledger.db")},
		{"ledger in a read-only directory", existing},
	} {
		s, err := ledgersqlite.Open(ctx, c.path, nil)
		if err == nil {
			s.Close()
			t.Errorf("Open with %s (%s) succeeded", c.name, c.path)
			continue
		}
		if !errors.Is(err, ledger.ErrConfig) || errors.Is(err, ledger.ErrUnavailable) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("Open with %s: error = %v, want ledger.ErrConfig (not ErrUnavailable) naming %s", c.name, err, c.path)
		}
		t.Logf("%s: %v", c.name, err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open created the missing directory: %v", err)
	}
	if got, err := os.ReadFile(notDB); err != nil || !bytes.Equal(got, content) {
		t.Errorf("Open changed the file that is not a database (%v)", err)
	}
	if entries, err := os.ReadDir(readOnly); err != nil || len(entries) != 0 {
		t.Errorf("Open left %v in the read-only directory (%v)", entries, err)
	}
}

// makeReadOnly makes dir read-only until the test ends: without write
// permission, or, for root (whom permissions do not bind), immutable.
func makeReadOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return
	}
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
			t.Errorf("chattr -i %s: %v: %s", dir, err, out)
		}
	})
}

// schemaV1 is the records table of schema version 1: a rowid table, the
// action key in a separate index.
const schemaV1 = `
CREATE TABLE records_v1 (
	key TEXT NOT NULL PRIMARY KEY, tool TEXT NOT NULL, run_id TEXT NOT NULL,
	state TEXT NOT NULL, owner TEXT NOT NULL, lease_until INTEGER NOT NULL,
	expires_at INTEGER NOT NULL, fingerprint TEXT NOT NULL, attempt INTEGER NOT NULL,
	attempt_at INTEGER NOT NULL, summary TEXT NOT NULL DEFAULT '',
	ref TEXT NOT NULL DEFAULT '', result BLOB, truncated INTEGER NOT NULL DEFAULT 0,
	reason TEXT NOT NULL DEFAULT '', updated_at INTEGER NOT NULL,
	prev_state TEXT NOT NULL DEFAULT '', prev_owner TEXT NOT NULL DEFAULT '',
	prev_lease_until INTEGER NOT NULL DEFAULT 0, prev_expires_at INTEGER NOT NULL DEFAULT 0,
	prev_fingerprint TEXT NOT NULL DEFAULT '', prev_attempt INTEGER NOT NULL DEFAULT 0,
	prev_attempt_at INTEGER NOT NULL DEFAULT 0, prev_reason TEXT NOT NULL DEFAULT '',
	prev_updated_at INTEGER NOT NULL DEFAULT 0, prev_tool TEXT NOT NULL DEFAULT '',
	prev_run_id TEXT NOT NULL DEFAULT ''
);
INSERT INTO records_v1 SELECT * FROM records;
DROP TABLE records;
ALTER TABLE records_v1 RENAME TO records;
CREATE INDEX records_state_lease ON records (state, lease_until);
CREATE INDEX records_run ON records (run_id);
PRAGMA user_version = 1;
`

// A file of schema version 1 is rewritten in place on Open: every record
// survives unchanged, the table no longer has a rowid, and the ledger goes
// on deciding claims on the migrated records.
func TestOpenMigratesV1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v1.db")
	s := open(t, path, nil)
	done, pending := claimParams("done", "owner"), claimParams("pending", "owner")
	for _, p := range []ledger.ClaimParams{done, pending} {
		if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
			t.Fatalf("Claim(%s) = %+v, %v", p.Key, res, err)
		}
	}
	if err := s.Complete(ctx, done.Key, done.Owner, ledger.Completion{Summary: "ok", Ref: "ref-1", Result: []byte{1, 2}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]*ledger.Record{}
	for _, k := range []string{done.Key, pending.Key} {
		r, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want[k] = r
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, schemaV1); err != nil {
		t.Fatal(err)
	}
	var ddl string
	if err := db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE name = 'records'").Scan(&ddl); err != nil || strings.Contains(ddl, "WITHOUT ROWID") {
		t.Fatalf("the version 1 file was not made: %q, %v", ddl, err)
	}

	s = open(t, path, nil)
	defer s.Close()
	for k, w := range want {
		r, err := s.Get(ctx, k)
		if err != nil || !reflect.DeepEqual(r, w) {
			t.Errorf("Get(%s) after migrating = %+v, %v; want %+v", k, r, err, w)
		}
	}
	if res, err := s.Claim(ctx, claimParams(pending.Key, "other")); err != nil || res.Claimed || res.Previous == nil || res.Previous.Owner != pending.Owner {
		t.Errorf("Claim of the migrated pending record = %+v, %v; want its owner's record", res, err)
	}
	if res, err := s.Claim(ctx, claimParams("new", "owner")); err != nil || !res.Claimed {
		t.Errorf("Claim of a new key after migrating = %+v, %v", res, err)
	}
	var version int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil || version != 2 {
		t.Errorf("user_version after migrating = %d, %v; want 2", version, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT sql FROM sqlite_master WHERE name = 'records'").Scan(&ddl); err != nil || !strings.Contains(ddl, "WITHOUT ROWID") {
		t.Errorf("records after migrating: %q, %v; want a WITHOUT ROWID table", ddl, err)
	}
	var indexes int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('records_state_lease', 'records_run')").Scan(&indexes); err != nil || indexes != 2 {
		t.Errorf("indexes after migrating: %d, %v; want 2", indexes, err)
	}
}
