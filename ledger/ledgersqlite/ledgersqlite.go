// Package ledgersqlite is the embedded ledger.Store: one SQLite file, opened
// through modernc.org/sqlite (pure Go, no cgo), shared safely by the
// goroutines of a process and by several processes on the same machine.
//
// # Storage
//
// One table, records, stored in the B-tree of its primary key, the action
// key (WITHOUT ROWID), with an index on (state, lease_until) for the
// sweeper and one on run_id. Times are stored as integer Unix
// milliseconds. The schema is created on Open, idempotently, and versioned
// with PRAGMA user_version; a file of an older version is migrated in place
// when it is opened, and a file written by a newer schema is refused with
// ErrSchemaVersion.
//
// The file runs in WAL mode, so readers never wait for the writer. Within
// a process all writes go through one connection, queued in Go; reads use
// a small pool of read-only connections. A write that finds the lock held
// by another process tries again after 50 µs, then at doubling intervals
// up to 5 ms (jittered), for up to Config.BusyTimeout (default 5 s) before
// it fails, instead of sleeping in SQLite's busy handler (1, 2, 5, 10 ms
// and on, in a system call that keeps the goroutine's processor).
//
// # Reads
//
// The read-only connections map the file into memory (PRAGMA mmap_size,
// 1 GiB of address space each), so that a page missing from a connection's
// own cache is read from the operating system's page cache without a
// system call. With the records of a large ledger spread over many more
// pages than a connection caches, that keeps a replay close to its cost in
// a small one: in BenchmarkScale (10^6 records against 10^3, paired in
// every iteration, on a loaded 2-CPU machine) the large/small ratio of a
// replay was 1.29 to 1.37 without the mapping and 1.04 to 1.42 (mean 1.17)
// with it, and the replay itself 35 to 55 % faster at both sizes. The price
// of a mapping is how an I/O error of the disk shows: as a SIGBUS that ends
// the process, rather than as an error of the call; a crash the ledger
// survives like any other (claims stay, abandoned ones are reconciled).
// Writes do not use the mapping.
//
// # Group commit
//
// Whoever commits owns the writing connection. A write (a claim,
// completion, failure, heartbeat or purge) that finds nobody committing
// runs at once, on its caller's goroutine, alone, as a single statement: a
// lone caller never waits for company or for a hand-over to another
// goroutine. Writes that arrive while a commit is running queue; when it
// ends, a goroutine takes all of them (up to 256) into the next
// transaction: one BEGIN IMMEDIATE, their statements in arrival order, one
// COMMIT. Each write keeps its own answer: a claim that loses to another
// claim of the same key in its batch is answered with the winner's record,
// a write of the wrong owner with ledger.ErrNotOwner. A statement or a
// commit that fails rolls the whole batch back and every write in it
// reports ledger.ErrUnavailable. Stats reports writes, commits and syncs.
//
// # Durability
//
// By default (SyncFull) no write is answered before the disk has synced
// the commit that holds it. SQLite appends every commit to the WAL file;
// the store runs SQLite with PRAGMA synchronous=NORMAL (it syncs only at
// checkpoints) and syncs the WAL itself (fdatasync) after each commit,
// outside the write lock: one sync covers every commit made before it
// began, and while a commit waits for its sync the next batch runs its
// statements in an open transaction, taking in the writes that arrive,
// and commits when that sync ends. So the disk syncs one batch while the
// next one runs, and there is one commit and one sync per batch. This is
// the durability of synchronous=FULL, which would sync inside COMMIT while
// holding the lock. A commit is visible to readers a moment before it is
// durable; a reader acts on what it sees only by a claim of its own, whose
// sync covers everything before it, and a done record it reports was
// written after the effect. A sync that fails fails its writes and every
// later call (ledger.ErrUnavailable): which commits reached the disk is
// unknown, and a later sync may not report the failure again.
//
// SyncNormal leaves out the store's sync: faster, but after a power loss or
// an operating-system crash (not after a crash of the process) the last
// commits can be lost. A lost claim or a lost done record means the action
// can run again: a repeated effect. Choose SyncNormal only where the
// providers deduplicate by the downstream key themselves, or where a
// repeat is acceptable.
//
// # A removed or replaced file
//
// A Store keeps working on the file it opened even after that file is
// removed from its directory (a temporary-file cleaner, an operator), while
// another Store opening the path would start a new, empty ledger: actions
// already done would run again, and one action could run in both. So Open
// notes the identity (device and inode) of the file at the path, and every
// write, once SQLite has committed it, checks that the path still names
// that file (one stat of the path, a few microseconds beside a synced
// commit). When it does not, the write reports ErrFileReplaced (a
// ledger.ErrUnavailable: the caller runs nothing) and so does every later
// call. Claims answered by a read alone (replays) skip the check: they
// report what the ledger recorded.
//
// # Configuration errors
//
// Open reports what no retry can fix as ledger.ErrConfig, naming the path:
// a directory that does not exist, a path that is a directory, a file that
// is not an SQLite database, a location where the file (or its -wal and
// -shm companions) cannot be created or written.
//
// # Claim
//
// The write of a claim is one statement:
//
//	INSERT INTO records ... VALUES (...)
//	ON CONFLICT(key) DO UPDATE SET prev_* = <old values>, ... = excluded...
//	WHERE <claimable>
//	RETURNING attempt, prev_*
//
// SQLite's RETURNING yields the new row only, so the update copies the old
// state, owner, lease, expiry, fingerprint, attempt and its time, reason,
// tool, run id and update time into prev_* columns of the same row and
// returns them: that is how a takeover reports the record it replaced, in
// the same statement. (Only failed, uncertain and pending records are ever
// taken over, and those carry no summary, reference or result.)
//
// Before it, a SELECT on a read connection looks for a record that blocks
// the claim (the same claimability expression, evaluated by SQLite); if
// there is one it is the answer, and the claim never takes the write lock.
// If the INSERT then finds the key taken after all (another claim won in
// between), DO UPDATE ... WHERE writes nothing and yields no row, and the
// claim reads again. While the writer is busy (a commit runs, or waits for
// its sync), a claim skips the first SELECT and goes to the writer at once:
// a fresh claim then costs no read, and a blocked one, which changed
// nothing, is answered as soon as its statement has run (not after the
// commit and its sync; unless a write of the same key came before it in
// its batch, whose record is not committed yet) and reads the record.
//
// Three designs were measured (BenchmarkStore, ext4, synchronous=FULL, on
// a shared 2-CPU machine; replay = a claim on a done key):
//
//   - INSERT first, SELECT only when not claimed: replay about 31 µs and
//     148 allocations (two statements, the first taking the write lock).
//   - One unconditional DO UPDATE with CASE expressions that always returns
//     the row: no disk sync on a replay (SQLite skips rewriting a cell whose
//     bytes are unchanged), but every replay takes the write lock and waits
//     behind other writers' syncs; a one-column stand-in took about 17 µs.
//   - SELECT first (chosen): replay about 14 µs and 79 allocations, from a
//     read-only connection, concurrently with writers in this and other
//     processes. A fresh claim pays one SELECT that finds nothing, a few µs
//     against the 0.2 to 0.5 ms of the two synced commits of claim and
//     completion.
package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/ledger"
)

// ErrSchemaVersion is returned by Open when the file was written by a newer
// version of this package.
var ErrSchemaVersion = errors.New("ledgersqlite: unknown schema version")

// ErrFileReplaced is returned by every call of a Store whose file has been
// removed or replaced since Open (a temporary-file cleaner, an operator):
// its writes would land in a file nobody else sees, while other processes
// open a new, empty ledger at the path. It wraps ledger.ErrUnavailable, so
// no action runs; the Store stays refused and must be reopened.
var ErrFileReplaced = fmt.Errorf("ledgersqlite: ledger file removed or replaced: %w", ledger.ErrUnavailable)

// Synchronous selects how often SQLite syncs the file to disk.
type Synchronous int

const (
	// SyncFull syncs every commit before its writes are answered, as PRAGMA
	// synchronous=FULL does, but outside the write lock (see Durability).
	// The default.
	SyncFull Synchronous = iota
	// SyncNormal syncs at WAL checkpoints only (PRAGMA synchronous=NORMAL):
	// a power loss can lose the last commits; a process crash cannot.
	SyncNormal
)

// Config tunes a Store. The zero value selects the defaults.
type Config struct {
	// Clock tells the time (default: the system clock).
	Clock clock.Clock
	// Synchronous is the sync mode (default SyncFull); see the package
	// documentation for the trade-off.
	Synchronous Synchronous
	// BusyTimeout is how long a write waits for another process holding the
	// write lock before it fails with ledger.ErrUnavailable (default 5 s).
	BusyTimeout time.Duration
}

// Store is a ledger.Store in one SQLite file. It is safe for concurrent use
// by goroutines and by other processes that open the same file.
type Store struct {
	clock clock.Clock
	w, r  *sql.DB // one writing connection; a pool of read-only ones

	path     string      // absolute
	ident    os.FileInfo // of the file at path when it was opened
	replaced atomic.Bool // the file at path is no longer ident

	closed atomic.Bool
	wr     *writer  // group commit; nil until Open has prepared it
	wal    *os.File // the write-ahead log, opened by the first syncWAL

	claim, complete, fail, extend *sql.Stmt // on wr.conn
	blocker, get                  *sql.Stmt // on r
}

var (
	_ ledger.Store  = (*Store)(nil)
	_ io.Closer     = (*Store)(nil)
	_ ledger.Purger = (*Store)(nil)
)

// schemaVersion is the PRAGMA user_version of the schema below. Version 1
// kept the records in a rowid table with a separate index on key; version
// 2 keeps them in the primary-key B-tree itself (WITHOUT ROWID), so that a
// lookup by action key walks one tree instead of two. migrate rewrites a
// version 1 file in place.
const schemaVersion = 2

// recordsTable creates the records table under the name %s.
const recordsTable = `
CREATE TABLE %s (
	key              TEXT    NOT NULL PRIMARY KEY,
	tool             TEXT    NOT NULL,
	run_id           TEXT    NOT NULL,
	state            TEXT    NOT NULL,
	owner            TEXT    NOT NULL,
	lease_until      INTEGER NOT NULL,
	expires_at       INTEGER NOT NULL,
	fingerprint      TEXT    NOT NULL,
	attempt          INTEGER NOT NULL,
	attempt_at       INTEGER NOT NULL,
	summary          TEXT    NOT NULL DEFAULT '',
	ref              TEXT    NOT NULL DEFAULT '',
	result           BLOB,
	truncated        INTEGER NOT NULL DEFAULT 0,
	reason           TEXT    NOT NULL DEFAULT '',
	updated_at       INTEGER NOT NULL,
	-- the record the latest claim took over ('' state: none)
	prev_state       TEXT    NOT NULL DEFAULT '',
	prev_owner       TEXT    NOT NULL DEFAULT '',
	prev_lease_until INTEGER NOT NULL DEFAULT 0,
	prev_expires_at  INTEGER NOT NULL DEFAULT 0,
	prev_fingerprint TEXT    NOT NULL DEFAULT '',
	prev_attempt     INTEGER NOT NULL DEFAULT 0,
	prev_attempt_at  INTEGER NOT NULL DEFAULT 0,
	prev_reason      TEXT    NOT NULL DEFAULT '',
	prev_updated_at  INTEGER NOT NULL DEFAULT 0,
	prev_tool        TEXT    NOT NULL DEFAULT '',
	prev_run_id      TEXT    NOT NULL DEFAULT ''
) WITHOUT ROWID;
`

const recordsIndexes = `
CREATE INDEX records_state_lease ON records (state, lease_until);
CREATE INDEX records_run ON records (run_id);
`

// migrateV1 rewrites a version 1 file (a rowid table of the same columns)
// into the current layout, in the migrating transaction.
var migrateV1 = fmt.Sprintf(recordsTable, "records_v2") + `
INSERT INTO records_v2 SELECT * FROM records;
DROP TABLE records;
ALTER TABLE records_v2 RENAME TO records;
` + recordsIndexes

var schema = fmt.Sprintf(recordsTable, "records") + recordsIndexes

// expired is the SQL condition of ledger.Record.Expired at now (an SQL
// parameter): done or failed and past its retention. A pending or
// uncertain row never expires.
func expired(now string) string {
	return "(state IN ('done', 'failed') AND expires_at <= " + now + ")"
}

// claimable is the SQL condition under which an existing row gives way to a
// claim with fingerprint fp at now (both SQL parameters). It mirrors
// ledger.Store: expired, failed, or (same fingerprint) uncertain or pending
// with a lapsed lease.
func claimable(fp, now string) string {
	return "(" + expired(now) + " OR state = 'failed' OR (fingerprint = " + fp +
		" AND (state = 'uncertain' OR (state = 'pending' AND lease_until <= " + now + "))))"
}

const recordCols = `key, tool, run_id, state, owner, lease_until, expires_at, fingerprint,
	attempt, attempt_at, summary, ref, result, truncated, reason, updated_at`

var (
	// ?1 key ?2 tool ?3 run id ?4 owner ?5 lease ?6 expiry ?7 fingerprint ?8 now
	claimSQL = `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at, fingerprint, attempt, attempt_at, updated_at)
VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6, ?7, 1, ?8, ?8)
ON CONFLICT (key) DO UPDATE SET
	prev_state = CASE WHEN ` + expired("?8") + ` THEN '' ELSE state END,
	prev_owner = owner, prev_lease_until = lease_until, prev_expires_at = expires_at,
	prev_fingerprint = fingerprint, prev_attempt = attempt, prev_attempt_at = attempt_at, prev_reason = reason,
	prev_updated_at = updated_at, prev_tool = tool, prev_run_id = run_id,
	tool = ?2, run_id = ?3, state = 'pending', owner = ?4, lease_until = ?5, expires_at = ?6,
	fingerprint = ?7, attempt = CASE WHEN ` + expired("?8") + ` THEN 1 ELSE attempt END,
	attempt_at = CASE WHEN state = 'failed' OR ` + expired("?8") + ` THEN ?8 ELSE attempt_at END,
	summary = '', ref = '', result = NULL, truncated = 0, reason = '', updated_at = ?8
WHERE ` + claimable("?7", "?8") + `
RETURNING attempt, prev_state, prev_owner, prev_lease_until, prev_expires_at, prev_fingerprint,
	prev_attempt, prev_attempt_at, prev_reason, prev_updated_at, prev_tool, prev_run_id`

	// ?1 key ?2 fingerprint ?3 now
	blockerSQL = `SELECT ` + recordCols + `, ` + claimable("?2", "?3") + ` FROM records WHERE key = ?1`

	// ?1 key ?2 now
	getSQL = `SELECT ` + recordCols + ` FROM records WHERE key = ?1 AND NOT ` + expired("?2")
)

// The conditional writes of the owner. ?1 key ?2 owner; the last parameter
// is now. Extend raises the expiry to at least the new lease end.
const (
	ownedSQL    = ` WHERE key = ?1 AND owner = ?2 AND state = 'pending'`
	completeSQL = `UPDATE records SET state = 'done', summary = ?3, ref = ?4, result = ?5, truncated = ?6,
	reason = '', lease_until = ?7, updated_at = ?7,
	expires_at = CASE WHEN ?8 > 0 THEN ?7 + ?8 ELSE expires_at END` + ownedSQL
	failSQL = `UPDATE records SET state = ?3, attempt = attempt + ?4,
	attempt_at = CASE WHEN ?4 = 1 THEN ?6 ELSE attempt_at END, reason = ?5,
	lease_until = ?6, updated_at = ?6,
	expires_at = CASE WHEN ?4 = 1 AND ?7 > 0 THEN ?6 + ?7 ELSE expires_at END` + ownedSQL
	extendSQL = `UPDATE records SET lease_until = ?3, expires_at = max(expires_at, ?3), updated_at = ?4` + ownedSQL
)

// readerMmap is the PRAGMA mmap_size of the read-only connections (see
// the package documentation, Reads).
const readerMmap = 1 << 30

// Open opens (creating when missing) the ledger file at path and prepares
// its schema. path must name a file; several Stores, in one process or in
// several, may open the same file. A path that cannot hold the ledger is
// refused with ledger.ErrConfig (see the package documentation).
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.BusyTimeout <= 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("ledgersqlite: %w: path must name a file, got %q", ledger.ErrInvalid, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("ledgersqlite: %w: %w", ledger.ErrInvalid, err)
	}
	if err := checkPath(abs); err != nil {
		return nil, err
	}
	// A file: URI, so that any path survives: SQLite decodes %XX escapes.
	// SQLite itself syncs at checkpoints only (NORMAL); with SyncFull the
	// writer syncs the log after every commit (see Durability).
	// The writer meets a lock held by another process with busy_timeout 0
	// and retries from Go (see retryBusy); readers, which meet a busy only
	// while SQLite recovers the log, keep SQLite's busy handler.
	dsn := "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs)) +
		"?_synchronous=NORMAL"

	s := &Store{clock: c.Clock, path: abs}
	if s.w, err = sql.Open("sqlite", dsn+"&_busy_timeout=0"); err != nil {
		return nil, s.unavailable("open", err)
	}
	s.w.SetMaxOpenConns(1)
	// Processes opening a new file together can meet SQLITE_BUSY that
	// SQLite's busy handler never waited for (one switches the file to WAL
	// or rebuilds its WAL index while another starts to read it). The
	// migration changes nothing unless it commits, so it is run again.
	if err := retryBusy(ctx, c.BusyTimeout, func() error { return s.migrate(ctx) }); err != nil {
		s.Close()
		return nil, err
	}
	// The file SQLite holds open is the one at the path now; every write
	// checks that it still is.
	if s.ident, err = os.Stat(abs); err != nil {
		s.Close()
		return nil, s.openError(err)
	}
	if s.r, err = sql.Open("sqlite", dsn+"&_busy_timeout="+strconv.FormatInt(c.BusyTimeout.Milliseconds(), 10)+
		"&_query_only=1&_pragma=mmap_size("+strconv.Itoa(readerMmap)+")"); err != nil {
		s.Close()
		return nil, s.unavailable("open", err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	conn, err := s.w.Conn(ctx)
	if err != nil {
		s.Close()
		return nil, s.unavailable("open", err)
	}
	var syncer func() error
	if c.Synchronous == SyncFull {
		syncer = s.syncWAL
	}
	wr := newWriter(conn, s.verify, syncer, s.unavailable)
	wr.busyTimeout = c.BusyTimeout
	type preparer interface {
		PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	}
	for _, p := range []struct {
		db    preparer
		stmt  **sql.Stmt
		query string
	}{
		{conn, &s.claim, claimSQL},
		{conn, &s.complete, completeSQL},
		{conn, &s.fail, failSQL},
		{conn, &s.extend, extendSQL},
		{s.r, &s.blocker, blockerSQL},
		{s.r, &s.get, getSQL},
	} {
		if *p.stmt, err = p.db.PrepareContext(ctx, p.query); err != nil {
			s.Close()
			conn.Close()
			return nil, s.unavailable("prepare", err)
		}
	}
	s.wr = wr
	return s, nil
}

// migrate switches the file to WAL and creates the schema unless it is
// there, under the write lock so that concurrent Opens agree.
func (s *Store) migrate(ctx context.Context) (err error) {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return s.openError(err)
	}
	defer conn.Close()
	var mode string
	if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return s.openError(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("ledgersqlite: open %s: %w: the file cannot use WAL (journal mode %q)", s.path, ledger.ErrConfig, mode)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.openError(err)
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	var version int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.openError(err)
	}
	switch version {
	case schemaVersion:
	case 0, 1:
		ddl := schema
		if version == 1 {
			ddl = migrateV1
		}
		if _, err := conn.ExecContext(ctx, ddl); err != nil {
			return s.unavailable("create schema", err)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(schemaVersion)); err != nil {
			return s.unavailable("create schema", err)
		}
	default:
		return fmt.Errorf("%w %d (this package knows %d)", ErrSchemaVersion, version, schemaVersion)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return s.openError(err)
	}
	return nil
}

// busyRetried, when set (by tests), is called before each retry of
// retryBusy.
var busyRetried func()

// retryBusy runs f, and while it fails with SQLITE_BUSY runs it again with
// jittered backoff (50 µs doubling to 5 ms) for up to limit after the
// first failure, or until ctx ends; it returns f's last error.
//
// The writer runs with busy_timeout 0 and waits for another process's
// write lock here, rather than in SQLite's busy handler: that one sleeps
// 1, 2, 5, 10, 15 ms and on, so a write that just missed a lock held for
// a fraction of a millisecond waits up to ten times as long, and unless
// the call's context can be cancelled it sleeps in a system call that
// keeps the goroutine's processor. In BenchmarkContention (64 Stores on
// one file in one process) two writers sleeping so held both processors
// of a 2-CPU machine, and the write that held the lock could not finish
// for 18 ms.
func retryBusy(ctx context.Context, limit time.Duration, f func() error) error {
	err := f()
	if err == nil || !isBusy(err) {
		return err
	}
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Microsecond),
		backoff.WithMaxInterval(5*time.Millisecond),
		backoff.WithMaxElapsedTime(limit),
	), ctx)
	for {
		d := b.NextBackOff()
		if d == backoff.Stop {
			return err
		}
		if busyRetried != nil {
			busyRetried()
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		if err = f(); err == nil || !isBusy(err) {
			return err
		}
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// checkPath refuses, as configuration errors, paths that cannot hold the
// ledger file: a directory, or a file in a directory that does not exist.
// SQLite reports the rest (see openError).
func checkPath(abs string) error {
	fi, err := os.Stat(abs)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("ledgersqlite: open %s: %w: it is a directory, not a file", abs, ledger.ErrConfig)
	case err == nil || !errors.Is(err, fs.ErrNotExist):
		return nil
	}
	dir := filepath.Dir(abs)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("ledgersqlite: open %s: %w: directory %s does not exist", abs, ledger.ErrConfig, dir)
	}
	return nil
}

// openError classifies an error met while opening the file, naming the
// path: what no retry can fix (the file is not a database, or the location
// cannot be created or written) is ledger.ErrConfig; anything else (busy,
// I/O) is ledger.ErrUnavailable.
func (s *Store) openError(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("ledgersqlite: open %s: %w: not a ledger file: %w", s.path, ledger.ErrConfig, err)
		case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_PERM:
			return fmt.Errorf("ledgersqlite: open %s: %w: the file, or its -wal and -shm beside it, cannot be created or written there: %w",
				s.path, ledger.ErrConfig, err)
		}
	}
	return fmt.Errorf("ledgersqlite: open %s: %w: %w", s.path, ledger.ErrUnavailable, err)
}

// refused returns ErrFileReplaced once a write found the file replaced,
// and the error of a failed sync once one failed.
func (s *Store) refused() error {
	if s.replaced.Load() {
		return s.replacedError()
	}
	if s.wr != nil {
		if err := s.wr.broken.Load(); err != nil {
			return *err
		}
	}
	return nil
}

// syncWAL makes every commit so far durable: it syncs the write-ahead log,
// where SQLite in WAL mode appends each commit (checkpoints, which copy the
// log into the database file, sync both files themselves).
func (s *Store) syncWAL() error {
	if s.wal == nil {
		// The log exists from the first commit on, and while any connection
		// to the file is open (the writer's is) nobody removes it.
		f, err := os.Open(s.path + "-wal")
		if err != nil {
			return err
		}
		s.wal = f
	}
	return syncData(s.wal)
}

// verify checks, after a write, that the file at the path is still the one
// the store opened, so that a write that landed in a removed file never
// counts. Once it is not, every call of the store fails.
func (s *Store) verify() error {
	if !s.replaced.Load() {
		fi, err := os.Stat(s.path)
		switch {
		case err == nil && os.SameFile(fi, s.ident):
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return s.unavailable("check file", err)
		}
		s.replaced.Store(true)
	}
	return s.replacedError()
}

func (s *Store) replacedError() error {
	return fmt.Errorf("%w: %s is no longer the file this store opened; reopen the store", ErrFileReplaced, s.path)
}

// Close closes the store's connections. Writes still queued are answered
// with an error; later calls fail.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	if s.wr != nil {
		s.wr.close()
	}
	for _, st := range []*sql.Stmt{s.claim, s.complete, s.fail, s.extend, s.blocker, s.get} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.wr != nil {
		errs = append(errs, s.wr.conn.Close())
	}
	if s.wal != nil {
		errs = append(errs, s.wal.Close())
	}
	for _, db := range []*sql.DB{s.w, s.r} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}

// unavailable wraps an error from SQLite (busy, I/O, a cancelled context:
// whether a write took effect is unknown) in ledger.ErrUnavailable, keeping
// it in the chain.
func (s *Store) unavailable(op string, err error) error {
	return fmt.Errorf("ledgersqlite: %s: %w: %w", op, ledger.ErrUnavailable, err)
}

// claimRounds bounds how often a claim starts over because the record
// changed between the SELECT and the INSERT.
const claimRounds = 16

// Claim implements ledger.Store.
func (s *Store) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return ledger.ClaimResult{}, err
	}
	if err := s.refused(); err != nil {
		return ledger.ClaimResult{}, err
	}
	now := s.clock.Now().UnixMilli()
	for round := range claimRounds {
		// A replay is answered by a read, without the write lock. While
		// the writer is busy the claim goes to it first: a fresh claim
		// then costs no read, and a blocked one is answered as soon as its
		// statement has run (errUnchanged), and reads.
		if round > 0 || !s.wr.busy() {
			prev, err := s.blocking(ctx, &p, now)
			if err != nil {
				return ledger.ClaimResult{}, err
			}
			if prev != nil {
				return ledger.Refused(prev, p.Owner), nil
			}
		}
		res, err := s.insert(ctx, &p, now)
		if err != nil {
			return ledger.ClaimResult{}, err
		}
		if res.Claimed {
			return res, nil
		}
		// Another claim won between the two statements: read its record.
	}
	return ledger.ClaimResult{}, fmt.Errorf("ledgersqlite: claim: %w: the record kept changing under %d attempts", ledger.ErrUnavailable, claimRounds)
}

// insert runs the claim statement; not Claimed when the record blocked it.
func (s *Store) insert(ctx context.Context, p *ledger.ClaimParams, now int64) (ledger.ClaimResult, error) {
	var (
		res                 = ledger.ClaimResult{Claimed: true}
		prev                ledger.Record
		st                  string
		lease, exp, at, upd int64
	)
	err := s.submit(ctx, "claim", p.Key, func(ctx context.Context) error {
		err := s.claim.QueryRowContext(ctx, p.Key, p.Tool, p.RunID, p.Owner,
			p.LeaseUntil.UnixMilli(), p.ExpiresAt.UnixMilli(), p.Fingerprint, now,
		).Scan(&res.Attempt, &st, &prev.Owner, &lease, &exp, &prev.Fingerprint,
			&prev.Attempt, &at, &prev.Reason, &upd, &prev.Tool, &prev.RunID)
		if errors.Is(err, sql.ErrNoRows) {
			res.Claimed = false
			return errUnchanged
		}
		return err
	})
	if errors.Is(err, errUnchanged) {
		err = nil
	}
	if err != nil || !res.Claimed {
		return ledger.ClaimResult{}, err
	}
	if st != "" {
		prev.Key, prev.State = p.Key, ledger.State(st)
		prev.LeaseUntil, prev.ExpiresAt, prev.AttemptAt, prev.UpdatedAt = fromMilli(lease), fromMilli(exp), fromMilli(at), fromMilli(upd)
		res.Previous = &prev
	}
	return res, nil
}

// blocking returns the record under p.Key if it blocks the claim p at now,
// nil if there is none or it gives way.
func (s *Store) blocking(ctx context.Context, p *ledger.ClaimParams, now int64) (*ledger.Record, error) {
	sc, err := scan(s.blocker.QueryRowContext(ctx, p.Key, p.Fingerprint, now), true)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, s.unavailable("claim", err)
	case sc.claimable:
		return nil, nil
	}
	return &sc.r, nil
}

// write runs one of the owner's conditional updates; no row changed means
// the caller no longer owns a live pending record.
func (s *Store) write(ctx context.Context, op string, stmt *sql.Stmt, key, owner string, args ...any) error {
	if key == "" || owner == "" {
		return fmt.Errorf("ledgersqlite: %s: %w: key and owner are required", op, ledger.ErrInvalid)
	}
	return s.submit(ctx, op, key, func(ctx context.Context) error {
		res, err := stmt.ExecContext(ctx, append([]any{key, owner}, args...)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return ledger.ErrNotOwner
		}
		return nil
	})
}

// Complete implements ledger.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	return s.write(ctx, "complete", s.complete, key, owner, c.Summary, c.Ref, c.Result, c.Truncated, s.clock.Now().UnixMilli(), c.Retention.Milliseconds())
}

// Fail implements ledger.Store.
func (s *Store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	if err := f.Validate(); err != nil {
		return err
	}
	state, advance := ledger.StateUncertain, 0
	if f.Definite {
		state, advance = ledger.StateFailed, 1
	}
	return s.write(ctx, "fail", s.fail, key, owner, string(state), advance, f.Reason, s.clock.Now().UnixMilli(), f.Retention.Milliseconds())
}

// Extend implements ledger.Store.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	if leaseUntil.IsZero() {
		return fmt.Errorf("ledgersqlite: extend: %w: lease is required", ledger.ErrInvalid)
	}
	return s.write(ctx, "extend", s.extend, key, owner, leaseUntil.UnixMilli(), s.clock.Now().UnixMilli())
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if key == "" {
		return nil, fmt.Errorf("ledgersqlite: get: %w: key is required", ledger.ErrInvalid)
	}
	if err := s.refused(); err != nil {
		return nil, err
	}
	sc, err := scan(s.get.QueryRowContext(ctx, key, s.clock.Now().UnixMilli()), false)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, ledger.ErrNotFound
	case err != nil:
		return nil, s.unavailable("get", err)
	}
	return &sc.r, nil
}

// listQuery is the query of List for f at now, with its arguments.
func listQuery(f ledger.Filter, now time.Time) (string, []any) {
	q := "SELECT " + recordCols + " FROM records WHERE NOT " + expired("?")
	args := []any{now.UnixMilli()}
	if f.State != "" {
		q += " AND state = ?"
		args = append(args, string(f.State))
	}
	if f.RunID != "" {
		q += " AND run_id = ?"
		args = append(args, f.RunID)
	}
	if !f.LeaseBefore.IsZero() {
		q += " AND lease_until < ?"
		args = append(args, f.LeaseBefore.UnixMilli())
	}
	if !f.After.IsZero() {
		q += " AND (lease_until, key) > (?, ?)"
		args = append(args, f.After.LeaseUntil.UnixMilli(), f.After.Key)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = ledger.DefaultListLimit
	}
	return q + " ORDER BY lease_until, key LIMIT ?", append(args, limit)
}

// List implements ledger.Store. It returns the records in the order of
// their LeaseUntil, oldest first, then of their keys: by state, a range of
// the index on (state, lease_until) (which holds the key too, the primary
// key of a table WITHOUT ROWID) read in order from the cursor and stopped
// at the limit.
func (s *Store) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	if err := s.refused(); err != nil {
		return nil, err
	}
	q, args := listQuery(f, s.clock.Now())
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, s.unavailable("list", err)
	}
	defer rows.Close()
	var out []ledger.Record
	for rows.Next() {
		sc, err := scan(rows, false)
		if err != nil {
			return nil, s.unavailable("list", err)
		}
		out = append(out, sc.r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.unavailable("list", err)
	}
	return out, nil
}

// purgeChunk bounds the records one write of Purge deletes, so that a
// claim queued behind it waits for a small commit and its sync, not for a
// large one. In BenchmarkPurgeBlocking (20,000 expired records, one fresh
// action at a time beside the purge; 0.3 to 0.6 ms p99 with no purge),
// before Purge checkpointed (see checkpoint), the p99 of an action was 17
// to 20 ms with chunks of 1,000 keys, 7 ms with 64 records, 4.7 to 5.5 ms
// with 32 and 4.2 to 4.5 ms with 16, which makes the purge twice as long
// again.
const purgeChunk = 32

// Purge implements ledger.Purger. It walks the table in key order: a read
// finds the next purgeChunk expired records (expiry is not indexed, to
// keep claims cheap, so it scans past the live ones, on a read connection,
// without the write lock), and a write of its own deletes the expired
// records up to the last of them. Writes of other callers run between the
// chunks.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	if err := s.refused(); err != nil {
		return 0, err
	}
	total, from, at := 0, "", before.UnixMilli()
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		var upto sql.NullString
		if err := s.r.QueryRowContext(ctx, "SELECT max(key) FROM (SELECT key FROM records WHERE key > ?1 AND "+expired("?2")+" ORDER BY key LIMIT ?3)",
			from, at, purgeChunk).Scan(&upto); err != nil {
			return total, s.unavailable("purge", err)
		}
		if !upto.Valid {
			return total, nil
		}
		var n int64
		err := s.submit(ctx, "purge", "", func(ctx context.Context) error {
			res, err := s.wr.conn.ExecContext(ctx, "DELETE FROM records WHERE key > ?1 AND key <= ?2 AND "+expired("?3"),
				from, upto.String, at)
			if err == nil {
				n, err = res.RowsAffected()
			}
			return err
		})
		if err != nil {
			return total, err
		}
		total += int(n)
		from = upto.String
		if n > 0 {
			if err := s.checkpoint(ctx); err != nil {
				return total, err
			}
		}
	}
}

// checkpoint copies the log into the database file (PASSIVE: it waits for
// no one and copies what no reader still needs), on a read connection.
// Purge runs it after each chunk: deletions dirty many pages, and SQLite
// would otherwise copy them in the commit that takes the log past 1,000
// pages, as often as not a claim's. In BenchmarkPurgeBlocking it took the
// p99 of a fresh action beside a purge from 4.7-5.1 ms to 3.2-3.5 ms. A
// checkpoint of another process already running (SQLITE_BUSY) is left to
// it.
func (s *Store) checkpoint(ctx context.Context) error {
	var busy, log, copied int
	err := s.r.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &copied)
	if err != nil && !isBusy(err) {
		return s.unavailable("purge", err)
	}
	return nil
}

func fromMilli(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// scanned holds one row while it is scanned; a single allocation.
type scanned struct {
	r                   ledger.Record
	state               string
	lease, exp, at, upd int64
	claimable           bool
	dest                [17]any
}

// scan reads the recordCols of one row, and with claimable the trailing
// column of blockerSQL.
func scan(row interface{ Scan(...any) error }, claimable bool) (*scanned, error) {
	sc := new(scanned)
	r := &sc.r
	sc.dest = [...]any{&r.Key, &r.Tool, &r.RunID, &sc.state, &r.Owner, &sc.lease, &sc.exp, &r.Fingerprint,
		&r.Attempt, &sc.at, &r.Summary, &r.Ref, &r.Result, &r.Truncated, &r.Reason, &sc.upd, &sc.claimable}
	n := len(sc.dest)
	if !claimable {
		n--
	}
	if err := row.Scan(sc.dest[:n]...); err != nil {
		return nil, err
	}
	r.State = ledger.State(sc.state)
	r.LeaseUntil, r.ExpiresAt, r.AttemptAt, r.UpdatedAt = fromMilli(sc.lease), fromMilli(sc.exp), fromMilli(sc.at), fromMilli(sc.upd)
	sc.dest = [17]any{} // let the record go without the pointers
	return sc, nil
}
