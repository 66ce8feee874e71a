package ledgersqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oncely/oncely/ledger"
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
// claim with fingerprint fp at now by a caller that knows the owner
// abandoned to have exited (SQL parameters). It mirrors ledger.Store:
// expired, failed, or (same fingerprint) uncertain or pending with a
// lapsed lease or an owner known to have exited, unless the owner is the
// claim's own (owner: its earlier write, answered by ledger.Refused).
func claimable(fp, now, abandoned, owner string) string {
	return "(" + expired(now) + " OR state = 'failed' OR (fingerprint = " + fp +
		" AND (state = 'uncertain' OR (state = 'pending' AND owner <> " + owner + " AND (lease_until <= " + now + " OR owner = " + abandoned + ")))))"
}

const recordCols = `key, tool, run_id, state, owner, lease_until, expires_at, fingerprint,
	attempt, attempt_at, summary, ref, result, truncated, reason, updated_at`

var (
	// claimSQL is the write of a claim, one statement. RETURNING yields the
	// new row only, so a takeover copies the record it replaces into the
	// prev_* columns and returns them; a claim that finds the key taken
	// writes nothing and yields no row (README.md, Claim).
	//
	// ?1 key ?2 tool ?3 run id ?4 owner ?5 lease ?6 expiry ?7 fingerprint ?8 now
	// ?9 abandoned owner
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
WHERE ` + claimable("?7", "?8", "?9", "?4") + `
RETURNING attempt, prev_state, prev_owner, prev_lease_until, prev_expires_at, prev_fingerprint,
	prev_attempt, prev_attempt_at, prev_reason, prev_updated_at, prev_tool, prev_run_id`

	// ?1 key ?2 fingerprint ?3 now ?4 abandoned owner ?5 the claim's owner
	blockerSQL = `SELECT ` + recordCols + `, ` + claimable("?2", "?3", "?4", "?5") + ` FROM records WHERE key = ?1`

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

// listStates are the states a listing without a state filter merges.
var listStates = []ledger.State{ledger.StatePending, ledger.StateUncertain, ledger.StateDone, ledger.StateFailed}

// listQuery is the query of List for f at now, with its arguments.
//
// A listing of one state reads a range of the index on (state,
// lease_until), whose entries end with the key, in the order of the page.
// A listing of every state (and no run) is the union of each state's page,
// ordered and cut again: SQLite cannot read the index in lease order
// across states, and without the union it read and sorted the whole table
// for every page. A listing by run reads the run's records, by the index
// on run_id, and sorts them.
func listQuery(f ledger.Filter, now time.Time) (string, []any) {
	limit := f.Limit
	if limit <= 0 {
		limit = ledger.DefaultListLimit
	}
	const order = " ORDER BY lease_until, key LIMIT ?"
	if f.State != "" || f.RunID != "" {
		q, args := listWhere(f, now)
		return q + order, append(args, limit)
	}
	var arms []string
	var args []any
	for _, st := range listStates {
		f.State = st
		q, a := listWhere(f, now)
		arms = append(arms, "SELECT * FROM ("+q+order+")")
		args = append(append(args, a...), limit)
	}
	return strings.Join(arms, " UNION ALL ") + order, append(args, limit)
}

// listWhere is the query of List for f at now without its order and limit.
func listWhere(f ledger.Filter, now time.Time) (string, []any) {
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
	return q, args
}
