// Package ledgerpg is a ledger.Store in PostgreSQL, on pgx/v5: for agents
// whose runs and checkpoints already live in PostgreSQL, so that the
// ledger shares their database, their backups and their failover.
//
// # Setup
//
// Migrate creates the table (or upgrades it) once, at deployment or at
// start-up; New returns a Store on the application's own pool, sized by
// it (pgxpool.Config.MaxConns; a claim holds a connection for one round
// trip):
//
//	if err := ledgerpg.Migrate(ctx, pool, nil); err != nil { ... }
//	store, err := ledgerpg.New(pool, nil)
//	exec := client.New(store, nil)
//
// Programs that choose their ledger by URL use OpenURL
// (postgres://…?schema=…&table=…), which makes the pool and migrates.
//
// # Storage
//
// One table (public.idemkit_records by default; Config.Schema and
// Config.Table) keyed by the action key, with indexes on (state,
// lease_until) for List and the sweeper, on run_id, and on expires_at for
// Purge; and two functions, <table>_claim and <table>_claimable. Times are
// timestamptz at millisecond precision. The migrations are embedded SQL
// scripts, numbered; the versions applied are kept in <table>_migrations,
// and Migrate runs under a transaction-scoped advisory lock, so several
// processes may run it at once. A table written by a newer version of the
// package is refused with ErrSchemaVersion.
//
// Lease and expiry are compared with the time of the Store's Clock, sent
// with every statement, never with the server's clock.
//
// # Claim
//
// A claim is one call and one round trip, whether it wins, takes a record
// over, or is refused by a record that is then returned with it. It calls
// <table>_claim, a PL/pgSQL function that Migrate creates:
//
//	SELECT * INTO old FROM t WHERE key = p_key;
//	IF FOUND AND NOT claimable(old) THEN RETURN old;  -- a replay: nothing written or locked
//	INSERT INTO t AS r VALUES (...)
//	ON CONFLICT (key) DO UPDATE SET (...) = (<a takeover, or the row unchanged>)
//	RETURNING r.*;
//
// When the read shows no blocking record the INSERT runs; on a conflict
// PostgreSQL locks the newest version of the row and the update decides
// again on that version. A takeover copies the old record into prev_*
// columns of the row (before PostgreSQL 18, RETURNING sees only the new
// row) and returns them; a claim that lost a race to a concurrent one
// rewrites the row unchanged and returns it, so that every loser is
// answered in its one round trip too.
//
// Three forms were measured (replay of a done action through a pool, sent
// unprepared as by default, beside one SELECT of the record by key, on a
// loaded 2-CPU machine): the whole claim as one statement (a CTE that reads
// the record and runs the INSERT, sent by the client) cost 7 to 12 ms, the
// server parsing and planning it every time; the same CTE inside a
// PL/pgSQL function, which the server prepares once per connection, 1.3 to
// 1.6 times the SELECT; the read first and the INSERT only when needed
// (chosen), 0.8 to 1.0 times the SELECT.
//
// A pending record never expires (ledger.Record.Expired): past its
// ExpiresAt it still blocks claims while its lease is live, and once the
// lease has lapsed a claim of the same action takes it over and reports it
// (the executor reconciles first); Get and List return it and Purge keeps
// it. Extend raises ExpiresAt to the new lease end.
//
// Purge deletes expired records in statements of Config.PurgeBatch rows
// that skip rows locked by a claim, so it never holds many locks or makes
// a claim wait for long.
//
// # PgBouncer and other poolers
//
// Statements are sent with pgx.QueryExecModeExec by default: the extended
// protocol with an unnamed statement, one round trip, no prepared
// statement and no other session state, so every call works through
// PgBouncer in transaction pooling mode (Migrate's advisory lock is
// transaction-scoped too). Config.ExecMode selects
// pgx.QueryExecModeSimpleProtocol for poolers without the extended
// protocol, or pgx.QueryExecModeCacheStatement where connections are
// direct. The ExecMode is passed with each statement, whatever the
// pool's default_query_exec_mode.
//
// # Claiming inside the caller's transaction
//
// Store.InTx binds the store to a pgx.Tx of the caller. It is right when
// the tool's effect is a row in the same database (a credit, a ticket, an
// outbox message): claim, effect and record commit together or not at
// all, so the action happens once without any reconciliation, and a crash
// leaves nothing behind. While the transaction is open the claim's row is
// locked: claims on the key from other sessions wait for the transaction
// to end, then see the outcome.
//
// It is wrong when the tool calls anything outside the database (an
// email, a payment, any HTTP API): that call takes effect at once, but the
// claim and its record exist only if the transaction commits. A rollback
// (a later statement failed, the process died, the connection dropped)
// erases them, and the next attempt repeats the effect. Claim such tools
// through the Store on the pool, so the claim is committed before the
// call; and never hold a transaction open across an external call. Both
// cases are examples of Store.InTx.
//
// # Durability
//
// A claim or a record is durable when its commit is: with
// synchronous_commit off, a crash of the server can lose the last commits;
// with asynchronous replication, a failover can lose what the replica had
// not received. A lost claim or done record lets the action run again, a
// repeated effect, unless the provider deduplicates by the downstream key.
// For tools that move money keep synchronous_commit on (the default) and,
// with replicas, synchronous replication.
package ledgerpg
