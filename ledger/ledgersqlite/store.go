package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	// registers the "sqlite" driver

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
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
	// synchronous=FULL does, but outside the write lock (README.md,
	// Durability). The default.
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

	watching *watching // Watch, and the signal of settles (watch.go)
}

var (
	_ ledger.Store  = (*Store)(nil)
	_ io.Closer     = (*Store)(nil)
	_ ledger.Purger = (*Store)(nil)
)

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
			p.LeaseUntil.UnixMilli(), p.ExpiresAt.UnixMilli(), p.Fingerprint, now, p.Abandoned,
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
	sc, err := scan(s.blocker.QueryRowContext(ctx, p.Key, p.Fingerprint, now, p.Abandoned, p.Owner), true)
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
