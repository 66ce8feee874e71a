// Package ledgersqlite is the embedded ledger.Store: one SQLite file, opened
// through modernc.org/sqlite (pure Go, no cgo), shared safely by the
// goroutines of a process and by several processes on the same machine.
//
// Open creates the schema, or migrates a file of an older version in
// place; a file written by a newer version is refused with
// ErrSchemaVersion. The file runs in WAL mode, so readers never wait for
// the writer; a write that finds the lock held by another process retries
// for up to Config.BusyTimeout (default 5 s) before it fails with
// ledger.ErrUnavailable. Concurrent writes of a process share a
// transaction and a sync (group commit; Stats counts them); each keeps
// its own answer.
//
// Durability: with SyncFull (the default) no write is answered before the
// disk has synced the commit that holds it. SyncNormal syncs at WAL
// checkpoints only: after a power loss or an operating-system crash (not a
// crash of the process) the last commits can be lost, and a lost claim or
// done record lets the action run again. Choose it only where the
// providers deduplicate by the downstream key themselves.
//
// A Store whose file is removed or replaced after Open (a temporary-file
// cleaner, an operator) answers every later write with ErrFileReplaced, a
// ledger.ErrUnavailable, rather than write to a file nobody else sees.
// Open reports what no retry can fix as ledger.ErrConfig, naming the path:
// a directory that does not exist, a path that is a directory, a file that
// is not an SQLite database, a location where the file (or its -wal and
// -shm companions) cannot be created or written.
//
// How the store reads, commits, syncs and claims, and why, is in README.md
// beside this file; the measurements behind it are in BENCHMARKS.md.
package ledgersqlite
