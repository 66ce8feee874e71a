// Package ledgerpg is a ledger.Store in PostgreSQL, on pgx/v5: for agents
// whose runs and checkpoints already live in PostgreSQL, so that the
// ledger shares their database, their backups and their failover.
//
// Migrate creates or upgrades the table (public.oncely_records by
// default; Config.Schema and Config.Table) under a transaction-scoped
// advisory lock, so several processes may run it at once; a table written
// by a newer version of the package is refused with ErrSchemaVersion. New
// returns a Store on the application's own pool; OpenURL makes the pool
// from a postgres:// URL, migrates, and its Store's Close closes the pool.
// Lease and expiry are compared with the time of the Store's Clock, sent
// with every statement, never with the server's clock.
//
// A claim is one call and one round trip, whether it wins, takes a record
// over, or is refused by a record that is then returned with it; a
// refused claim writes nothing. The claim and the owner's writes are
// server-side functions, planned once per connection. Statements go out with pgx.QueryExecModeExec by default (no prepared
// statement, no session state), so the Store works through PgBouncer in
// transaction pooling mode; Config.ExecMode selects another mode
// (pgx.QueryExecModeCacheStatement for direct connections and PgBouncer
// 1.21 or later with max_prepared_statements).
//
// Store.InTx claims and records inside the caller's transaction: right
// when the tool's effect is a row in the same database (claim, effect and
// record commit together or not at all), wrong when the tool calls
// anything outside it (a rollback erases the claim, not the email).
//
// A claim or a record is durable when its commit is: with
// synchronous_commit off, or asynchronous replication and a failover, the
// last commits can be lost, and a lost claim or done record lets the
// action run again. For tools that move money keep synchronous_commit on
// (the default) and, with replicas, synchronous replication.
//
// README.md beside this file says how to set it up, how a claim works and
// why; the measurements behind it are in BENCHMARKS.md.
package ledgerpg
