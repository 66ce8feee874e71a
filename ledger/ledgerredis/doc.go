// Package ledgerredis is a ledger.Store on Redis or Valkey, through
// github.com/redis/go-redis/v9: a standalone server, a primary with
// replicas (Sentinel), or Redis Cluster / Valkey Cluster.
//
// # Writes
//
// Claim, Complete, Fail and Extend are Lua scripts, each one round trip
// (EVALSHA, falling back to EVAL when the server's script cache does not
// hold the script yet). A script runs atomically, so a claim reads the
// record, decides and writes in one step: of any number of concurrent
// claims on a key exactly one wins, and a claim that does not win gets the
// blocking record in the same reply. Complete, Fail and Extend change the
// record only while it is pending, live and owned by the caller's owner
// token; otherwise they return ledger.ErrNotOwner. A fresh action through
// client.Executor costs two round trips (claim, record) and a replay one.
//
// # Keys and expiry
//
// A record is a hash under {prefix:b}:r:<action key>, where b is one of
// Buckets buckets chosen by a hash of the action key. Its fields hold the
// whole record, the lease and the retention included, and readers apply
// expiry from those fields with the store's Clock (ledger.Record.Expired:
// a done or failed record past its retention counts as absent, a pending
// or uncertain one never); the key's TTL only reclaims memory. An
// uncertain record's key is kept for a century, until a claim or an
// operator settles it. A done or failed record's key lives
// until a minute after its retention (ExpiresAt) ends: a host whose clock
// is a little behind the writer's still finds a record that has not
// expired by its own clock, even one settled just as its retention ended
// (a tool that ran past it under a renewed lease). A pending record's key lives
// PendingGrace beyond its retention and its lease, whichever is later, and
// Extend raises the retention to the new lease end when it is sooner, so
// the TTL never cuts a live claim short, and a claim on a pending record
// whose lease and retention have both run out still finds it and takes it
// over (reconciling first) rather than starting afresh. Only a claim
// abandoned for longer than PendingGrace past both is deleted by the
// server; a later claim then finds the key absent.
//
// Times come from Config.Clock (the host's clock), not from the server, as
// with every other backend: keep the hosts that share a ledger in time
// (NTP).
//
// # List, and Redis Cluster / Valkey Cluster
//
// Each bucket keeps a sorted set per state, {prefix:b}:pending,
// :uncertain, :done and :failed (the records in that state by lease end),
// and {prefix:b}:all (every record, by when its key goes), all updated by
// the same scripts that write the records; a write drops from them the
// records whose keys have gone. The hash tag {prefix:b} puts a bucket's
// records and sets in one hash slot, so every write script touches a
// single slot, as a cluster requires. List reads the sets of the states
// it asks for, a script per bucket and state, pipelined (on a cluster
// go-redis sends each to the node that owns its slot), each from the
// page's cursor and at most a page of its set per run, and merges them in
// cursor order: listing the stuck records costs the stuck records, not the
// ledger. It drops entries whose record is gone. It reads record keys that
// the script does not declare but that lie in the slot of its set, which
// Redis and Valkey allow. A List is not a snapshot: records written while
// it runs may or may not appear. A ledger spans at most Buckets (16)
// slots, which is enough for the load a ledger puts on a cluster.
//
// A ledger written by a version of this package without the uncertain,
// done and failed sets is indexed by the first List of each Store: a
// bucket without its marker key {prefix:b}:indexed is walked once through
// its set of all records. Processes of the older version that still write
// meanwhile (a rolling upgrade) leave their records out of those sets
// until the marker expires with the bucket's set of all records; upgrade
// every process of a ledger before relying on the sweeper.
//
// # Durability
//
// Redis answers a write once it is in memory. What a crash loses depends
// on the server's configuration, and a lost record means the action can
// run again:
//
//   - appendonly no (snapshots only, or none): a restart of the server loses
//     every write since the last snapshot: all of it when there is none.
//   - appendonly yes, appendfsync everysec (the usual AOF setting): a crash
//     of the server process loses nothing it acknowledged; a crash of the
//     machine or a power loss loses about the last second or two of writes.
//   - appendonly yes, appendfsync always: the AOF is synced before the
//     reply, so an acknowledged write survives a power loss too.
//   - Replication is asynchronous. A failover to a replica (Sentinel,
//     Cluster, a managed service) loses what the replica had not received.
//     Config.WaitReplicas sends WAIT with every write, in the same round
//     trip, and fails the call with ErrNotReplicated when fewer replicas
//     acknowledged it in time; WAIT means the replicas received the write,
//     not that they synced it, and it narrows the window rather than
//     closing it. (Redis 7.2 and later also offer WAITAOF, which waits for
//     the replicas' fsync; this store sends WAIT.)
//   - Eviction: every ledger key has a TTL, so a volatile-* or allkeys-*
//     maxmemory-policy can evict live records under memory pressure. Run
//     the ledger with maxmemory-policy noeviction.
//
// A claim that the server loses after acknowledging it, or a done record
// it loses, makes the next call of the action find no record: it claims
// afresh, without reconciling, and runs the tool again with the same
// downstream key (the attempt number starts at 1 again, the key of the
// first attempt). A provider that deduplicates by that key (Stripe's
// Idempotency-Key, an upsert) turns the repeat into a replay within its
// window; one that does not (most mail and SMS APIs) performs the effect a
// second time. A claim the store could not confirm (an error, a WAIT that
// fell short) is reported as an error, and the executor does not run the
// tool on it.
//
// For tools that move money use appendonly yes with appendfsync always,
// maxmemory-policy noeviction, at least one replica with WaitReplicas 1
// (and min-replicas-to-write on the server), and providers that
// deduplicate by the downstream key. Where that is not possible, keep the
// ledger in PostgreSQL or DynamoDB instead.
package ledgerredis
