package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// Open opens (creating when missing) the ledger file at path and prepares
// its schema. path must name a file; several Stores, in one process or in
// several, may open the same file. A path that cannot hold the ledger is
// refused with ledger.ErrConfig (see the package documentation).
func Open(ctx context.Context, path string, cfg *Config) (*Store, error) {
	c := cfg.withDefaults()
	abs, err := filePath(path)
	if err != nil {
		return nil, err
	}
	dsn := fileDSN(abs)
	s := &Store{clock: c.Clock, path: abs, watching: &watching{}}
	if s.w, err = sql.Open("sqlite", dsn+"&_busy_timeout=0&_pragma=page_size("+strconv.Itoa(pageSize)+")"); err != nil {
		return nil, s.unavailable("open", err)
	}
	s.w.SetMaxOpenConns(1)
	if err := s.open(ctx, dsn, c); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// withDefaults returns the Config Open runs with.
func (cfg *Config) withDefaults() Config {
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
	return c
}

// filePath returns the absolute path of the ledger file path names,
// refusing what does not name a file (ledger.ErrInvalid) or cannot hold
// one (ledger.ErrConfig).
func filePath(path string) (string, error) {
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return "", fmt.Errorf("ledgersqlite: %w: path must name a file, got %q", ledger.ErrInvalid, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("ledgersqlite: %w: %w", ledger.ErrInvalid, err)
	}
	if err := checkPath(abs); err != nil {
		return "", err
	}
	return abs, nil
}

// pageSize is the page size of the files Open creates (SQLite's default is
// 4 KiB). A lookup of a key reads one page per level of the table's
// B-tree, whose interior pages hold whole rows (WITHOUT ROWID), and a
// process that has not read the file yet (a new container, a Lambda) reads
// each from the disk: with 16 KiB pages a ledger of 10^6 records is four
// levels deep, not five, and the 141 pages above the leaves are soon
// cached (2,436 at 4 KiB). The cost is in writes: a commit copies the pages
// it changed into the log, 16 KiB each (92 KB of log per fresh action,
// against 28 KB). The page size of an existing file stays what it was: in
// WAL mode SQLite cannot change it (VACUUM would have to leave WAL mode,
// which needs the file to itself, and rewrite the whole file). README.md,
// Storage and A new process.
const pageSize = 16384

// fileDSN is the data source name of the file at abs: a file: URI, so
// that any path survives (SQLite decodes %XX escapes). SQLite itself syncs
// at checkpoints only (NORMAL); with SyncFull the writer syncs the log
// after every commit (README.md, Durability). The writer meets a lock held by
// another process with busy_timeout 0 and retries from Go (see retryBusy);
// readers, which meet a busy only while SQLite recovers the log, keep
// SQLite's busy handler.
func fileDSN(abs string) string {
	return "file:" + strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(abs)) +
		"?_synchronous=NORMAL"
}

// open does the rest of Open on s, whose writing handle is open: the
// schema, the file's identity, the readers, and the writer with its
// statements. On an error the caller closes s.
func (s *Store) open(ctx context.Context, dsn string, c Config) error {
	// Processes opening a new file together can meet SQLITE_BUSY that
	// SQLite's busy handler never waited for (one switches the file to WAL
	// or rebuilds its WAL index while another starts to read it). The
	// migration changes nothing unless it commits, so it is run again.
	if err := retryBusy(ctx, c.BusyTimeout, func() error { return s.migrate(ctx) }); err != nil {
		return err
	}
	// The file SQLite holds open is the one at the path now; every write
	// checks that it still is.
	var err error
	if s.ident, err = os.Stat(s.path); err != nil {
		return s.openError(err)
	}
	if s.r, err = sql.Open("sqlite", dsn+"&_busy_timeout="+strconv.FormatInt(c.BusyTimeout.Milliseconds(), 10)+
		"&_query_only=1&_pragma=mmap_size(0)"); err != nil {
		return s.unavailable("open", err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	s.r.SetMaxOpenConns(readers)
	s.r.SetMaxIdleConns(readers)
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return s.unavailable("open", err)
	}
	if err := s.prepare(ctx, conn); err != nil {
		s.Close() // its statements, while conn is still open
		conn.Close()
		return err
	}
	var syncer func() error
	if c.Synchronous == SyncFull {
		syncer = s.syncWAL
	}
	s.openSignal()
	s.wr = newWriter(conn, s.verify, syncer, s.unavailable)
	s.wr.busyTimeout = c.BusyTimeout
	s.wr.settled = s.signalSettled
	return nil
}

// prepare prepares the writes' statements on conn, the writing connection,
// and the reads' on the readers.
func (s *Store) prepare(ctx context.Context, conn *sql.Conn) error {
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
		var err error
		if *p.stmt, err = p.db.PrepareContext(ctx, p.query); err != nil {
			return s.unavailable("prepare", err)
		}
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
	errs = append(errs, s.closeWatch())
	for _, db := range []*sql.DB{s.w, s.r} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	return errors.Join(errs...)
}
