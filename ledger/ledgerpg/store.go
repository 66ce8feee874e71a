package ledgerpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// Defaults of Config.
const (
	DefaultSchema     = "public"
	DefaultTable      = "oncely_records"
	DefaultPurgeBatch = 1000
)

// Querier runs statements: *pgxpool.Pool, *pgx.Conn and pgx.Tx satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Config tunes a Store and names its table. The zero value selects the
// defaults.
type Config struct {
	// Clock tells the time (default: the system clock). Lease and expiry
	// are compared with this clock's time, sent with every statement, never
	// with the server's.
	Clock clock.Clock
	// Schema and Table name the ledger table (default public and
	// oncely_records): letters, digits and underscores, the table at most
	// 48 bytes, the schema at most 63.
	Schema, Table string
	// ExecMode is how statements are sent (default
	// pgx.QueryExecModeExec: one round trip each, an unnamed statement,
	// nothing kept in the session, so it works through PgBouncer in
	// transaction pooling mode). pgx.QueryExecModeCacheStatement saves the
	// server the parsing where connections are direct;
	// pgx.QueryExecModeSimpleProtocol suits poolers that do not support the
	// extended protocol.
	ExecMode pgx.QueryExecMode
	// PurgeBatch is how many records one statement of Purge deletes
	// (default DefaultPurgeBatch).
	PurgeBatch int
	// RunIndex makes Migrate create an index on run_id (if it does not
	// exist), for programs that list the records of one run, of every
	// state, in a large ledger (oncely ledger list --run): without it such a
	// listing reads the table. It costs an index entry on every write of a
	// record; the sweeper's listings, of one run too, do not need it.
	// Migrate never drops the index: DROP INDEX <table>_run does.
	RunIndex bool
	// NoCreate makes OpenURL create and migrate nothing, for programs that
	// only read or settle the records of an existing ledger: a table that
	// does not exist, or needs a migration, is a *TableError (matching
	// ledger.ErrConfig), so that a mistyped schema or table is not taken
	// for an empty ledger. New and Migrate ignore it.
	NoCreate bool
	// NoListen makes Watch return ledger.ErrNoWatch, so that callers
	// waiting for a record held elsewhere poll it: set it where LISTEN
	// does not work, behind PgBouncer (or another pooler) in transaction
	// pooling mode. Settles still notify the records that Stores
	// listening on a direct connection watch.
	NoListen bool
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// withDefaults validates cfg and fills in the defaults.
func (cfg *Config) withDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.ExecMode == 0 {
		c.ExecMode = pgx.QueryExecModeExec
	}
	if c.PurgeBatch <= 0 {
		c.PurgeBatch = DefaultPurgeBatch
	}
	if !nameRE.MatchString(c.Schema) || len(c.Schema) > 63 || !nameRE.MatchString(c.Table) || len(c.Table) > 48 {
		return c, fmt.Errorf("ledgerpg: %w: schema %q or table %q is not a plain name (letters, digits, _; table up to 48 bytes)",
			ledger.ErrConfig, c.Schema, c.Table)
	}
	return c, nil
}

// Store is a ledger.Store in a PostgreSQL table. It is safe for concurrent
// use, also by other processes on the same table; a Store bound to a
// transaction (InTx) runs its calls one at a time on the transaction's
// connection.
type Store struct {
	db    Querier
	clock clock.Clock
	mode  pgx.QueryExecMode
	batch int
	sql   *statements
	tx    *sync.Mutex // InTx only: one statement at a time on the connection
	// pool is the pool OpenURL opened, which Close closes; nil for a db of
	// the caller's.
	pool *pgxpool.Pool
	// watch is the Watch side, shared with the Store's InTx copies, which
	// do not close it.
	watch   *watching
	derived bool // made by InTx
	// runIndex: Config.RunIndex (RunsIndexed).
	runIndex bool
}

var (
	_ ledger.Store  = (*Store)(nil)
	_ io.Closer     = (*Store)(nil)
	_ ledger.Purger = (*Store)(nil)
)

// New returns a Store on db (a *pgxpool.Pool sized by the caller, or a
// *pgx.Conn) and the table cfg names, which Migrate must have created.
// It fails only on an invalid Config.
func New(db Querier, cfg *Config) (*Store, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{db: db, clock: c.Clock, mode: c.ExecMode, batch: c.PurgeBatch, runIndex: c.RunIndex,
		sql: newStatements(c.Schema, c.Table), watch: newWatching(db, c)}, nil
}

// statements is the SQL of a Store, built once for its table.
type statements struct {
	table, claim, complete, fail, extend, get, purge string
}

const (
	recordCols = `key, tool, run_id, state, owner, lease_until, expires_at, fingerprint,
	attempt, attempt_at, summary, ref, result, truncated, reason, updated_at`
	prevCols = `prev_state, prev_owner, prev_lease_until, prev_expires_at, prev_fingerprint,
	prev_attempt, prev_attempt_at, prev_reason, prev_updated_at, prev_tool, prev_run_id`
	// visible: the record has not expired at now ($1): it is pending
	// (a pending record never expires) or within its retention.
	visible = `(state IN ('pending', 'uncertain') OR expires_at > $1)`
)

func newStatements(schema, table string) *statements {
	fn := func(name string) string { return pgx.Identifier{schema, table + "_" + name}.Sanitize() }
	t := pgx.Identifier{schema, table}.Sanitize()
	return &statements{
		table: t,
		claim: `SELECT ` + recordCols + `, ` + prevCols + ` FROM ` + fn("claim") + `($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		// The owner's writes are functions (migration 5) that return whether
		// they applied: a row of SELECT when they did.
		// Complete and Fail notify the table's channel with the key
		// themselves (migration 6), only for a record a Watch marked.
		complete: `SELECT 1 WHERE ` + fn("complete") + `($1, $2, $3, $4, $5, $6, $7, $8)`,
		fail:     `SELECT 1 WHERE ` + fn("fail") + `($1, $2, $3, $4, $5, $6, $7)`,
		extend:   `SELECT 1 WHERE ` + fn("extend") + `($1, $2, $3, $4)`,
		get:      `SELECT ` + recordCols + ` FROM ` + t + ` WHERE ` + visible + ` AND key = $2`,
		// Bounded, and skipping rows a claim holds, so that a purge never
		// makes claims wait for long. A pending or uncertain record never
		// expires. The partial index on expires_at of the done and failed
		// records serves it.
		purge: `DELETE FROM ` + t + ` WHERE key IN (
	SELECT key FROM ` + t + ` WHERE expires_at <= $1 AND state IN ('done', 'failed')
	LIMIT $2 FOR UPDATE SKIP LOCKED)`,
	}
}

// ms reduces t to the millisecond precision the store keeps, in UTC.
func ms(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

func (s *Store) now() time.Time { return ms(s.clock.Now()) }

// Claim implements ledger.Store. It is one statement, one round trip,
// whether the claim wins, takes a record over, or is refused: a call of
// the claim function that Migrate creates (see the package
// documentation).
func (s *Store) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if err := p.Validate(); err != nil {
		return ledger.ClaimResult{}, err
	}
	defer s.lock()()
	var (
		rec  record
		prev prevRecord
	)
	dest := append(rec.dest(), prev.dest()...)
	err := s.db.QueryRow(ctx, s.sql.claim, s.mode, p.Key, p.Tool, p.RunID, p.Owner,
		ms(p.LeaseUntil), ms(p.ExpiresAt), p.Fingerprint, s.now(), p.Abandoned).Scan(dest...)
	if err != nil {
		return ledger.ClaimResult{}, unavailable("claim", err)
	}
	r := rec.record()
	switch prev.rec.state {
	case "": // refused
		return ledger.Refused(r, p.Owner), nil
	case "none":
		return ledger.ClaimResult{Claimed: true, Attempt: r.Attempt}, nil
	}
	return ledger.ClaimResult{Claimed: true, Attempt: r.Attempt, Previous: prev.record(p.Key)}, nil
}

// write runs one of the owner's conditional updates; no row changed means
// the caller no longer owns a pending record.
func (s *Store) write(ctx context.Context, op, sql, key, owner string, args ...any) error {
	if key == "" || owner == "" {
		return fmt.Errorf("ledgerpg: %s: %w: key and owner are required", op, ledger.ErrInvalid)
	}
	tag, err := s.db.Exec(ctx, sql, append([]any{s.mode, key, owner}, args...)...)
	if err != nil {
		return unavailable(op, err)
	}
	if tag.RowsAffected() == 0 {
		return ledger.ErrNotOwner
	}
	return nil
}

// Complete implements ledger.Store.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	if err := c.Validate(); err != nil {
		return err
	}
	defer s.lock()()
	return s.write(ctx, "complete", s.sql.complete, key, owner, c.Summary, c.Ref, c.Result, c.Truncated, s.now(), c.Retention.Milliseconds())
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
	defer s.lock()()
	return s.write(ctx, "fail", s.sql.fail, key, owner, string(state), advance, f.Reason, s.now(), f.Retention.Milliseconds())
}

// Extend implements ledger.Store. It also raises the record's expiry to
// the new lease end when that is later.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	if leaseUntil.IsZero() {
		return fmt.Errorf("ledgerpg: extend: %w: lease is required", ledger.ErrInvalid)
	}
	defer s.lock()()
	return s.write(ctx, "extend", s.sql.extend, key, owner, ms(leaseUntil), s.now())
}

// Get implements ledger.Store.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if key == "" {
		return nil, fmt.Errorf("ledgerpg: get: %w: key is required", ledger.ErrInvalid)
	}
	defer s.lock()()
	var rec record
	err := s.db.QueryRow(ctx, s.sql.get, s.mode, s.now(), key).Scan(rec.dest()...)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ledger.ErrNotFound
	case err != nil:
		return nil, unavailable("get", err)
	}
	return rec.record(), nil
}

// listQuery is the query of List for f, with its arguments (the first
// is the statement mode).
func (s *Store) listQuery(f ledger.Filter) (string, []any) {
	args := []any{s.mode, s.now()}
	q := "SELECT " + recordCols + " FROM " + s.sql.table + " WHERE " + visible
	arg := func(cond string, v any) {
		args = append(args, v)
		q += fmt.Sprintf(" AND "+cond, len(args)-1)
	}
	switch f.State {
	case "":
	case ledger.StatePending, ledger.StateUncertain, ledger.StateDone, ledger.StateFailed:
		// A literal, not a parameter, so that every plan of the statement
		// (a prepared statement's generic plan too) can use the partial
		// index of the stuck states.
		q += " AND state = '" + string(f.State) + "'"
	default:
		arg("state = $%d", string(f.State))
	}
	switch f.RunID {
	case "":
	case ledger.CountersRun:
		// A literal, so that every plan can use the partial index of the
		// counter records (migration 7).
		q += " AND run_id = '" + ledger.CountersRun + "'"
	default:
		arg("run_id = $%d", f.RunID)
	}
	if !f.LeaseBefore.IsZero() {
		arg("lease_until < $%d", ms(f.LeaseBefore))
	}
	if !f.After.IsZero() {
		args = append(args, ms(f.After.LeaseUntil), f.After.Key)
		q += fmt.Sprintf(" AND (lease_until, key) > ($%d, $%d)", len(args)-2, len(args)-1)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = ledger.DefaultListLimit
	}
	args = append(args, limit)
	return q + fmt.Sprintf(" ORDER BY lease_until, key LIMIT $%d", len(args)-1), args
}

// List implements ledger.Store. It returns the records in the order of
// their LeaseUntil, oldest first, then of their keys. The pending and
// uncertain records (the sweeper's listings, of one run or all) are a
// range of a partial index on (state, lease_until, key), read in order
// from the cursor and stopped at the limit; so are the done and failed
// records (an operator's listings, of a settled state: migration 7's
// partial index) and the counter records (ledger.CountersRun). A listing
// of every state, or of one run of done or failed records, reads the
// table, by run id through an index where Config.RunIndex asks for one
// (RunsIndexed).
func (s *Store) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	q, args := s.listQuery(f)
	defer s.lock()()
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, unavailable("list", err)
	}
	defer rows.Close()
	var (
		out []ledger.Record
		rec record
	)
	dest := rec.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, unavailable("list", err)
		}
		out = append(out, *rec.record())
		rec.r.Result = nil // the next row scans into a new slice
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("list", err)
	}
	return out, nil
}

// RunsIndexed reports whether a listing of one run's records (of every
// state, or done or failed) reads an index: whether the Store was made
// with Config.RunIndex. An operator's tool (the console's search by run)
// reads a bounded number of records by time instead when it does not.
func (s *Store) RunsIndexed() bool { return s.runIndex }

var _ ledger.RunIndexer = (*Store)(nil)

// Purge implements ledger.Purger. It deletes in statements of at most
// PurgeBatch records each, skipping records a claim holds at that moment,
// until a statement deletes fewer.
func (s *Store) Purge(ctx context.Context, before time.Time) (int, error) {
	defer s.lock()()
	total := 0
	for {
		tag, err := s.db.Exec(ctx, s.sql.purge, s.mode, ms(before), s.batch)
		if err != nil {
			return total, unavailable("purge", err)
		}
		n := int(tag.RowsAffected())
		total += n
		if n < s.batch {
			return total, nil
		}
	}
}

// record is one row of recordCols while it is scanned.
type record struct {
	r     ledger.Record
	state string
}

func (x *record) dest() []any {
	r := &x.r
	return []any{&r.Key, &r.Tool, &r.RunID, &x.state, &r.Owner, &r.LeaseUntil, &r.ExpiresAt, &r.Fingerprint,
		&r.Attempt, &r.AttemptAt, &r.Summary, &r.Ref, &r.Result, &r.Truncated, &r.Reason, &r.UpdatedAt}
}

// record returns a copy of the scanned record, its times in UTC.
func (x *record) record() *ledger.Record {
	r := x.r
	r.State = ledger.State(x.state)
	r.LeaseUntil, r.ExpiresAt, r.AttemptAt, r.UpdatedAt = r.LeaseUntil.UTC(), r.ExpiresAt.UTC(), r.AttemptAt.UTC(), r.UpdatedAt.UTC()
	return &r
}

// prevRecord is the prev_* columns of a claim while they are scanned.
type prevRecord struct {
	rec record
}

func (x *prevRecord) dest() []any {
	r := &x.rec.r
	return []any{&x.rec.state, &r.Owner, &r.LeaseUntil, &r.ExpiresAt, &r.Fingerprint,
		&r.Attempt, &r.AttemptAt, &r.Reason, &r.UpdatedAt, &r.Tool, &r.RunID}
}

func (x *prevRecord) record(key string) *ledger.Record {
	r := x.rec.record()
	r.Key = key
	return r
}

// InTx returns a Store that runs every call in tx, the caller's open
// transaction, so that a claim, an effect written in the same database and
// the record of its outcome commit together, or not at all. The package
// documentation and README.md say when that is right.
//
// A claim it makes locks the record's row until tx ends: claims on that
// key by other sessions wait for tx to end, then see the outcome. The
// returned Store serialises its own calls, since a connection runs one
// statement at a time, but the caller must not use tx while one of them
// runs. The executor renews a claim's lease (Extend) from another
// goroutine once half the lease has passed: keep a call whose tool uses
// tx shorter than that, or give it a context deadline within the lease,
// under which the executor renews nothing.
//
// At REPEATABLE READ or SERIALIZABLE, a claim that meets a record changed
// since the transaction's snapshot fails with a serialization error
// (wrapped in ledger.ErrUnavailable), and the transaction must be
// retried; READ COMMITTED, the default, has no such failures.
func (s *Store) InTx(tx pgx.Tx) *Store {
	c := *s
	c.db = tx
	c.tx = new(sync.Mutex)
	c.pool = nil // the pool is s's to close
	c.derived = true
	return &c
}

// Close ends the listening connection of Watch and closes the pool
// OpenURL opened. A Store made by New, or by InTx, leaves its db open: it
// is the caller's; a Store made by InTx leaves the listener to the Store
// it was made from.
func (s *Store) Close() error {
	if !s.derived {
		s.watch.close()
	}
	if s.pool != nil {
		s.pool.Close()
	}
	return nil
}

// lock takes the transaction's connection for one call and returns its
// release; a Store that is not bound to a transaction needs no lock.
func (s *Store) lock() func() {
	if s.tx == nil {
		return func() {}
	}
	s.tx.Lock()
	return s.tx.Unlock
}
